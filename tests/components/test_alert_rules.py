"""The alert rules as Azure receives them, evaluated by Prometheus's own `promtool` on synthetic series.

The rule file under test is rebuilt from the plan's ``alertsmanagement:PrometheusRuleGroup`` resources (ISO 8601
durations turned back into Prometheus ones, the stack's values filled in), so a rule the monitoring component renders
wrongly fails here too. Cases live in ``tests/fixtures/alerts/gb300_test.yaml``; every rendered alert must fire in
one and stay quiet in another, and every recording rule's output is checked on series in at least one.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from gb300.plan import PlanResult
from tests.support.files import FIXTURES
from tests.support.tools import require_tool

CASES = FIXTURES / "alerts" / "gb300_test.yaml"


def _promtool() -> str:
    return require_tool("promtool", "promtool is not installed (scripts/ensure-test-tools installs Debian's)")


def _prometheus_duration(iso: str) -> str:
    """Azure's ``PT5M`` back into Prometheus's ``5m``."""
    match = re.fullmatch(r"PT(\d+)([SMH])", iso)
    assert match, iso
    return f"{match.group(1)}{match.group(2).lower()}"


def rendered_rule_file(plan: PlanResult, *, annotations: bool = True) -> dict[str, Any]:
    """A Prometheus rule file holding every PrometheusRuleGroup of ``plan``, as Azure would evaluate it."""
    groups = []
    for resource in plan.resources:
        if resource.type != "azure-native:alertsmanagement:PrometheusRuleGroup":
            continue
        rules = []
        for rule in resource.inputs["rules"]:
            if "record" in rule:
                rules.append({"record": rule["record"], "expr": rule["expression"]})
                continue
            rendered: dict[str, Any] = {
                "alert": rule["alert"],
                "expr": rule["expression"],
                "for": _prometheus_duration(rule["for"]),
            }
            if rule.get("labels"):
                rendered["labels"] = rule["labels"]
            if annotations and rule.get("annotations"):
                rendered["annotations"] = rule["annotations"]
            rules.append(rendered)
        groups.append(
            {
                "name": resource.inputs["ruleGroupName"],
                "interval": _prometheus_duration(resource.inputs["interval"]),
                "rules": rules,
            }
        )
    return {"groups": groups}


def _alert_names(rule_file: dict[str, Any]) -> set[str]:
    return {rule["alert"] for group in rule_file["groups"] for rule in group["rules"] if "alert" in rule}


def _cases() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(CASES.read_text(encoding="utf-8"))
    return doc


def test_rendered_rules_pass_promtool_check(reference_plan: PlanResult, tmp_path: Path) -> None:
    """`promtool check rules` accepts the rendered groups, annotation templates included."""
    promtool = _promtool()
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(rendered_rule_file(reference_plan), sort_keys=False))
    result = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_fires_and_stays_quiet(reference_plan: PlanResult, tmp_path: Path) -> None:
    """`promtool test rules` passes: each alert fires on its synthetic fault and is silent on healthy series."""
    promtool = _promtool()
    rules = tmp_path / "rules.yaml"
    # The cases assert which alerts fire with which labels; the annotation texts are checked by `check rules`.
    rules.write_text(yaml.safe_dump(rendered_rule_file(reference_plan, annotations=False), sort_keys=False))
    cases = tmp_path / "cases.yaml"
    cases.write_text(yaml.safe_dump({"rule_files": [str(rules)], **_cases()}, sort_keys=False))
    result = subprocess.run([promtool, "test", "rules", str(cases)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_promtool_catches_a_broken_rule(reference_plan: PlanResult, tmp_path: Path) -> None:
    """A rule whose threshold is wrong makes `promtool test rules` fail, so the cases can catch a regression."""
    promtool = _promtool()
    broken = rendered_rule_file(reference_plan, annotations=False)
    for group in broken["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == "InfinibandPortDown":
                rule["expr"] = rule["expr"].replace("!= 4", "!= 1")
    result = _test_rules(promtool, broken, tmp_path)
    assert result.returncode != 0
    assert "InfinibandPortDown" in result.stdout + result.stderr


def _test_rules(promtool: str, rule_file: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`promtool test rules` of the shipped cases against ``rule_file`` (a changed copy of the rendered rules)."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(rule_file, sort_keys=False))
    cases = tmp_path / "cases.yaml"
    cases.write_text(yaml.safe_dump({"rule_files": [str(rules)], **_cases()}, sort_keys=False))
    return subprocess.run([promtool, "test", "rules", str(cases)], capture_output=True, text=True, check=False)


def test_every_alert_has_a_firing_and_a_quiet_case(reference_plan: PlanResult) -> None:
    """Each rendered alert has a case where it fires and one where it is quiet; a new alert needs both."""
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in _cases()["tests"]:
        for check in case.get("alert_rule_test", []):
            (firing if check["exp_alerts"] else quiet).add(check["alertname"])
    alerts = _alert_names(rendered_rule_file(reference_plan))
    assert alerts, "the reference stack renders no alert rules"
    assert alerts - firing == set(), "alerts without a case where they fire"
    assert alerts - quiet == set(), "alerts without a case where they stay quiet"
    assert (firing | quiet) - alerts == set(), "cases for alerts that no longer exist"


def test_a_broken_recording_rule_fails_its_cases(reference_plan: PlanResult, tmp_path: Path) -> None:
    """An idle part that forgets to leave out the drained GPUs makes `promtool test rules` fail on the recorded
    values, so the goodput split's cases catch a regression."""
    promtool = _promtool()
    broken = rendered_rule_file(reference_plan, annotations=False)
    (idle,) = [r for g in broken["groups"] for r in g["rules"] if r.get("record") == "cluster:gb300_gpus_idle:sum"]
    idle["expr"] = idle["expr"].replace("- on (cluster) cluster:gb300_gpus_drained:sum", "")
    assert "drained" not in idle["expr"]
    result = _test_rules(promtool, broken, tmp_path)
    assert result.returncode != 0
    assert "cluster:gb300_gpus_idle:sum" in result.stdout + result.stderr


def test_every_recording_rule_has_a_case(reference_plan: PlanResult) -> None:
    """Each rendered recording rule's output is checked on series in at least one case; a new one needs a case."""
    records = {r["record"] for g in rendered_rule_file(reference_plan)["groups"] for r in g["rules"] if "record" in r}
    checked = {check["expr"] for case in _cases()["tests"] for check in case.get("promql_expr_test", [])}
    assert records, "the reference stack renders no recording rules"
    assert records - checked == set()
