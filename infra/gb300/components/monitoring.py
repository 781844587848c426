"""Monitoring: Log Analytics with the Azure Monitor Agent, managed Prometheus, Grafana, alerts.

* **Logs**: a Log Analytics workspace (PerGB2018), custom tables for text logs, and a data collection rule that
  sends syslog (the bootstrap steps log as ``gb300-<step>``), cloud-init's logs and health-check logs there. The
  Azure Monitor Agent runs on every node as a scale set extension (:func:`agent_extension`, placed in the scale
  set's ``extensionProfile``) and authenticates with the node identity.
* **Prometheus**: an Azure Monitor workspace and a data collection rule for the ``Microsoft-PrometheusMetrics``
  stream. Each node's Prometheus agent remote-writes to :attr:`Monitoring.remote_write_url` with the node
  identity, which holds ``Monitoring Metrics Publisher`` on that one rule and nothing else.
* **Grafana**: Azure Managed Grafana linked to the workspace; its system identity reads gb300's own workspace
  (``Monitoring Reader`` + ``Monitoring Data Reader``) and, with logs on, the Log Analytics workspace; a shared
  workspace only as far as :func:`grafana_reach` allows.
* **Alerts** (:mod:`gb300.components.alerting`): Prometheus rule groups from ``templates/alerts/*.yaml`` evaluated
  against the workspace, and a log alert on the Log Analytics workspace that fires for each node whose bootstrap
  logged a failure (``bootstrapAlert`` in ``data/monitoring.yaml``; docs/lifecycle.md), both notifying an action
  group of the configured emails and webhooks.

Every piece is optional; the component takes plain flags, never stack config. In a landing zone
(docs/landing-zone.md) both workspaces may be a central team's (``existing_workspace``,
``existing_monitor_workspace_id``): the rules, alerts and Grafana name them, gb300 declares neither, and its custom
tables go into the given Log Analytics workspace, retained when the cluster is destroyed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi_azure_native import compute, dashboard, monitor, operationalinsights

from gb300.components import alerting
from gb300.components.scope import ClusterScope
from gb300.facts import roles
from gb300.facts.monitoring_facts import facts, value
from gb300.paths import TEMPLATES_DIR

DASHBOARDS_DIR = TEMPLATES_DIR / "dashboards"
# The custom tables' columns (name, type): Azure's text log shape (a time, the line, its file, the node).
LOG_COLUMNS = (("TimeGenerated", "datetime"), ("RawData", "string"), ("FilePath", "string"), ("Computer", "string"))


def agent_extension(identity_id: pulumi.Input[str]) -> dict[str, Any]:
    """The Azure Monitor Agent as one entry of a scale set's ``extensionProfile.extensions`` (ARM camelCase)."""
    ama = facts()["azureMonitorAgent"]
    return {
        "name": "AzureMonitorLinuxAgent",
        "properties": {
            "publisher": ama["publisher"],
            "type": ama["type"],
            "typeHandlerVersion": value(ama["typeHandlerVersion"]),
            "autoUpgradeMinorVersion": bool(value(ama["autoUpgradeMinorVersion"])),
            "enableAutomaticUpgrade": bool(value(ama["enableAutomaticUpgrade"])),
            "settings": {
                "authentication": {"managedIdentity": {"identifier-name": "mi_res_id", "identifier-value": identity_id}}
            },
        },
    }


@dataclass(frozen=True)
class MonitoringArgs:
    """Inputs of :class:`Monitoring`: where (the scope), which pieces, who is told, and the node identity that sends
    data."""

    scope: ClusterScope
    node_principal_id: pulumi.Input[str]
    logs: bool = True
    retention_days: int = 30
    prometheus: bool = True
    grafana: bool = True
    alerts: bool = True
    alert_emails: Sequence[str] = ()
    alert_webhooks: Sequence[pulumi.Input[str]] = ()  # secrets (webhook URLs carry tokens)
    bootstrap_alert_severity: int | None = None  # the log alert's severity (0-4); None: no bootstrap alert
    existing_workspace: ExistingWorkspace | None = None
    """A Log Analytics workspace that is not gb300's (``gb300:monitoring.existingLogAnalyticsWorkspaceId``)."""
    existing_monitor_workspace_id: str | None = None
    """An Azure Monitor workspace that is not gb300's (``gb300:monitoring.prometheus.existingWorkspaceId``)."""
    rule_values: Mapping[str, str] = field(default_factory=dict)
    """The stack values the rule files' ``@name@`` marks take (:func:`gb300.facts.alerts.alert_groups`)."""
    left_out_rule_groups: frozenset[str] = frozenset()
    """Rule groups of ``templates/alerts/`` the stack turns off, by name."""
    grafana_shared_read: bool = False
    """Grafana reads the whole of a workspace that is not gb300's (``gb300:monitoring.grafana.sharedWorkspaceRead``);
    off, it reads a shared Log Analytics workspace in resource context only and a shared Azure Monitor workspace not
    at all (:func:`grafana_reach`)."""


@dataclass(frozen=True)
class ExistingWorkspace:
    """A Log Analytics workspace a central team owns: its id, resource group and name (where gb300's tables go)."""

    id: str
    resource_group_name: str
    name: str


@dataclass(frozen=True)
class _Workspace:
    """The Log Analytics workspace the logs go to, and the options of the tables gb300 puts in it."""

    id: pulumi.Output[str]
    name: pulumi.Output[str]
    resource_group_name: pulumi.Input[str]
    table_opts: pulumi.ResourceOptions


@dataclass(frozen=True)
class _LogSources:
    """The custom tables and what the logs collection rule reads into them."""

    tables: list[operationalinsights.Table]
    log_files: list[monitor.LogFilesDataSourceArgs]
    flows: list[monitor.DataFlowArgs]
    declarations: dict[str, monitor.StreamDeclarationArgs]


class Monitoring(pulumi.ComponentResource):
    """Workspaces, collection rules, Grafana and alerts. Call :meth:`associate` with the scale sets to watch."""

    workspace_id: pulumi.Output[str] | None
    monitor_workspace_id: pulumi.Output[str] | None
    remote_write_url: pulumi.Output[str] | None
    logs_rule_id: pulumi.Output[str] | None
    endpoint_id: pulumi.Output[str] | None

    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gb300:monitoring:Monitoring", name, None, opts)
        self._name = name
        self._args = args
        scope = args.scope
        self.workspace_id = self.monitor_workspace_id = self.remote_write_url = None
        self.logs_rule_id = self.endpoint_id = None
        self._oncall: pulumi.Output[str] | None = None

        endpoint: monitor.DataCollectionEndpoint | None = None
        if args.logs or args.prometheus:
            endpoint = monitor.DataCollectionEndpoint(
                f"{name}-dce",
                data_collection_endpoint_name=f"{name}-dce",
                resource_group_name=scope.resource_group_name,
                location=scope.location,
                kind=monitor.KnownDataCollectionEndpointResourceKind.LINUX,
                tags=scope.tags,
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.endpoint_id = endpoint.id

        workspace: pulumi.Output[str] | None = None
        if args.logs and endpoint is not None:
            workspace = self._logs(name, args, endpoint)
            self.workspace_id = workspace
            if args.bootstrap_alert_severity is not None:
                group = self._action_group(name, args)
                alerting.bootstrap_alert(
                    name, scope, workspace, args.bootstrap_alert_severity, group, parent=self
                )  # fmt: skip

        amw: pulumi.Output[str] | None = None
        if args.prometheus and endpoint is not None:
            amw = self._monitor_workspace(name, args)
            self.monitor_workspace_id = amw
            self._metrics_rule(name, args, endpoint, amw)

        if args.grafana and amw is not None:
            self._grafana(name, args, amw, workspace)
        if (args.alerts or args.grafana) and amw is not None:
            # The recording rules feed the goodput dashboard and alerts; the alerting groups only with the alerts.
            choice = alerting.RuleGroupChoice(
                records=True,
                alerts=args.alerts,
                values=args.rule_values,
                left_out=args.left_out_rule_groups,
            )
            oncall = self._action_group(name, args) if args.alerts else None
            alerting.prometheus_rule_groups(name, scope, amw, oncall, choice, parent=self)

        self.register_outputs(
            {
                "workspaceId": self.workspace_id,
                "monitorWorkspaceId": self.monitor_workspace_id,
                "remoteWriteUrl": self.remote_write_url,
            }
        )

    def _assign(self, name: str, role: str, principal_id: pulumi.Input[str], scope: pulumi.Input[str]) -> None:
        roles.assign(name, role=role, scope=scope, principal_id=principal_id, parent=self)

    def _action_group(self, name: str, args: MonitoringArgs) -> pulumi.Output[str] | None:
        """The id of the action group of the configured emails and webhooks (one, shared by every alert, declared
        when the first alert asks for it), or None when there is nobody to tell."""
        if not (args.alert_emails or args.alert_webhooks):
            return None
        if self._oncall is None:
            self._oncall = alerting.action_group(name, args.scope, args.alert_emails, args.alert_webhooks, parent=self)
        return self._oncall

    def _monitor_workspace(self, name: str, args: MonitoringArgs) -> pulumi.Output[str]:
        """The Azure Monitor workspace's id: gb300's own, or the central team's (``existing_monitor_workspace_id``)."""
        if args.existing_monitor_workspace_id is not None:
            return pulumi.Output.from_input(args.existing_monitor_workspace_id)
        return monitor.AzureMonitorWorkspace(
            f"{name}-amw",
            azure_monitor_workspace_name=f"{name}-amw",
            resource_group_name=args.scope.resource_group_name,
            location=args.scope.location,
            tags=args.scope.tags,
            opts=pulumi.ResourceOptions(parent=self),
        ).id

    def _workspace(self, name: str, args: MonitoringArgs) -> _Workspace:
        """The Log Analytics workspace: gb300's own, or the central team's (``existing_workspace``)."""
        scope = args.scope
        if args.existing_workspace is None:
            workspace = operationalinsights.Workspace(
                f"{name}-logs",
                workspace_name=f"{name}-logs",
                resource_group_name=scope.resource_group_name,
                location=scope.location,
                sku=operationalinsights.WorkspaceSkuArgs(name=operationalinsights.WorkspaceSkuNameEnum.PER_GB2018),
                retention_in_days=args.retention_days,
                tags=scope.tags,
                opts=pulumi.ResourceOptions(parent=self),
            )
            return _Workspace(
                workspace.id, workspace.name, scope.resource_group_name, pulumi.ResourceOptions(parent=self)
            )
        # The central team's workspace: gb300's tables go into it and stay when the cluster goes (other clusters
        # sending to the same workspace use them too).
        existing = args.existing_workspace
        return _Workspace(
            pulumi.Output.from_input(existing.id),
            pulumi.Output.from_input(existing.name),
            existing.resource_group_name,
            pulumi.ResourceOptions(parent=self, retain_on_delete=True),
        )

    def _log_tables(self, name: str, args: MonitoringArgs, workspace: _Workspace) -> _LogSources:
        """One custom table per ``logTables`` entry of the facts, and the rule's text log source and flow into it."""
        columns = [operationalinsights.ColumnArgs(name=column, type=kind) for column, kind in LOG_COLUMNS]
        sources = _LogSources(
            [], [], [monitor.DataFlowArgs(streams=["Microsoft-Syslog"], destinations=["logs"])], {}
        )  # fmt: skip
        for table_name, spec in facts()["logTables"].items():
            table = operationalinsights.Table(
                f"{name}-{table_name.lower().replace('_', '-')}",
                table_name=table_name,
                workspace_name=workspace.name,
                resource_group_name=workspace.resource_group_name,
                retention_in_days=args.retention_days,
                schema=operationalinsights.SchemaArgs(
                    name=table_name, columns=columns, description=spec["description"]
                ),
                opts=workspace.table_opts,
            )
            sources.tables.append(table)
            stream = f"Custom-{table_name}"
            sources.declarations[stream] = monitor.StreamDeclarationArgs(
                columns=[monitor.ColumnDefinitionArgs(name=column, type=kind) for column, kind in LOG_COLUMNS]
            )
            sources.log_files.append(
                monitor.LogFilesDataSourceArgs(
                    name=table_name.lower().replace("_", "-"),
                    file_patterns=list(spec["filePatterns"]),
                    format=monitor.KnownLogFilesDataSourceFormat.TEXT,
                    streams=[stream],  # no record-start format: every line is a record (output logs have no stamps)
                )
            )
            sources.flows.append(
                monitor.DataFlowArgs(
                    streams=[stream], destinations=["logs"], output_stream=stream, transform_kql="source"
                )
            )
        return sources

    def _logs(self, name: str, args: MonitoringArgs, endpoint: monitor.DataCollectionEndpoint) -> pulumi.Output[str]:
        """The logs workspace's id, its custom tables and the logs collection rule."""
        workspace = self._workspace(name, args)
        sources = self._log_tables(name, args, workspace)
        syslog = facts()["syslog"]
        rule = monitor.DataCollectionRule(
            f"{name}-logs-dcr",
            data_collection_rule_name=f"{name}-logs-dcr",
            resource_group_name=args.scope.resource_group_name,
            location=args.scope.location,
            kind=monitor.KnownDataCollectionRuleResourceKind.LINUX,
            description="gb300: syslog (gb300-<step> bootstrap journal), cloud-init and health-check logs",
            data_collection_endpoint_id=endpoint.id,
            stream_declarations=sources.declarations,
            data_sources=monitor.DataCollectionRuleDataSourcesArgs(
                syslog=[
                    monitor.SyslogDataSourceArgs(
                        name="syslog",
                        streams=["Microsoft-Syslog"],
                        facility_names=list(syslog["facilities"]),
                        log_levels=list(syslog["levels"]),
                    )
                ],
                log_files=sources.log_files,
            ),
            destinations=monitor.DataCollectionRuleDestinationsArgs(
                log_analytics=[monitor.LogAnalyticsDestinationArgs(name="logs", workspace_resource_id=workspace.id)]
            ),
            data_flows=sources.flows,
            tags=args.scope.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=sources.tables),
        )
        self.logs_rule_id = rule.id
        return workspace.id

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
            resource_group_name=args.scope.resource_group_name,
            location=args.scope.location,
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
            tags=args.scope.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self._assign(f"{name}-prom-publisher", "Monitoring Metrics Publisher", args.node_principal_id, rule.id)
        api = value(prom["remoteWriteApiVersion"])
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
            resource_group_name=args.scope.resource_group_name,
            location=args.scope.location,
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
            tags=args.scope.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        principal = grafana.identity.apply(lambda i: (i.principal_id if i else None) or "")
        scopes: dict[str, pulumi.Input[str]] = {"amw": amw, "group": args.scope.resource_group_id}
        if workspace is not None:
            scopes["workspace"] = workspace
        for key, role, where in grafana_reach(args, logs=workspace is not None):
            self._assign(f"{name}-{key}", role, principal, scopes[where])

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
    ) -> None:
        """Run the Azure Monitor Agent on a single VM (the head node, in the scope's resource group) and attach the
        logs rule to it."""
        if self.logs_rule_id is None:
            return
        ext = agent_extension(identity_id)["properties"]
        compute.VirtualMachineExtension(
            f"{vm_name}-ama",
            vm_extension_name="AzureMonitorLinuxAgent",
            # Derived from the VM's id so the extension waits for the VM (a plain name carries no dependency).
            vm_name=pulumi.Output.from_input(vm_id).apply(lambda _: vm_name),
            resource_group_name=self._args.scope.resource_group_name,
            location=self._args.scope.location,
            publisher=ext["publisher"],
            type=ext["type"],
            type_handler_version=ext["typeHandlerVersion"],
            auto_upgrade_minor_version=ext["autoUpgradeMinorVersion"],
            enable_automatic_upgrade=ext["enableAutomaticUpgrade"],
            settings=ext["settings"],
            tags=self._args.scope.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.associate(vm_id, f"{vm_name}-0001-logs")


def grafana_reach(args: MonitoringArgs, *, logs: bool) -> list[tuple[str, str, str]]:
    """Grafana identity's role assignments as (resource suffix, role, scope): ``amw`` the Azure Monitor workspace,
    ``workspace`` the Log Analytics workspace, ``group`` the cluster's resource group.

    gb300's own workspaces hold only this cluster's data: Grafana reads them whole. A shared workspace (a landing
    zone's) holds every team's: without ``grafana_shared_read`` Grafana gets Log Analytics Reader on the cluster's
    resource group only, which reads the shared workspace in resource context (the rows whose ``_ResourceId`` is one
    of this cluster's resources; the workspace's access mode must allow resource permissions, Azure's "Manage access
    to Log Analytics workspaces"), and no role on a shared Azure Monitor workspace.
    """
    out: list[tuple[str, str, str]] = []
    if args.existing_monitor_workspace_id is None or args.grafana_shared_read:
        out += [
            ("grafana-reader", "Monitoring Reader", "amw"),
            ("grafana-data-reader", "Monitoring Data Reader", "amw"),
        ]
    if logs:
        shared = args.existing_workspace is not None and not args.grafana_shared_read
        out.append(("grafana-logs-reader", "Log Analytics Reader", "group" if shared else "workspace"))
    return out


def grafana_name(component_name: str) -> str:
    """The Grafana workspace's name, ``<component>-graf``, checked against ``grafana.name`` in the facts.

    With the longest cluster name (12 characters) the component is ``<cluster>-mon``, so the name is at most
    21 characters: within the strictest documented limit (23).
    """
    rule = facts()["grafana"]["name"]
    name = f"{component_name}-graf"
    if len(name) > int(value(rule["maxLength"])) or not re.fullmatch(rule["pattern"], name):
        raise ValueError(f"Grafana workspace name {name!r} breaks Azure's naming rule ({rule['source']})")
    return name


def _endpoint(ingestion: monitor.outputs.DataCollectionEndpointResponseMetricsIngestion | None) -> str:
    """The endpoint URL in a data collection endpoint's ``metricsIngestion`` output, without a trailing slash."""
    return ((ingestion.endpoint if ingestion else None) or "").rstrip("/")
