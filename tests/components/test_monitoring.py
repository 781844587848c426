"""Monitoring: its resources, the exporters' metric names behind every dashboard panel and alert, optional pieces."""

from __future__ import annotations

import copy
import csv
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from gb300 import config
from gb300.azure import inventory
from gb300.components import ClusterScope
from gb300.components.monitoring import Monitoring, MonitoringArgs
from gb300.errors import ConfigError
from gb300.facts import alerts
from gb300.paths import DATA_DIR, TEMPLATES_DIR
from gb300.plan import PlanResult
from gb300.plan.runner import register
from gb300.resources import ResourceRecord
from tests.support.arm import arm_body
from tests.support.config_errors import error_lines

DASHBOARDS = sorted((TEMPLATES_DIR / "dashboards").glob("*.json"))
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
    "sum", "min", "max", "avg", "count", "count_values", "stddev", "stdvar", "topk", "bottomk", "quantile",
    "rate", "irate", "increase", "delta", "idelta", "changes", "resets", "max_over_time", "min_over_time",
    "avg_over_time", "sum_over_time", "count_over_time", "last_over_time", "absent", "absent_over_time",
    "label_values", "time", "timestamp", "vector", "scalar", "clamp_min", "clamp_max", "abs", "histogram_quantile",
    "inf", "nan",
}  # fmt: skip


@cache
def known_metrics() -> dict[str, set[str]]:
    """Metric names per exporter, and the names gb300's recording rules record (``recorded``), from
    data/metrics.yaml."""
    doc = yaml.safe_load((DATA_DIR / "metrics.yaml").read_text())
    known = {name: set(exp["metrics"]) for name, exp in doc["exporters"].items()}
    return {**known, "recorded": set(doc["recorded"]["metrics"])}


def rule_groups(reference_raw: dict[str, Any]) -> list[alerts.AlertGroup]:
    """Every rule group of templates/alerts/, filled with the reference stack's values."""
    cfg = config.parse(reference_raw)
    gpus = max(pool.sku.gpus for pool in cfg.gpu_pools)
    return alerts.alert_groups(cfg.monitoring.alerts.goodput.rule_values(gpus))


def unlisted(expr: str) -> set[str]:
    """The names ``expr`` reads that data/metrics.yaml does not list."""
    return metric_names(expr) - all_metrics()


def all_metrics() -> set[str]:
    return set().union(*known_metrics().values())


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (identifiers that are not functions, keywords or labels)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1", text)  # grouping labels
    text = re.sub(r"\$\w+", "", text)  # Grafana variables
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = match.group(0)
        rest = text[match.end() :].lstrip()
        if word in PROMQL_WORDS or rest.startswith("("):
            continue
        names.add(word)
    return names


def _targets(panel: dict[str, Any]) -> list[str]:
    return [t["expr"] for t in panel.get("targets", []) if t.get("expr")]


def _panels(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for panel in doc["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def test_metric_name_extraction() -> None:
    """The PromQL reader finds metrics and skips functions, labels, grouping and variables."""
    expr = 'sum by (rack) (rate(node_x_total{cluster="$cluster", rack=~"a|b"}[5m])) / on(instance) up unless foo'
    assert metric_names(expr) == {"node_x_total", "up", "foo"}


def test_dcgm_counters_file_matches_the_metric_list() -> None:
    """The dcgm-exporter counters file we ship enables exactly the DCGM metrics listed in data/metrics.yaml."""
    lines = (TEMPLATES_DIR / "dcgm-exporter" / "counters.csv").read_text().splitlines()
    rows = list(csv.reader(line for line in lines if line.strip() and not line.startswith("#")))
    fields = {row[0].strip(): row[1].strip() for row in rows}
    doc = yaml.safe_load((DATA_DIR / "metrics.yaml").read_text())
    assert fields == doc["exporters"]["dcgm"]["metrics"]


def test_metric_list_has_sources() -> None:
    """Every exporter in data/metrics.yaml says where its metric names come from."""
    doc = yaml.safe_load((DATA_DIR / "metrics.yaml").read_text())
    for name, exporter in doc["exporters"].items():
        assert exporter["source"], name
        assert exporter["status"] in {"verified", "unverified", "conflict"}


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_queries_name_exported_metrics(path: Path) -> None:
    """Every panel of every dashboard parses and queries only metrics the node exporters emit."""
    doc = json.loads(path.read_text())
    assert doc["uid"].startswith("gb300-")
    panels = [p for p in _panels(doc) if p["type"] != "row"]
    assert panels
    for panel in panels:
        exprs = _targets(panel)
        assert exprs, panel["title"]
        for expr in exprs:
            names = metric_names(expr)
            assert names, (panel["title"], expr)
            assert names <= all_metrics(), (panel["title"], names - all_metrics())


def test_rack_dashboard_covers_the_issue() -> None:
    """The rack dashboard has a rack variable and covers GPUs, power, thermals, XID, NVLink, IB and node health."""
    doc = json.loads((TEMPLATES_DIR / "dashboards" / "gb300-rack.json").read_text())
    assert "rack" in {v["name"] for v in doc["templating"]["list"]}
    used = set().union(*(metric_names(e) for p in _panels(doc) for e in _targets(p)))
    for metric in (
        "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "node_infiniband_port_data_transmitted_bytes_total", "node_infiniband_port_errors_received_total",
        "gb300_bootstrap_done", "up",
    ):  # fmt: skip
        assert metric in used, metric
    for expr in (e for p in _panels(doc) for e in _targets(p)):
        assert 'rack=~"$rack"' in expr


def test_alert_expressions_name_exported_metrics(reference_raw: dict[str, Any]) -> None:
    """Every alert and recording rule expression references only metrics data/metrics.yaml lists, and every alert
    has a severity and a summary."""
    groups = rule_groups(reference_raw)
    assert groups
    for group in groups:
        for rule in group.rules:
            assert metric_names(rule.expr), rule.alert
            assert unlisted(rule.expr) == set(), rule.alert
            assert 0 <= rule.severity <= 4
            assert rule.annotations["summary"]
        for record in group.records:
            assert metric_names(record.expr), record.record
            assert unlisted(record.expr) == set(), record.record


def test_recorded_names_are_the_rules_records(reference_raw: dict[str, Any]) -> None:
    """data/metrics.yaml's `recorded` list is exactly what the recording rules record, so a dashboard cannot read a
    recorded name no rule makes."""
    records = {r.record for group in rule_groups(reference_raw) for r in group.records}
    assert records
    assert records == known_metrics()["recorded"]


def test_an_unlisted_name_in_a_goodput_query_is_caught() -> None:
    """A goodput panel or rule that reads a metric data/metrics.yaml does not list is caught by the name check,
    functions, labels, strings and grouping notwithstanding."""
    doc = json.loads((TEMPLATES_DIR / "dashboards" / "gb300-goodput.json").read_text())
    expr = _targets(_panels(doc)[0])[0]
    assert unlisted(expr) == set()
    added = f'{expr} + on (cluster) label_replace(slurm_nodes_drainingg{{x="y"}}, "a", "$1", "b", "(.*)")'
    assert unlisted(added) == {"slurm_nodes_drainingg"}


def test_goodput_values_come_from_the_stack(reference_raw: dict[str, Any]) -> None:
    """The goodput alerts carry the stack's floor and drained time, and a rule file naming a value the stack does
    not give is refused with the value's name."""
    raw = copy.deepcopy(reference_raw)
    raw.setdefault("monitoring", {}).setdefault("alerts", {})["goodput"] = {"floor": 0.55, "drainedMinutes": 90}
    rules = {rule.alert: rule for group in rule_groups(raw) for rule in group.rules}
    assert rules["GoodputBelowFloor"].expr.endswith("< 0.55")
    assert rules["GpusDrainedTooLong"].for_ == "90m"
    with pytest.raises(ValueError, match="@goodput_floor@ names no stack value"):
        alerts.alert_groups({"gpus_per_node": "4"})


def test_alerts_cover_the_issue(reference_raw: dict[str, Any]) -> None:
    """There are alerts for XID errors, ECC errors, an IB port down, a GPU off the bus, a node not ready, goodput
    under its floor and GPUs drained too long."""
    names = {rule.alert for group in rule_groups(reference_raw) for rule in group.rules}
    assert {
        "GpuXidError", "GpuEccDoubleBitError", "InfinibandPortDown", "GpuFallenOffTheBus", "NodeNotReady",
        "GoodputBelowFloor", "GpusDrainedTooLong",
    } <= names  # fmt: skip


def _of(plan: PlanResult, typ: str) -> list[ResourceRecord]:
    return [r for r in plan.resources if r.type == f"azure-native:{typ}"]


def test_log_analytics_and_agent_on_every_node(reference_plan: PlanResult) -> None:
    """A PerGB2018 workspace, and the Azure Monitor Agent on every scale set and the head node, as the node identity."""
    (workspace,) = _of(reference_plan, "operationalinsights:Workspace")
    assert workspace.inputs["sku"] == {"name": "PerGB2018"}
    identity = _of(reference_plan, "managedidentity:UserAssignedIdentity")[0]
    sets = inventory.scale_sets(reference_plan.resources)
    assert len(sets) == 64
    for ss in sets:
        (ext,) = ss.properties["virtualMachineProfile"]["extensionProfile"]["extensions"]
        assert ext["publisher"] == "Microsoft.Azure.Monitor"
        assert ext["type"] == "AzureMonitorLinuxAgent"
        auth = ext["settings"]["authentication"]["managedIdentity"]
        assert auth == {"identifier-name": "mi_res_id", "identifier-value": identity.id}
        # The node stays as built: no agent upgrade under a running VM, the current minor at (re)image time.
        assert ext["enableAutomaticUpgrade"] is False
        assert ext["autoUpgradeMinorVersion"] is True
    (head_agent,) = _of(reference_plan, "compute:VirtualMachineExtension")
    assert head_agent.inputs["type"] == "AzureMonitorLinuxAgent"
    assert head_agent.inputs["enableAutomaticUpgrade"] is False
    assert head_agent.inputs["settings"]["authentication"]["managedIdentity"]["identifier-value"] == identity.id


def test_log_collection_rule_and_associations(reference_plan: PlanResult) -> None:
    """The logs rule collects syslog, cloud-init and health logs into the workspace and is attached to every rack."""
    rule = next(r for r in _of(reference_plan, "monitor:DataCollectionRule") if r.name.endswith("-logs-dcr"))
    (workspace,) = _of(reference_plan, "operationalinsights:Workspace")
    sources = rule.inputs["dataSources"]
    assert sources["syslog"][0]["streams"] == ["Microsoft-Syslog"]
    assert "user" in sources["syslog"][0]["facilityNames"]
    patterns = [p for src in sources["logFiles"] for p in src["filePatterns"]]
    assert "/var/log/cloud-init.log" in patterns
    assert "/var/log/cloud-init-output.log" in patterns
    assert any("health" in p for p in patterns)
    assert rule.inputs["destinations"]["logAnalytics"][0]["workspaceResourceId"] == workspace.id
    tables = {t.inputs["tableName"] for t in _of(reference_plan, "operationalinsights:Table")}
    assert {s[len("Custom-") :] for src in sources["logFiles"] for s in src["streams"]} == tables
    associations = _of(reference_plan, "monitor:DataCollectionRuleAssociation")
    (head,) = _of(reference_plan, "compute:VirtualMachine")
    nodes = {r.id for r in reference_plan.resources if inventory.is_scale_set(r)} | {head.id}
    assert {a.inputs["resourceUri"] for a in associations if a.inputs.get("dataCollectionRuleId") == rule.id} == nodes
    # One association per node: the rule names the endpoint its text logs need; the agent reads its configuration
    # from Azure Monitor's public endpoint, so no per-node endpoint association (needed only with Private Link).
    assert len(associations) == len(nodes)
    (dce,) = _of(reference_plan, "monitor:DataCollectionEndpoint")
    assert rule.inputs["dataCollectionEndpointId"] == dce.id


def test_managed_prometheus_and_remote_write(reference_plan: PlanResult) -> None:
    """An Azure Monitor workspace with a collection rule for the Prometheus stream, fed through an endpoint."""
    (amw,) = _of(reference_plan, "monitor:AzureMonitorWorkspace")
    (dce,) = _of(reference_plan, "monitor:DataCollectionEndpoint")
    rule = next(r for r in _of(reference_plan, "monitor:DataCollectionRule") if r.name.endswith("-prom-dcr"))
    assert rule.inputs["destinations"]["monitoringAccounts"][0]["accountResourceId"] == amw.id
    assert rule.inputs["dataFlows"] == [{"streams": ["Microsoft-PrometheusMetrics"], "destinations": ["amw"]}]
    assert rule.inputs["dataCollectionEndpointId"] == dce.id


def test_grafana_and_alerts(reference_plan: PlanResult, reference_raw: dict[str, Any]) -> None:
    """Grafana is linked to the workspace with API keys off; rule groups evaluate against it and notify on-call."""
    (amw,) = _of(reference_plan, "monitor:AzureMonitorWorkspace")
    (grafana,) = _of(reference_plan, "dashboard:Grafana")
    props = grafana.inputs["properties"]
    assert props["apiKey"] == "Disabled"
    assert props["grafanaIntegrations"]["azureMonitorWorkspaceIntegrations"] == [
        {"azureMonitorWorkspaceResourceId": amw.id}
    ]
    assert grafana.inputs["identity"] == {"type": "SystemAssigned"}
    (group,) = _of(reference_plan, "monitor:ActionGroup")
    assert [e["emailAddress"] for e in group.inputs["emailReceivers"]] == ["oncall@example.com"]
    groups = _of(reference_plan, "alertsmanagement:PrometheusRuleGroup")
    prefix = f"{config.parse(reference_raw).cluster.name}-mon"
    assert {g.inputs["ruleGroupName"] for g in groups} == {f"{prefix}-{g.name}" for g in rule_groups(reference_raw)}
    for rg in groups:
        assert rg.inputs["scopes"] == [amw.id]
        for rule in rg.inputs["rules"]:
            if "record" in rule:  # a recording rule notifies nobody
                assert "actions" not in rule
                assert "alert" not in rule
                continue
            assert rule["actions"] == [{"actionGroupId": group.id}]
            assert re.fullmatch(r"PT\d+[SMH]", rule["for"])


def _dev(dev_raw: dict[str, Any], monitoring_cfg: dict[str, Any]) -> set[str]:
    raw = copy.deepcopy(dev_raw)
    raw["monitoring"] = monitoring_cfg
    return {r.type for r in register("dev", raw)}


def test_every_piece_can_be_turned_off(dev_raw: dict[str, Any]) -> None:
    """With every monitoring piece disabled the stack declares no monitoring resource and no agent extension."""
    off = {"enabled": False}
    types = _dev(dev_raw, {"logs": off, "prometheus": off, "grafana": off, "alerts": off})
    assert not {
        t for t in types if t.split(":")[1] in {"monitor", "dashboard", "alertsmanagement", "operationalinsights"}
    }


def _rule_group_names(dev_raw: dict[str, Any], monitoring_cfg: dict[str, Any]) -> set[str]:
    raw = copy.deepcopy(dev_raw)
    raw["monitoring"] = monitoring_cfg
    kind = "azure-native:alertsmanagement:PrometheusRuleGroup"
    return {r.inputs["ruleGroupName"].split("-mon-", 1)[1] for r in register("dev", raw) if r.type == kind}


def test_recording_rules_follow_grafana_and_goodput_alerts_their_key(dev_raw: dict[str, Any]) -> None:
    """With the alerts off Grafana still gets the goodput recording rules and no alert group is declared; with
    `alerts.goodput.enabled: false` every alert group but the goodput one is."""
    no_alerts = _rule_group_names(dev_raw, {"alerts": {"enabled": False}})
    assert no_alerts == {g.name for g in alerts.alert_groups(_VALUES) if g.records}
    no_goodput = _rule_group_names(dev_raw, {"alerts": {"goodput": {"enabled": False}}})
    assert alerts.GOODPUT_ALERTS not in no_goodput
    assert no_goodput == {g.name for g in alerts.alert_groups(_VALUES)} - {alerts.GOODPUT_ALERTS}


_VALUES = {"gpus_per_node": "4", "goodput_floor": "0.8", "goodput_for": "60m", "drained_for": "240m"}


def test_logs_only(dev_raw: dict[str, Any]) -> None:
    """Logs alone give the workspace and collection rule but no Prometheus, Grafana or alert resources."""
    off = {"enabled": False}
    types = _dev(dev_raw, {"prometheus": off, "grafana": off, "alerts": off})
    assert "azure-native:operationalinsights:Workspace" in types
    assert "azure-native:monitor:AzureMonitorWorkspace" not in types
    assert "azure-native:dashboard:Grafana" not in types
    assert "azure-native:alertsmanagement:PrometheusRuleGroup" not in types


GOODPUT = "gb300:monitoring.alerts.goodput"


@pytest.mark.parametrize(
    ("monitoring_cfg", "expected"),
    [
        (
            {"prometheus": {"enabled": False}},
            "gb300:monitoring.grafana.enabled: needs gb300:monitoring.prometheus.enabled: true",
        ),
        ({"alerts": {"emails": ["oncall"]}}, "gb300:monitoring.alerts.emails[0]: must be an email address"),
        ({"alerts": {"webhooks": ["http://hooks.example.com/x"]}}, "gb300:monitoring.alerts.webhooks[0]: must be an https://"),
        ({"logs": {"retentionDays": 7}}, "gb300:monitoring.logs.retentionDays: must be at least 30 (got 7)"),
        (
            {"prometheus": {"scrapeInterval": 30}},
            "gb300:monitoring.prometheus.scrapeInterval: is not a known key; did you mean 'scrapeIntervalSeconds'?",
        ),
        ({"grafana": {"adminPrincipalIds": ["me"]}}, "gb300:monitoring.grafana.adminPrincipalIds: is not a known key"),
        ({"alerts": {"goodput": {"floor": 1.5}}}, f"{GOODPUT}.floor: must be at most 1.0 (got 1.5)"),
        ({"alerts": {"goodput": {"floor": 0}}}, f"{GOODPUT}.floor: must be greater than 0.0 (got 0)"),
        ({"alerts": {"goodput": {"drainedMinutes": 1}}}, f"{GOODPUT}.drainedMinutes: must be at least 5 (got 1)"),
        ({"alerts": {"goodput": {"floorMinutes": "1h"}}}, f"{GOODPUT}.floorMinutes: must be a whole number"),
        ({"alerts": {"goodput": {"flor": 0.5}}}, f"{GOODPUT}.flor: is not a known key; did you mean 'floor'?"),
    ],
)  # fmt: skip
def test_monitoring_config_errors(reference_raw: dict[str, Any], monitoring_cfg: dict[str, Any], expected: str) -> None:
    """Invalid gb300:monitoring keys are reported at their exact key path."""
    raw = copy.deepcopy(reference_raw)
    raw["monitoring"] = monitoring_cfg
    lines = error_lines(raw)
    assert any(line.startswith(expected) for line in lines), lines


# Azure's Terraform provider (hashicorp/terraform-provider-azurerm, dashboard_grafana_resource.go) allows 2-23
# characters for a Grafana workspace name; Azure's REST pattern allows 30. The stricter one is the limit.
GRAFANA_NAME = re.compile(r"^[a-zA-Z][-a-zA-Z\d]{0,21}[a-zA-Z\d]$")


def test_prometheus_rule_has_the_documented_remote_write_shape(reference_plan: PlanResult) -> None:
    """The Prometheus rule is a Linux rule whose prometheusForwarder data source feeds the stream it sends."""
    rule = next(r for r in _of(reference_plan, "monitor:DataCollectionRule") if r.name.endswith("-prom-dcr"))
    assert rule.inputs["kind"] == "Linux"
    (source,) = rule.inputs["dataSources"]["prometheusForwarder"]
    (flow,) = rule.inputs["dataFlows"]
    assert source["streams"] == flow["streams"] == ["Microsoft-PrometheusMetrics"]


def test_prometheus_rule_matches_azures_sdk_model(reference_plan: PlanResult) -> None:
    """Azure's own model of a data collection rule (azure-mgmt-monitor) keeps every key and value of the rule."""
    from azure.mgmt.monitor import models  # noqa: PLC0415

    rule = next(r for r in _of(reference_plan, "monitor:DataCollectionRule") if r.name.endswith("-prom-dcr"))
    body = arm_body(rule.inputs, ("dataCollectionRuleName", "resourceGroupName"))
    parsed = models.DataCollectionRuleResource.deserialize(body)
    assert parsed.serialize() == body
    assert rule.inputs["kind"] in {k.value for k in models.KnownDataCollectionRuleResourceKind}
    known_streams = {s.value for s in models.KnownPrometheusForwarderDataSourceStreams}
    assert set(parsed.data_sources.prometheus_forwarder[0].streams) <= known_streams


def test_grafana_name_fits_the_strictest_limit(dev_raw: dict[str, Any]) -> None:
    """With the longest cluster name the config allows (12 characters), the Grafana name fits 23 characters."""
    longest = "abcdefghij12"
    raw = copy.deepcopy(dev_raw)
    raw["cluster"] = {**raw["cluster"], "name": longest}
    with pytest.raises(ConfigError):  # 12 is the longest: one more character is refused
        config.parse({**raw, "cluster": {**raw["cluster"], "name": longest + "x"}})
    (grafana,) = [r for r in register("dev", raw) if r.type == "azure-native:dashboard:Grafana"]
    assert GRAFANA_NAME.fullmatch(grafana.inputs["workspaceName"]), grafana.inputs["workspaceName"]


def _associate_under_a_rack(*, logs: bool) -> list[ResourceRecord]:
    """Register a monitoring component and one rack component that owns its scale set's log association."""

    def program() -> None:
        mon = Monitoring(
            "m",
            MonitoringArgs(
                scope=ClusterScope(
                    cluster_name="m",
                    resource_group_name="rg",
                    resource_group_id="/subscriptions/s/resourceGroups/rg",
                    location="eastus2",
                    subscription_id="s",
                    tenant_id="t",
                ),
                node_principal_id="principal",
                logs=logs,
                prometheus=False,
                grafana=False,
                alerts=False,
            ),
        )
        rack = pulumi.ComponentResource("gb300:compute:Rack", "r-0001")
        scale_set = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/r-0001"
        mon.associate(scale_set, "r-0001-logs", pulumi.ResourceOptions(parent=rack))
        rack.register_outputs({})

    return register("dev", {}, program=program)


def test_a_rack_component_can_own_its_log_association() -> None:
    """Monitoring.associate puts the association under the parent its options name (a rack), with the logs rule."""
    records = {r.name: r for r in _associate_under_a_rack(logs=True)}
    association = records["r-0001-logs"]
    assert association.type == "azure-native:monitor:DataCollectionRuleAssociation"
    assert association.parent == records["r-0001"].urn
    assert association.inputs["associationName"] == "m-logs"
    assert association.inputs["dataCollectionRuleId"] == records["m-logs-dcr"].id
    assert association.inputs["resourceUri"].endswith("/virtualMachineScaleSets/r-0001")


def test_no_log_association_without_logs() -> None:
    """With logs off there is no rule to associate, and associate registers nothing."""
    assert "r-0001-logs" not in {r.name for r in _associate_under_a_rack(logs=False)}
