"""A failed bootstrap reaches Azure Monitor: run-step's failure line (sandboxed) passes the filter of the plan's log
alert, the line is announced again while the node stays failed, and the alert is a rule Azure's model accepts."""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gb300 import config
from gb300.facts import monitoring_facts
from gb300.node.settings import load_node
from gb300.node.steps import RUN_STEP
from gb300.plan import PlanResult
from gb300.plan.runner import register
from gb300.resources import ResourceRecord
from tests.support import kql
from tests.support.arm import arm_body
from tests.support.bootstrap_helpers import render_role
from tests.support.config_errors import error_lines
from tests.support.sandbox import Sandbox, hpc_image_machine

RULE = "azure-native:monitor:ScheduledQueryRule"
STEP = "44-broken"
REASON = "fabric: CliqueId 0 on GPU 2"


def _rule(plan: PlanResult) -> ResourceRecord:
    (rule,) = [r for r in plan.resources if r.type == RULE]
    return rule


def _query(rule: ResourceRecord) -> str:
    (condition,) = rule.inputs["criteria"]["allOf"]
    return str(condition["query"])


def _syslog(box: Sandbox) -> list[dict[str, str]]:
    """What the stand-in logger received, as the Syslog table's columns (AMA: the tag is ProcessName, the priority's
    facility and level are Facility and SeverityLevel)."""
    path = box.base / "syslog.jsonl"
    rows = []
    for line in path.read_text().splitlines() if path.exists() else []:
        entry = json.loads(line)
        facility, _, level = entry["priority"].partition(".")
        rows.append(
            {
                "Computer": box.state()["hostname"],
                "ProcessName": entry["tag"],
                "Facility": facility,
                "SeverityLevel": level,
                "SyslogMessage": entry["message"],
            }
        )
    return rows


@pytest.fixture(scope="module")
def gpu_cloud_config() -> str:
    """The reference GPU node's rendered cloud-config (run-step, lib.sh and node.env come from it)."""
    return render_role("gpu-node").cloud_config


@pytest.fixture
def failed(tmp_path: Path, gpu_cloud_config: str) -> Sandbox:
    """A GPU node whose bootstrap ran the real run-step on a step that fails with a reason of its own."""
    box = Sandbox(tmp_path / "node", gpu_cloud_config, hpc_image_machine())
    box.apply_write_files()
    script = box.path(f"/usr/local/lib/gb300/steps/{STEP}.sh")
    script.write_text(f'#!/usr/bin/env bash\nset -euo pipefail\n. "${{GB300_ROOT:-}}/usr/local/lib/gb300/lib.sh"\n'
                      f'echo "checking the fabric"\nfail "{REASON}"\n')  # fmt: skip
    script.chmod(0o755)
    proc = subprocess.run(
        [str(box.path(RUN_STEP)), STEP], env=box.env(), capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.returncode != 0
    return box


def test_the_alert_query_matches_the_failure_line_and_nothing_else(reference_plan: PlanResult, failed: Sandbox) -> None:
    """Of every line the failed run logged, exactly run-step's failure line passes the alert's filter, and the
    alert's Step dimension is the failed step."""
    query = _query(_rule(reference_plan))
    rows = _syslog(failed)
    assert len(rows) > 1
    hits = [out for row in rows if (out := kql.run(query, row)) is not None]
    assert len(hits) == 1, rows
    assert hits[0]["Step"] == STEP
    assert hits[0]["SyslogMessage"].endswith(REASON)
    assert hits[0]["Computer"] == failed.state()["hostname"]


def test_the_failure_is_announced_again_while_the_node_stays_failed(
    reference_plan: PlanResult, failed: Sandbox
) -> None:
    """run-step arms a timer that logs the same failure line every failure_reannounce_seconds, so a line logged
    before the agent ran is repeated once it runs; with the failure cleared, it logs nothing."""
    every = load_node().step_failure_reannounce_seconds
    (timer,) = failed.state()["transient"].values()
    assert timer["on_active"] == timer["on_unit_active"] == f"{every}s"
    query = _query(_rule(reference_plan))
    before = len(_syslog(failed))
    announce = subprocess.run(timer["command"], env=failed.env(), capture_output=True, text=True, check=False)
    assert announce.returncode == 0, announce.stderr
    again = [row for row in _syslog(failed)[before:] if kql.run(query, row) is not None]
    assert [row["SyslogMessage"] for row in again] == [f"bootstrap failed at {STEP}: {REASON}"]
    failed.path("/var/lib/gb300/status").unlink()  # the operator fixed the node and reran the bootstrap
    count = len(_syslog(failed))
    assert subprocess.run(timer["command"], env=failed.env(), check=False).returncode == 0
    assert len(_syslog(failed)) == count
    # Three announcements fit in one alert window, so the alert stays fired while the node is failed.
    window = re.fullmatch(r"PT(\d+)M", _rule(reference_plan).inputs["windowSize"])
    assert window is not None
    assert int(window.group(1)) * 60 >= 3 * every


def test_the_alert_watches_the_workspace_with_the_stacks_severity_and_action_group(
    reference_plan: PlanResult, reference_raw: dict[str, Any]
) -> None:
    """The rule queries the Log Analytics workspace the nodes' syslog goes to, with the configured severity, and
    notifies the on-call action group, split per node and failed step."""
    rule = _rule(reference_plan)
    cfg = config.parse(copy.deepcopy(reference_raw))
    (workspace,) = [r for r in reference_plan.resources if r.type == "azure-native:operationalinsights:Workspace"]
    (group,) = [r for r in reference_plan.resources if r.type == "azure-native:monitor:ActionGroup"]
    assert rule.inputs["scopes"] == [workspace.id]
    assert rule.inputs["severity"] == cfg.monitoring.logs.bootstrap_alert.severity
    assert rule.inputs["actions"] == {"actionGroups": [group.id]}
    assert kql.table(_query(rule)) == "Syslog"
    dcr = next(r for r in reference_plan.resources if r.name.endswith("-logs-dcr"))
    (syslog,) = dcr.inputs["dataSources"]["syslog"]
    assert "user" in syslog["facilityNames"]  # run-step logs at user.err
    assert "Error" in syslog["logLevels"]
    (condition,) = rule.inputs["criteria"]["allOf"]
    assert [d["name"] for d in condition["dimensions"]] == ["Computer", "Step"]
    spec = monitoring_facts.facts()["bootstrapAlert"]
    assert rule.inputs["evaluationFrequency"] == spec["evaluationFrequency"]["value"]


def test_the_alert_rule_matches_azures_sdk_model(reference_plan: PlanResult) -> None:
    """Azure's own model of a scheduled query rule (azure-mgmt-monitor) keeps every key and value of the rule."""
    from azure.mgmt.monitor import models  # noqa: PLC0415

    rule = _rule(reference_plan)
    body = arm_body(rule.inputs, ("ruleName", "resourceGroupName"))
    parsed = models.ScheduledQueryRuleResource.deserialize(body)
    assert parsed.serialize() == body
    assert rule.inputs["kind"] in {k.value for k in models.Kind}
    (condition,) = parsed.criteria.all_of
    assert condition.time_aggregation in {t.value for t in models.TimeAggregation}
    assert condition.operator in {o.value for o in models.ConditionOperator}


@pytest.mark.parametrize(
    ("logs", "expected"),
    [
        ({"bootstrapAlert": {"severity": 5}}, "gb300:monitoring.logs.bootstrapAlert.severity: must be at most 4"),
        ({"bootstrapAlert": {"sev": 1}}, "gb300:monitoring.logs.bootstrapAlert.sev: is not a known key"),
    ],
)
def test_bootstrap_alert_config_errors(reference_raw: dict[str, Any], logs: dict[str, Any], expected: str) -> None:
    """A bad bootstrapAlert key is reported at its key path."""
    raw = copy.deepcopy(reference_raw)
    raw["monitoring"] = {**raw.get("monitoring", {}), "logs": logs}
    lines = error_lines(raw)
    assert any(line.startswith(expected) for line in lines), lines


@pytest.mark.parametrize(
    "logs", [{"bootstrapAlert": {"enabled": False}}, {"enabled": False}], ids=["alert-off", "logs-off"]
)
def test_no_bootstrap_alert_when_it_or_logs_are_off(dev_raw: dict[str, Any], logs: dict[str, Any]) -> None:
    """With the alert or the logs turned off, the stack declares no scheduled query rule."""
    raw = copy.deepcopy(dev_raw)
    raw["monitoring"] = {**raw.get("monitoring", {}), "logs": logs}
    assert RULE not in {r.type for r in register("dev", raw)}
    assert RULE in {r.type for r in register("dev", copy.deepcopy(dev_raw))}


def test_run_step_and_the_query_share_the_tag_and_level(failed: Sandbox) -> None:
    """The tag and level run-step logs its failure with are the ones the query filters on (from the real output)."""
    query = str(monitoring_facts.facts()["bootstrapAlert"]["query"])
    (line,) = [r for r in _syslog(failed) if r["SyslogMessage"].startswith("bootstrap failed at ")]
    assert f'ProcessName == "{line["ProcessName"]}"' in query
    assert f'SeverityLevel == "{line["SeverityLevel"]}"' in query
