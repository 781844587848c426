"""``gb300:monitoring`` and ``gb300:health``: Azure Monitor, managed Prometheus, Grafana, alerts, and the GPU node
health gate."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field

from gb300.config.base import Checks, ConfigModel
from gb300.config.checks import PathError, check_email, check_webhook
from gb300.config.resource_ids import LOG_ANALYTICS, MONITOR_WORKSPACE, ResourceId, check, parse
from gb300.config.secrets import StackSecret
from gb300.config.text import text_limit


class BootstrapAlertSettings(ConfigModel):
    """``gb300:monitoring.logs.bootstrapAlert``: a log alert (a scheduled query rule on the workspace) for each node
    whose bootstrap fails, from the first step on (docs/lifecycle.md#bootstrap-failures-in-azure-monitor)."""

    enabled: bool = True
    """`false` turns the alert off (it needs `logs.enabled`)."""
    severity: Annotated[int, Field(ge=0, le=4, strict=True)] = 1
    """Azure's alert severity, 0 (critical) to 4 (verbose); the alert notifies the action group of
    `gb300:monitoring.alerts.emails` and `webhooks`."""


class LogsSettings(ConfigModel):
    """``gb300:monitoring.logs``: Log Analytics, the Azure Monitor Agent and the log data collection rules."""

    enabled: bool = True
    """`false` turns logs off."""
    retention_days: Annotated[int, Field(ge=30, le=730, strict=True)] = 30
    """Workspace and table retention, days."""
    bootstrap_alert: BootstrapAlertSettings = Field(default_factory=BootstrapAlertSettings)
    """A log alert for each node whose bootstrap fails (docs/lifecycle.md#bootstrap-failures-in-azure-monitor)."""


class PrometheusSettings(ConfigModel):
    """``gb300:monitoring.prometheus``: Azure Monitor workspace; exporters and a remote-writing agent on nodes."""

    enabled: bool = True
    """`false` turns managed Prometheus off, and with it Grafana and alerts."""
    scrape_interval_seconds: Annotated[int, Field(ge=5, le=300, strict=True)] = 30
    """The agents' scrape interval, seconds."""
    existing_workspace_id: (
        Annotated[str, Field(max_length=text_limit("resourceId")), AfterValidator(check(MONITOR_WORKSPACE))] | None
    ) = None
    """Id of an existing Azure Monitor workspace (`Microsoft.Monitor/accounts`, a central monitoring team's): the
    nodes' metrics, the alert rules and Grafana use it, and gb300 declares no workspace of its own
    (docs/landing-zone.md)."""


class GrafanaSettings(ConfigModel):
    """``gb300:monitoring.grafana``: Azure Managed Grafana over the Azure Monitor workspace."""

    enabled: bool = True
    """Azure Managed Grafana; needs `prometheus.enabled`."""
    shared_workspace_read: bool = False
    """With a workspace that is not gb300's (a landing zone's shared ones), `true` grants Grafana's identity read on
    the whole of it: Log Analytics Reader on the Log Analytics workspace and Monitoring Data Reader on the Azure
    Monitor workspace, so every Grafana user reads every team's logs and metrics there (rule
    `grafana-shared-workspace-read` warns). `false`: Grafana reads the shared Log Analytics workspace only in resource
    context (its rows from this cluster's resource group) and gets no role on a shared Azure Monitor workspace
    (docs/landing-zone.md#grafanas-reach)."""


def _check_webhook_unless_secret(value: str | StackSecret) -> str | StackSecret:
    """A plain URL is checked; a secret's text is unknown offline (rule `stack-secrets` says so)."""
    return value if isinstance(value, StackSecret) else check_webhook(value)


class GoodputAlertSettings(ConfigModel):
    """``gb300:monitoring.alerts.goodput``: the goodput alerts over the recorded split of the paid GPUs
    (docs/goodput.md#over-time-the-recording-rules-and-the-dashboard)."""

    enabled: bool = True
    """`false` leaves out the two goodput alerts (the recording rules and the dashboard stay)."""
    floor: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = 0.8
    """`GoodputBelowFloor` fires when the share of paid GPUs in jobs (`cluster:gb300_gpus_in_jobs:ratio`) stays
    under this fraction for `floorMinutes`."""
    floor_minutes: Annotated[int, Field(ge=5, le=1440, strict=True)] = 60
    """How long the share stays under `floor` before `GoodputBelowFloor` fires, minutes."""
    drained_minutes: Annotated[int, Field(ge=5, le=10080, strict=True)] = 240
    """`GpusDrainedTooLong` fires when some of the cluster's GPUs have stayed drained (Slurm's DRAINED nodes, by the
    health gate or the repair loop) this long, minutes."""

    def rule_values(self, gpus_per_node: int) -> dict[str, str]:
        """The ``@name@`` values of ``templates/alerts/goodput.yaml`` (:func:`gb300.facts.alerts.alert_groups`)."""
        return {
            "gpus_per_node": str(gpus_per_node),
            "goodput_floor": repr(self.floor),
            "goodput_for": f"{self.floor_minutes}m",
            "drained_for": f"{self.drained_minutes}m",
        }


class AlertSettings(ConfigModel):
    """``gb300:monitoring.alerts``: Prometheus alert rule groups and who is told."""

    enabled: bool = True
    """Alert rules and the action group; need `prometheus.enabled`."""
    emails: list[Annotated[str, Field(max_length=text_limit("emailAddress")), AfterValidator(check_email)]] = Field(
        default_factory=list
    )
    """Email addresses that are notified."""
    webhooks: list[
        Annotated[
            Annotated[str, Field(max_length=text_limit("url"))] | StackSecret,
            AfterValidator(_check_webhook_unless_secret),
        ]
    ] = Field(default_factory=list)
    """Https URLs called by every alert (common alert schema). Each may be a Pulumi secret (`pulumi config set
    --secret --path 'gb300:monitoring.alerts.webhooks[0]' <url>`): the action group receives every webhook as a
    secret, and `gb300 plan`, which cannot decrypt it, skips its https:// check (rule `stack-secrets`)."""
    goodput: GoodputAlertSettings = Field(default_factory=GoodputAlertSettings)
    """Alerts when goodput falls under a floor or GPUs stay drained too long (docs/goodput.md)."""


class MonitoringSettings(ConfigModel):
    """``gb300:monitoring``: Azure Monitor, managed Prometheus and Grafana. Every piece is on unless disabled."""

    logs: LogsSettings = Field(default_factory=LogsSettings)
    """Log Analytics (PerGB2018), the Azure Monitor Agent on every node, syslog/cloud-init/health log collection."""
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    """Azure Monitor workspace; DCGM and node exporters and a remote-writing Prometheus agent on every node."""
    grafana: GrafanaSettings = Field(default_factory=GrafanaSettings)
    """Azure Managed Grafana linked to the workspace."""
    alerts: AlertSettings = Field(default_factory=AlertSettings)
    """Prometheus alert rule groups (`templates/alerts/`) and an action group."""
    existing_log_analytics_workspace_id: (
        Annotated[str, Field(max_length=text_limit("resourceId")), AfterValidator(check(LOG_ANALYTICS))] | None
    ) = None
    """Id of an existing Log Analytics workspace (a central monitoring team's): the log data collection rule and the
    bootstrap alert use it, gb300 declares no workspace of its own and adds its two custom tables to this one (kept
    when the cluster is destroyed; docs/landing-zone.md)."""

    @property
    def existing_log_analytics_workspace(self) -> ResourceId | None:
        """The parsed ``existingLogAnalyticsWorkspaceId``, or None."""
        ws = self.existing_log_analytics_workspace_id
        return parse(ws) if ws is not None else None

    def check_existing_needs_enabled(self) -> None:
        """An existing Log Analytics workspace is given only when logs are on."""
        if self.existing_log_analytics_workspace_id is not None and not self.logs.enabled:
            raise PathError(
                ("monitoring", "existingLogAnalyticsWorkspaceId"),
                "needs gb300:monitoring.logs.enabled: true (logs are off, nothing would use it); remove one of them",
            )
        if self.prometheus.existing_workspace_id is not None and not self.prometheus.enabled:
            raise PathError(
                ("monitoring", "prometheus", "existingWorkspaceId"),
                "needs gb300:monitoring.prometheus.enabled: true (metrics are off, nothing would use it); remove one "
                "of them",
            )

    def check_needs_prometheus(self) -> None:
        """Grafana and the alerts are on only with managed Prometheus, which they read."""
        if not self.prometheus.enabled:
            for key, piece in (("grafana", self.grafana), ("alerts", self.alerts)):
                if piece.enabled:
                    raise PathError(
                        ("monitoring", key, "enabled"),
                        "needs gb300:monitoring.prometheus.enabled: true (it reads the Azure Monitor workspace); "
                        "set it to false too",
                    )

    CHECKS: ClassVar[Checks] = (check_existing_needs_enabled, check_needs_prometheus)


class HealthSettings(ConfigModel):
    """``gb300:health``: the GPU node health gate (``gb300-health-check``, see docs/health.md).

    ``softFailuresToDrain``: how many consecutive failures of a soft check (one that can be transient: a service,
    a mount, an IB port, a temperature) drain the node; hardware faults drain on the first failure regardless.
    """

    soft_failures_to_drain: Annotated[int, Field(ge=1, le=20, strict=True)] = 3
    """Failed runs in a row before a soft check (service, mount, IB port, temperature, ...) drains the node; hardware
    faults drain at once.
    """
