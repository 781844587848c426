"""Monitoring: Log Analytics with the Azure Monitor Agent, managed Prometheus, Grafana, alerts.

* **Logs**: a Log Analytics workspace (PerGB2018), custom tables for text logs, and a data collection rule that
  sends syslog (the bootstrap steps log as ``gb300-<step>``), cloud-init's logs and health-check logs there. The
  Azure Monitor Agent runs on every node as a scale set extension (:func:`agent_extension`, placed in the scale
  set's ``extensionProfile``) and authenticates with the node identity.
* **Prometheus**: an Azure Monitor workspace and a data collection rule for the ``Microsoft-PrometheusMetrics``
  stream. Each node's Prometheus agent remote-writes to :attr:`Monitoring.remote_write_url` with the node
  identity, which holds ``Monitoring Metrics Publisher`` on that one rule and nothing else.
* **Grafana**: Azure Managed Grafana linked to the workspace; its system identity reads the workspace
  (``Monitoring Reader`` + ``Monitoring Data Reader``) and, with logs on, the Log Analytics workspace.
* **Alerts**: Prometheus rule groups from ``templates/alerts/*.yaml`` evaluated against the workspace, notifying
  an action group of the configured emails and webhooks.
* **Bootstrap alert**: a log alert (scheduled query rule) on the Log Analytics workspace that fires for each node
  whose bootstrap logged a failure (``bootstrapAlert`` in ``data/monitoring.yaml``; docs/lifecycle.md), notifying
  the same action group.

Every piece is optional; the component takes plain flags, never stack config. In a landing zone
(docs/landing-zone.md) both workspaces may be a central team's (``existing_workspace``,
``existing_monitor_workspace_id``): the rules, alerts and Grafana name them, gb300 declares neither, and its custom
tables go into the given Log Analytics workspace, retained when the cluster is destroyed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi_azure_native import alertsmanagement, compute, dashboard, monitor, operationalinsights

from gb300.facts import roles
from gb300.facts.alerts import alert_groups, iso_duration
from gb300.facts.loader import data
from gb300.paths import TEMPLATES_DIR

DASHBOARDS_DIR = TEMPLATES_DIR / "dashboards"
# The custom tables' columns (name, type): Azure's text log shape (a time, the line, its file, the node).
LOG_COLUMNS = (("TimeGenerated", "datetime"), ("RawData", "string"), ("FilePath", "string"), ("Computer", "string"))


@functools.cache
def facts() -> dict[str, Any]:
    """``data/monitoring.yaml``."""
    return data("monitoring.yaml")


def _value(raw: Any) -> Any:
    return raw["value"] if isinstance(raw, dict) and "value" in raw else raw


def agent_extension(identity_id: pulumi.Input[str]) -> dict[str, Any]:
    """The Azure Monitor Agent as one entry of a scale set's ``extensionProfile.extensions`` (ARM camelCase)."""
    ama = facts()["azureMonitorAgent"]
    return {
        "name": "AzureMonitorLinuxAgent",
        "properties": {
            "publisher": ama["publisher"],
            "type": ama["type"],
            "typeHandlerVersion": _value(ama["typeHandlerVersion"]),
            "autoUpgradeMinorVersion": bool(_value(ama["autoUpgradeMinorVersion"])),
            "enableAutomaticUpgrade": bool(_value(ama["enableAutomaticUpgrade"])),
            "settings": {
                "authentication": {"managedIdentity": {"identifier-name": "mi_res_id", "identifier-value": identity_id}}
            },
        },
    }


@dataclass(frozen=True)
class MonitoringArgs:
    """Inputs of :class:`Monitoring`: which pieces, who is told, and the node identity that sends data."""

    resource_group_name: pulumi.Input[str]
    location: str
    node_principal_id: pulumi.Input[str]
    logs: bool = True
    retention_days: int = 30
    prometheus: bool = True
    grafana: bool = True
    alerts: bool = True
    alert_emails: Sequence[str] = ()
    alert_webhooks: Sequence[pulumi.Input[str]] = ()  # secrets (webhook URLs carry tokens)
    bootstrap_alert_severity: int | None = None  # the log alert's severity (0-4); None: no bootstrap alert
    tags: dict[str, str] = field(default_factory=dict)
    existing_workspace: ExistingWorkspace | None = None
    """A Log Analytics workspace that is not gb300's (``gb300:monitoring.existingLogAnalyticsWorkspaceId``)."""
    existing_monitor_workspace_id: str | None = None
    """An Azure Monitor workspace that is not gb300's (``gb300:monitoring.prometheus.existingWorkspaceId``)."""


@dataclass(frozen=True)
class ExistingWorkspace:
    """A Log Analytics workspace a central team owns: its id, resource group and name (where gb300's tables go)."""

    id: str
    resource_group_name: str
    name: str


class Monitoring(pulumi.ComponentResource):
    """Workspaces, collection rules, Grafana and alerts. Call :meth:`attach` with the scale sets to watch."""

    workspace_id: pulumi.Output[str] | None
    monitor_workspace_id: pulumi.Output[str] | None
    remote_write_url: pulumi.Output[str] | None
    logs_rule_id: pulumi.Output[str] | None
    endpoint_id: pulumi.Output[str] | None

    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gb300:monitoring:Monitoring", name, None, opts)
        self._name = name
        self._args = args
        child = pulumi.ResourceOptions(parent=self)
        rg = args.resource_group_name
        self.workspace_id = self.monitor_workspace_id = self.remote_write_url = None
        self.logs_rule_id = self.endpoint_id = None
        self._oncall: pulumi.Output[str] | None = None

        endpoint: monitor.DataCollectionEndpoint | None = None
        if args.logs or args.prometheus:
            endpoint = monitor.DataCollectionEndpoint(
                f"{name}-dce",
                data_collection_endpoint_name=f"{name}-dce",
                resource_group_name=rg,
                location=args.location,
                kind=monitor.KnownDataCollectionEndpointResourceKind.LINUX,
                tags=args.tags,
                opts=child,
            )
            self.endpoint_id = endpoint.id

        workspace: pulumi.Output[str] | None = None
        if args.logs and endpoint is not None:
            workspace = self._logs(name, args, endpoint)
            self.workspace_id = workspace
            if args.bootstrap_alert_severity is not None:
                self._bootstrap_alert(name, args, workspace)

        amw: pulumi.Output[str] | None = None
        if args.prometheus and endpoint is not None:
            if args.existing_monitor_workspace_id is not None:
                amw = pulumi.Output.from_input(args.existing_monitor_workspace_id)
            else:
                amw = monitor.AzureMonitorWorkspace(
                    f"{name}-amw",
                    azure_monitor_workspace_name=f"{name}-amw",
                    resource_group_name=rg,
                    location=args.location,
                    tags=args.tags,
                    opts=child,
                ).id
            self.monitor_workspace_id = amw
            self._metrics_rule(name, args, endpoint, amw)

        if args.grafana and amw is not None:
            self._grafana(name, args, amw, workspace)
        if args.alerts and amw is not None:
            self._alerts(name, args, amw)

        self.register_outputs(
            {
                "workspaceId": self.workspace_id,
                "monitorWorkspaceId": self.monitor_workspace_id,
                "remoteWriteUrl": self.remote_write_url,
            }
        )

    def _assign(self, name: str, role: str, principal_id: pulumi.Input[str], scope: pulumi.Input[str]) -> None:
        roles.assign(name, role=role, scope=scope, principal_id=principal_id, parent=self)

    def _logs(self, name: str, args: MonitoringArgs, endpoint: monitor.DataCollectionEndpoint) -> pulumi.Output[str]:
        """The logs workspace's id, its custom tables and the logs collection rule."""
        child = pulumi.ResourceOptions(parent=self)
        workspace_rg: pulumi.Input[str]
        if args.existing_workspace is None:
            workspace = operationalinsights.Workspace(
                f"{name}-logs",
                workspace_name=f"{name}-logs",
                resource_group_name=args.resource_group_name,
                location=args.location,
                sku=operationalinsights.WorkspaceSkuArgs(name=operationalinsights.WorkspaceSkuNameEnum.PER_GB2018),
                retention_in_days=args.retention_days,
                tags=args.tags,
                opts=child,
            )
            workspace_id, workspace_name, workspace_rg = workspace.id, workspace.name, args.resource_group_name
        else:
            # The central team's workspace: gb300's tables go into it and stay when the cluster goes (other clusters
            # sending to the same workspace use them too).
            existing = args.existing_workspace
            workspace_id = pulumi.Output.from_input(existing.id)
            workspace_name = pulumi.Output.from_input(existing.name)
            workspace_rg = existing.resource_group_name
            child = pulumi.ResourceOptions(parent=self, retain_on_delete=True)
        columns = [operationalinsights.ColumnArgs(name=column, type=kind) for column, kind in LOG_COLUMNS]
        tables = []
        log_files = []
        flows = [monitor.DataFlowArgs(streams=["Microsoft-Syslog"], destinations=["logs"])]
        declarations: dict[str, monitor.StreamDeclarationArgs] = {}
        for table_name, spec in facts()["logTables"].items():
            table = operationalinsights.Table(
                f"{name}-{table_name.lower().replace('_', '-')}",
                table_name=table_name,
                workspace_name=workspace_name,
                resource_group_name=workspace_rg,
                retention_in_days=args.retention_days,
                schema=operationalinsights.SchemaArgs(
                    name=table_name, columns=columns, description=spec["description"]
                ),
                opts=child,
            )
            tables.append(table)
            stream = f"Custom-{table_name}"
            declarations[stream] = monitor.StreamDeclarationArgs(
                columns=[monitor.ColumnDefinitionArgs(name=column, type=kind) for column, kind in LOG_COLUMNS]
            )
            log_files.append(
                monitor.LogFilesDataSourceArgs(
                    name=table_name.lower().replace("_", "-"),
                    file_patterns=list(spec["filePatterns"]),
                    format=monitor.KnownLogFilesDataSourceFormat.TEXT,
                    streams=[stream],  # no record-start format: every line is a record (output logs have no stamps)
                )
            )
            flows.append(
                monitor.DataFlowArgs(
                    streams=[stream], destinations=["logs"], output_stream=stream, transform_kql="source"
                )
            )
        syslog = facts()["syslog"]
        rule = monitor.DataCollectionRule(
            f"{name}-logs-dcr",
            data_collection_rule_name=f"{name}-logs-dcr",
            resource_group_name=args.resource_group_name,
            location=args.location,
            kind=monitor.KnownDataCollectionRuleResourceKind.LINUX,
            description="gb300: syslog (gb300-<step> bootstrap journal), cloud-init and health-check logs",
            data_collection_endpoint_id=endpoint.id,
            stream_declarations=declarations,
            data_sources=monitor.DataCollectionRuleDataSourcesArgs(
                syslog=[
                    monitor.SyslogDataSourceArgs(
                        name="syslog",
                        streams=["Microsoft-Syslog"],
                        facility_names=list(syslog["facilities"]),
                        log_levels=list(syslog["levels"]),
                    )
                ],
                log_files=log_files,
            ),
            destinations=monitor.DataCollectionRuleDestinationsArgs(
                log_analytics=[monitor.LogAnalyticsDestinationArgs(name="logs", workspace_resource_id=workspace_id)]
            ),
            data_flows=flows,
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=tables),
        )
        self.logs_rule_id = rule.id
        return workspace_id

    def _metrics_rule(
        self,
        name: str,
        args: MonitoringArgs,
        endpoint: monitor.DataCollectionEndpoint,
        amw: pulumi.Output[str],
    ) -> None:
        prom = facts()["prometheus"]
        rule = monitor.DataCollectionRule(
            f"{name}-prom-dcr",
            data_collection_rule_name=f"{name}-prom-dcr",
            resource_group_name=args.resource_group_name,
            location=args.location,
            # Azure's documented shape for remote-write (Azure/prometheus-collector AddonArmTemplate): a Linux rule
            # whose prometheusForwarder data source feeds the stream into the Azure Monitor workspace.
            kind=monitor.KnownDataCollectionRuleResourceKind.LINUX,
            description="gb300: Prometheus remote-write from the nodes into the Azure Monitor workspace",
            data_collection_endpoint_id=endpoint.id,
            data_sources=monitor.DataCollectionRuleDataSourcesArgs(
                prometheus_forwarder=[
                    monitor.PrometheusForwarderDataSourceArgs(
                        name="prometheus", streams=[prom["stream"]], label_include_filter={}
                    )
                ]
            ),
            destinations=monitor.DataCollectionRuleDestinationsArgs(
                monitoring_accounts=[monitor.MonitoringAccountDestinationArgs(name="amw", account_resource_id=amw)]
            ),
            data_flows=[monitor.DataFlowArgs(streams=[prom["stream"]], destinations=["amw"])],
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self._assign(f"{name}-prom-publisher", "Monitoring Metrics Publisher", args.node_principal_id, rule.id)
        api = _value(prom["remoteWriteApiVersion"])
        # The endpoint is read before Output.all, which hands a nested output type on as a plain dict.
        ingestion = endpoint.metrics_ingestion.apply(_endpoint)
        self.remote_write_url = pulumi.Output.all(ingestion, rule.immutable_id).apply(
            lambda parts: (
                f"{parts[0]}/dataCollectionRules/{parts[1]}/streams/{prom['stream']}/api/v1/write?api-version={api}"
            )
        )

    def _grafana(
        self,
        name: str,
        args: MonitoringArgs,
        amw: pulumi.Output[str],
        workspace: pulumi.Output[str] | None,
    ) -> None:
        g = facts()["grafana"]
        grafana = dashboard.Grafana(
            f"{name}-grafana",
            workspace_name=grafana_name(name),
            resource_group_name=args.resource_group_name,
            location=args.location,
            sku=dashboard.ResourceSkuArgs(name=g["sku"]),
            identity=dashboard.ManagedServiceIdentityArgs(type=dashboard.ManagedServiceIdentityType.SYSTEM_ASSIGNED),
            properties=dashboard.ManagedGrafanaPropertiesArgs(
                api_key=dashboard.ApiKey.DISABLED,
                grafana_major_version=g["majorVersion"],
                grafana_integrations=dashboard.GrafanaIntegrationsArgs(
                    azure_monitor_workspace_integrations=[
                        dashboard.AzureMonitorWorkspaceIntegrationArgs(azure_monitor_workspace_resource_id=amw)
                    ]
                ),
            ),
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        principal = grafana.identity.apply(lambda i: (i.principal_id if i else None) or "")
        self._assign(f"{name}-grafana-reader", "Monitoring Reader", principal, amw)
        self._assign(f"{name}-grafana-data-reader", "Monitoring Data Reader", principal, amw)
        if workspace is not None:
            self._assign(f"{name}-grafana-logs-reader", "Log Analytics Reader", principal, workspace)

    def _action_group(self, name: str, args: MonitoringArgs) -> pulumi.Output[str] | None:
        """The id of the action group of the configured emails and webhooks (one, shared by every alert), or None."""
        if not (args.alert_emails or args.alert_webhooks):
            return None
        if self._oncall is None:
            child = pulumi.ResourceOptions(parent=self)
            group = monitor.ActionGroup(
                f"{name}-oncall",
                action_group_name=f"{name}-oncall",
                group_short_name=name[:12],
                resource_group_name=args.resource_group_name,
                location="Global",
                enabled=True,
                email_receivers=[
                    monitor.MicrosoftCommonEmailReceiverArgs(
                        name=f"email-{i}", email_address=email, use_common_alert_schema=True
                    )
                    for i, email in enumerate(args.alert_emails)
                ],
                webhook_receivers=[
                    monitor.WebhookReceiverArgs(name=f"webhook-{i}", service_uri=url, use_common_alert_schema=True)
                    for i, url in enumerate(args.alert_webhooks)
                ],
                tags=args.tags,
                opts=child,
            )
            self._oncall = group.id
        return self._oncall

    def _bootstrap_alert(self, name: str, args: MonitoringArgs, workspace: pulumi.Output[str]) -> None:
        """A log alert per node whose bootstrap logged a failure line, split by computer and failed step."""
        spec = facts()["bootstrapAlert"]
        group = self._action_group(name, args)
        condition = monitor.ConditionArgs(
            query=str(spec["query"]),
            time_aggregation=monitor.TimeAggregation.COUNT,
            operator=monitor.Operator.GREATER_THAN,
            threshold=0,
            dimensions=[
                monitor.DimensionArgs(name=column, operator=monitor.DimensionOperator.INCLUDE, values=["*"])
                for column in ("Computer", "Step")
            ],
            failing_periods=monitor.ConditionFailingPeriodsArgs(
                number_of_evaluation_periods=1, min_failing_periods_to_alert=1
            ),
        )
        monitor.ScheduledQueryRule(
            f"{name}-bootstrap-failed",
            rule_name=f"{name}-bootstrap-failed",
            resource_group_name=args.resource_group_name,
            location=args.location,
            kind=monitor.Kind.LOG_ALERT,
            display_name="gb300: node bootstrap failed",
            description="A node's bootstrap failed at a step (run-step's gb300-bootstrap line); docs/lifecycle.md",
            enabled=True,
            scopes=[workspace],
            severity=args.bootstrap_alert_severity,
            evaluation_frequency=_value(spec["evaluationFrequency"]),
            window_size=_value(spec["windowSize"]),
            criteria=monitor.ScheduledQueryRuleCriteriaArgs(all_of=[condition]),
            auto_mitigate=True,
            actions=monitor.ActionsArgs(action_groups=[group]) if group is not None else None,
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _alerts(self, name: str, args: MonitoringArgs, amw: pulumi.Output[str]) -> None:
        child = pulumi.ResourceOptions(parent=self)
        group = self._action_group(name, args)
        actions = [alertsmanagement.PrometheusRuleGroupActionArgs(action_group_id=group)] if group is not None else []
        for spec in alert_groups():
            alertsmanagement.PrometheusRuleGroup(
                f"{name}-{spec.name}",
                rule_group_name=f"{name}-{spec.name}",
                resource_group_name=args.resource_group_name,
                location=args.location,
                scopes=[amw],
                enabled=True,
                interval=iso_duration(spec.interval),
                description=f"gb300 alert rules: {spec.name}",
                rules=[
                    alertsmanagement.PrometheusRuleArgs(
                        alert=rule.alert,
                        expression=rule.expr,
                        for_=iso_duration(rule.for_),
                        severity=rule.severity,
                        enabled=True,
                        resolve_configuration=alertsmanagement.PrometheusRuleResolveConfigurationArgs(
                            auto_resolved=True, time_to_resolve="PT10M"
                        ),
                        # Left out when empty, as Azure's own rule groups leave them out.
                        labels=rule.labels or None,
                        annotations=rule.annotations or None,
                        actions=actions or None,
                    )
                    for rule in spec.rules
                ],
                tags=args.tags,
                opts=child,
            )

    def associate(
        self, resource_id: pulumi.Input[str], name: str, opts: pulumi.ResourceOptions | None = None
    ) -> monitor.DataCollectionRuleAssociation | None:
        """Associate the logs collection rule with one scale set or VM as resource ``name``; None when logs are off.

        The association is a child of this component unless ``opts`` names another parent (a rack component that
        owns its association, so retiring the rack removes it). The rule itself names the collection endpoint (its
        text log sources need one), and the agent fetches its configuration from Azure Monitor's public endpoint: a
        ``configurationAccessEndpoint`` association of the endpoint with each node is needed only behind Azure
        Monitor Private Link (learn.microsoft.com azure-monitor/data-collection/data-collection-endpoint-overview,
        "When is a DCE required?").
        """
        if self.logs_rule_id is None:
            return None
        return monitor.DataCollectionRuleAssociation(
            name,
            association_name=f"{self._name}-logs",
            data_collection_rule_id=self.logs_rule_id,
            resource_uri=resource_id,
            opts=pulumi.ResourceOptions.merge(pulumi.ResourceOptions(parent=self), opts),
        )

    def scale_set_extensions(self, identity_id: pulumi.Input[str]) -> tuple[dict[str, Any], ...]:
        """The VM extensions every scale set runs: the Azure Monitor Agent when logs are on."""
        return (agent_extension(identity_id),) if self._args.logs else ()

    def attach_vm(
        self,
        vm_name: str,
        vm_id: pulumi.Input[str],
        identity_id: pulumi.Input[str],
        *,
        location: str,
        resource_group_name: pulumi.Input[str],
    ) -> None:
        """Run the Azure Monitor Agent on a single VM (the head node) and attach the logs rule to it."""
        if self.logs_rule_id is None:
            return
        ext = agent_extension(identity_id)["properties"]
        compute.VirtualMachineExtension(
            f"{vm_name}-ama",
            vm_extension_name="AzureMonitorLinuxAgent",
            # Derived from the VM's id so the extension waits for the VM (a plain name carries no dependency).
            vm_name=pulumi.Output.from_input(vm_id).apply(lambda _: vm_name),
            resource_group_name=resource_group_name,
            location=location,
            publisher=ext["publisher"],
            type=ext["type"],
            type_handler_version=ext["typeHandlerVersion"],
            auto_upgrade_minor_version=ext["autoUpgradeMinorVersion"],
            enable_automatic_upgrade=ext["enableAutomaticUpgrade"],
            settings=ext["settings"],
            tags=self._args.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.associate(vm_id, f"{vm_name}-0001-logs")


def grafana_name(component_name: str) -> str:
    """The Grafana workspace's name, ``<component>-graf``, checked against ``grafana.name`` in the facts.

    With the longest cluster name (12 characters) the component is ``<cluster>-mon``, so the name is at most
    21 characters: within the strictest documented limit (23).
    """
    rule = facts()["grafana"]["name"]
    name = f"{component_name}-graf"
    if len(name) > int(_value(rule["maxLength"])) or not re.fullmatch(rule["pattern"], name):
        raise ValueError(f"Grafana workspace name {name!r} breaks Azure's naming rule ({rule['source']})")
    return name


def _endpoint(ingestion: monitor.outputs.DataCollectionEndpointResponseMetricsIngestion | None) -> str:
    """The endpoint URL in a data collection endpoint's ``metricsIngestion`` output, without a trailing slash."""
    return ((ingestion.endpoint if ingestion else None) or "").rstrip("/")
