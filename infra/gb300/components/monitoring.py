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

Every piece is optional; the component takes plain flags, never stack config.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi

from gb300.components.arm_resource import ArmResource, token
from gb300.facts import roles
from gb300.facts.alerts import alert_groups, iso_duration
from gb300.facts.loader import data
from gb300.paths import TEMPLATES_DIR

DASHBOARDS_DIR = TEMPLATES_DIR / "dashboards"
ASSOCIATION = token("monitor", "DataCollectionRuleAssociation")
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
    alert_webhooks: Sequence[str] = ()
    bootstrap_alert_severity: int | None = None  # the log alert's severity (0-4); None: no bootstrap alert
    tags: dict[str, str] = field(default_factory=dict)


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

        endpoint: ArmResource | None = None
        if args.logs or args.prometheus:
            endpoint = ArmResource(
                f"{name}-dce",
                {
                    "dataCollectionEndpointName": f"{name}-dce",
                    "resourceGroupName": rg,
                    "location": args.location,
                    "kind": "Linux",
                    "tags": args.tags,
                },
                child,
                type_=token("monitor", "DataCollectionEndpoint"),
                outputs=("metricsIngestion",),
            )
            self.endpoint_id = endpoint.id

        workspace: ArmResource | None = None
        if args.logs and endpoint is not None:
            workspace = self._logs(name, args, endpoint)
            self.workspace_id = workspace.id
            if args.bootstrap_alert_severity is not None:
                self._bootstrap_alert(name, args, workspace)

        amw: ArmResource | None = None
        if args.prometheus and endpoint is not None:
            amw = ArmResource(
                f"{name}-amw",
                {
                    "azureMonitorWorkspaceName": f"{name}-amw",
                    "resourceGroupName": rg,
                    "location": args.location,
                    "tags": args.tags,
                },
                child,
                type_=token("monitor", "AzureMonitorWorkspace"),
            )
            self.monitor_workspace_id = amw.id
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

    def _logs(self, name: str, args: MonitoringArgs, endpoint: ArmResource) -> ArmResource:
        child = pulumi.ResourceOptions(parent=self)
        workspace = ArmResource(
            f"{name}-logs",
            {
                "workspaceName": f"{name}-logs",
                "resourceGroupName": args.resource_group_name,
                "location": args.location,
                "sku": {"name": "PerGB2018"},
                "retentionInDays": args.retention_days,
                "tags": args.tags,
            },
            child,
            type_=token("operationalinsights", "Workspace"),
            outputs=("name",),
        )
        columns = [{"name": column, "type": kind} for column, kind in LOG_COLUMNS]
        tables = []
        log_files = []
        flows: list[dict[str, Any]] = [{"streams": ["Microsoft-Syslog"], "destinations": ["logs"]}]
        declarations: dict[str, Any] = {}
        for table_name, spec in facts()["logTables"].items():
            table = ArmResource(
                f"{name}-{table_name.lower().replace('_', '-')}",
                {
                    "tableName": table_name,
                    "workspaceName": workspace.output("name"),
                    "resourceGroupName": args.resource_group_name,
                    "retentionInDays": args.retention_days,
                    "schema": {"name": table_name, "columns": columns, "description": spec["description"]},
                },
                child,
                type_=token("operationalinsights", "Table"),
            )
            tables.append(table)
            stream = f"Custom-{table_name}"
            declarations[stream] = {"columns": columns}
            log_files.append(
                {
                    "name": table_name.lower().replace("_", "-"),
                    "filePatterns": list(spec["filePatterns"]),
                    "format": "text",
                    "streams": [stream],  # no record-start format: every line is a record (output logs have no stamps)
                }
            )
            flows.append(
                {"streams": [stream], "destinations": ["logs"], "outputStream": stream, "transformKql": "source"}
            )
        syslog = facts()["syslog"]
        rule = ArmResource(
            f"{name}-logs-dcr",
            {
                "dataCollectionRuleName": f"{name}-logs-dcr",
                "resourceGroupName": args.resource_group_name,
                "location": args.location,
                "kind": "Linux",
                "description": "gb300: syslog (gb300-<step> bootstrap journal), cloud-init and health-check logs",
                "dataCollectionEndpointId": endpoint.id,
                "streamDeclarations": declarations,
                "dataSources": {
                    "syslog": [
                        {
                            "name": "syslog",
                            "streams": ["Microsoft-Syslog"],
                            "facilityNames": list(syslog["facilities"]),
                            "logLevels": list(syslog["levels"]),
                        }
                    ],
                    "logFiles": log_files,
                },
                "destinations": {"logAnalytics": [{"name": "logs", "workspaceResourceId": workspace.id}]},
                "dataFlows": flows,
                "tags": args.tags,
            },
            pulumi.ResourceOptions(parent=self, depends_on=tables),
            type_=token("monitor", "DataCollectionRule"),
        )
        self.logs_rule_id = rule.id
        return workspace

    def _metrics_rule(self, name: str, args: MonitoringArgs, endpoint: ArmResource, amw: ArmResource) -> None:
        prom = facts()["prometheus"]
        rule = ArmResource(
            f"{name}-prom-dcr",
            {
                "dataCollectionRuleName": f"{name}-prom-dcr",
                "resourceGroupName": args.resource_group_name,
                "location": args.location,
                # Azure's documented shape for remote-write (Azure/prometheus-collector AddonArmTemplate): a Linux
                # rule whose prometheusForwarder data source feeds the stream into the Azure Monitor workspace.
                "kind": "Linux",
                "description": "gb300: Prometheus remote-write from the nodes into the Azure Monitor workspace",
                "dataCollectionEndpointId": endpoint.id,
                "dataSources": {
                    "prometheusForwarder": [
                        {"name": "prometheus", "streams": [prom["stream"]], "labelIncludeFilter": {}}
                    ]
                },
                "destinations": {"monitoringAccounts": [{"name": "amw", "accountResourceId": amw.id}]},
                "dataFlows": [{"streams": [prom["stream"]], "destinations": ["amw"]}],
                "tags": args.tags,
            },
            pulumi.ResourceOptions(parent=self),
            type_=token("monitor", "DataCollectionRule"),
            outputs=("immutableId",),
        )
        self._assign(f"{name}-prom-publisher", "Monitoring Metrics Publisher", args.node_principal_id, rule.id)
        api = _value(prom["remoteWriteApiVersion"])
        ingestion, immutable_id = endpoint.output("metricsIngestion"), rule.output("immutableId")
        self.remote_write_url = pulumi.Output.all(ingestion, immutable_id).apply(
            lambda parts: (
                f"{_endpoint(parts[0])}/dataCollectionRules/{parts[1]}/streams/{prom['stream']}"
                f"/api/v1/write?api-version={api}"
            )
        )

    def _grafana(self, name: str, args: MonitoringArgs, amw: ArmResource, workspace: ArmResource | None) -> None:
        g = facts()["grafana"]
        grafana = ArmResource(
            f"{name}-grafana",
            {
                "workspaceName": grafana_name(name),
                "resourceGroupName": args.resource_group_name,
                "location": args.location,
                "sku": {"name": g["sku"]},
                "identity": {"type": "SystemAssigned"},
                "properties": {
                    "apiKey": "Disabled",
                    "grafanaMajorVersion": g["majorVersion"],
                    "grafanaIntegrations": {
                        "azureMonitorWorkspaceIntegrations": [{"azureMonitorWorkspaceResourceId": amw.id}]
                    },
                },
                "tags": args.tags,
            },
            pulumi.ResourceOptions(parent=self),
            type_=token("dashboard", "Grafana"),
        )
        principal = grafana.output("identity").apply(lambda i: str((i or {}).get("principalId") or ""))
        self._assign(f"{name}-grafana-reader", "Monitoring Reader", principal, amw.id)
        self._assign(f"{name}-grafana-data-reader", "Monitoring Data Reader", principal, amw.id)
        if workspace is not None:
            self._assign(f"{name}-grafana-logs-reader", "Log Analytics Reader", principal, workspace.id)

    def _action_group(self, name: str, args: MonitoringArgs) -> pulumi.Output[str] | None:
        """The id of the action group of the configured emails and webhooks (one, shared by every alert), or None."""
        if not (args.alert_emails or args.alert_webhooks):
            return None
        if self._oncall is None:
            child = pulumi.ResourceOptions(parent=self)
            group = ArmResource(
                f"{name}-oncall",
                {
                    "actionGroupName": f"{name}-oncall",
                    "groupShortName": name[:12],
                    "resourceGroupName": args.resource_group_name,
                    "location": "Global",
                    "enabled": True,
                    "emailReceivers": [
                        {"name": f"email-{i}", "emailAddress": email, "useCommonAlertSchema": True}
                        for i, email in enumerate(args.alert_emails)
                    ],
                    "webhookReceivers": [
                        {"name": f"webhook-{i}", "serviceUri": url, "useCommonAlertSchema": True, "useAadAuth": False}
                        for i, url in enumerate(args.alert_webhooks)
                    ],
                    "tags": args.tags,
                },
                child,
                type_=token("monitor", "ActionGroup"),
            )
            self._oncall = group.id
        return self._oncall

    def _bootstrap_alert(self, name: str, args: MonitoringArgs, workspace: ArmResource) -> None:
        """A log alert per node whose bootstrap logged a failure line, split by computer and failed step."""
        spec = facts()["bootstrapAlert"]
        group = self._action_group(name, args)
        condition = {
            "query": str(spec["query"]),
            "timeAggregation": "Count",
            "operator": "GreaterThan",
            "threshold": 0,
            "dimensions": [{"name": column, "operator": "Include", "values": ["*"]} for column in ("Computer", "Step")],
            "failingPeriods": {"numberOfEvaluationPeriods": 1, "minFailingPeriodsToAlert": 1},
        }
        ArmResource(
            f"{name}-bootstrap-failed",
            {
                "ruleName": f"{name}-bootstrap-failed",
                "resourceGroupName": args.resource_group_name,
                "location": args.location,
                "kind": "LogAlert",
                "displayName": "gb300: node bootstrap failed",
                "description": (
                    "A node's bootstrap failed at a step (run-step's gb300-bootstrap line); docs/lifecycle.md"
                ),
                "enabled": True,
                "scopes": [workspace.id],
                "severity": args.bootstrap_alert_severity,
                "evaluationFrequency": _value(spec["evaluationFrequency"]),
                "windowSize": _value(spec["windowSize"]),
                "criteria": {"allOf": [condition]},
                "autoMitigate": True,
                "actions": {"actionGroups": [group]} if group is not None else None,
                "tags": args.tags,
            },
            pulumi.ResourceOptions(parent=self),
            type_=token("monitor", "ScheduledQueryRule"),
        )

    def _alerts(self, name: str, args: MonitoringArgs, amw: ArmResource) -> None:
        child = pulumi.ResourceOptions(parent=self)
        group = self._action_group(name, args)
        actions = [{"actionGroupId": group}] if group is not None else []
        for spec in alert_groups():
            rules = []
            for rule in spec.rules:
                entry: dict[str, Any] = {
                    "alert": rule.alert,
                    "expression": rule.expr,
                    "for": iso_duration(rule.for_),
                    "severity": rule.severity,
                    "enabled": True,
                    "resolveConfiguration": {"autoResolved": True, "timeToResolve": "PT10M"},
                }
                # Left out when empty, as Azure's own rule groups leave them out.
                for key, value in (("labels", rule.labels), ("annotations", rule.annotations), ("actions", actions)):
                    if value:
                        entry[key] = value
                rules.append(entry)
            ArmResource(
                f"{name}-{spec.name}",
                {
                    "ruleGroupName": f"{name}-{spec.name}",
                    "resourceGroupName": args.resource_group_name,
                    "location": args.location,
                    "scopes": [amw.id],
                    "enabled": True,
                    "interval": iso_duration(spec.interval),
                    "description": f"gb300 alert rules: {spec.name}",
                    "rules": rules,
                    "tags": args.tags,
                },
                child,
                type_=token("alertsmanagement", "PrometheusRuleGroup"),
            )

    def associate(self, name: str, resource_id: pulumi.Input[str], opts: pulumi.ResourceOptions) -> None:
        """Associate the logs collection rule with one scale set or VM (a rack's association is the rack's child:
        docs/scale.md).

        The rule itself names the collection endpoint (its text log sources need one), and the agent fetches its
        configuration from Azure Monitor's public endpoint: a ``configurationAccessEndpoint`` association of the
        endpoint with each node is needed only behind Azure Monitor Private Link (learn.microsoft.com
        azure-monitor/data-collection/data-collection-endpoint-overview, "When is a DCE required?").
        """
        if self.logs_rule_id is None:
            return
        ArmResource(
            name,
            {
                "associationName": f"{self._name}-logs",
                "dataCollectionRuleId": self.logs_rule_id,
                "resourceUri": resource_id,
            },
            opts=opts,
            type_=ASSOCIATION,
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
        ArmResource(
            f"{vm_name}-ama",
            {
                "vmExtensionName": "AzureMonitorLinuxAgent",
                # Derived from the VM's id so the extension waits for the VM (a plain name carries no dependency).
                "vmName": pulumi.Output.from_input(vm_id).apply(lambda _: vm_name),
                "resourceGroupName": resource_group_name,
                "location": location,
                **ext,
                "tags": self._args.tags,
            },
            pulumi.ResourceOptions(parent=self),
            type_=token("compute", "VirtualMachineExtension"),
        )
        self.associate(f"{vm_name}-0001-logs", vm_id, pulumi.ResourceOptions(parent=self))


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


def _endpoint(ingestion: Any) -> str:
    """The endpoint URL in a data collection endpoint's ``metricsIngestion`` output, without a trailing slash."""
    return str((ingestion or {}).get("endpoint") or "").rstrip("/")
