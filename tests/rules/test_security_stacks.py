"""Exposures planned from whole stack files: exit 1 with a finding; suppressions need a reason and are shown."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli
from gb300 import tags as gb300_tags
from gb300.config import PolicySettings
from gb300.ops import ci_summary
from gb300.policy_pack import stack_settings

HALVES = ["0.0.0.0/1", "128.0.0.0/1"]
REASON = "lab cluster; the campus firewall filters SSH before Azure"


def _exposed(dev_raw: dict[str, Any], ranges: list[str], suppress: list[Any] | None = None) -> dict[str, Any]:
    raw = copy.deepcopy(dev_raw)
    raw["access"] = {**raw["access"], "loginPublicIp": True, "sshSourceRanges": ranges}
    if suppress is not None:
        raw["policy"] = {"suppress": suppress}
    return raw


def test_two_halves_with_a_public_login_ip_fail_the_plan(
    write_stack: Any, dev_raw: dict[str, Any], tmp_path: Path
) -> None:
    """0.0.0.0/1 plus 128.0.0.0/1 with a public login IP exits 1 with both SSH rules and the public IP reported."""
    out = tmp_path / "plan.json"
    argv = ["plan", "--stack-file", str(write_stack(_exposed(dev_raw, HALVES))), "--quiet", "--json", str(out)]
    assert cli.main(argv) == 1
    errors = [f for f in json.loads(out.read_text())["findings"] if f["level"] == "error"]
    assert sorted(f["rule"] for f in errors) == [
        "no-public-ip-on-nodes",
        "no-ssh-from-internet",
        "no-ssh-from-internet",
    ]


def test_suppressing_security_rules_without_a_reason_is_refused(
    write_stack: Any, dev_raw: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """Both SSH rules suppressed by bare id, with 0.0.0.0/0 and a public IP: exit 2 naming each entry."""
    raw = _exposed(dev_raw, ["0.0.0.0/0"], ["no-ssh-from-internet", "no-public-ip-on-nodes"])
    assert cli.main(["plan", "--stack-file", str(write_stack(raw))]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("gb300:")]
    assert [line.split(":", 2)[1] for line in err] == ["policy.suppress[0]", "policy.suppress[1]"]
    assert all("without a reason" in line for line in err)


@pytest.mark.parametrize("reason", ["", "because", "two\nlines of text here"])
def test_a_reason_must_say_something(reason: str, write_stack: Any, dev_raw: dict[str, Any]) -> None:
    """An empty, one-word or multi-line reason is refused (exit 2)."""
    raw = _exposed(dev_raw, ["0.0.0.0/0"], [{"rule": "no-ssh-from-internet", "reason": reason}])
    assert cli.main(["plan", "--stack-file", str(write_stack(raw)), "--quiet"]) == 2


@pytest.mark.parametrize("quiet", [False, True])
def test_a_justified_suppression_is_shown_in_every_output(
    quiet: bool, write_stack: Any, dev_raw: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With reasons the plan passes, but the text (full or quiet), the JSON and the PR summary show what is hidden."""
    suppress = [{"rule": r, "reason": REASON} for r in ("no-ssh-from-internet", "no-public-ip-on-nodes")]
    out = tmp_path / "plan-lab.json"
    argv = ["plan", "--stack-file", str(write_stack(_exposed(dev_raw, ["0.0.0.0/0"], suppress))), "--json", str(out)]
    assert cli.main(argv + (["--quiet"] if quiet else [])) == 0
    text = capsys.readouterr().out
    assert "Suppressed rules (gb300:policy.suppress): 2" in text
    assert f"no-ssh-from-internet: reason: {REASON}; hides 1 finding(s)" in text
    assert "must not allow SSH (port 22) from the Internet" in text
    assert text.rstrip().endswith("plan passes; 2 rule(s) suppressed by gb300:policy.suppress (listed above)")
    doc = json.loads(out.read_text())
    assert [(s["rule"], s["reason"], len(s["hidden"])) for s in doc["suppressed"]] == [
        ("no-ssh-from-internet", REASON, 1),
        ("no-public-ip-on-nodes", REASON, 1),
    ]
    summary = ci_summary.render(ci_summary.load([out]), ["case"])
    assert "**Suppressed rules (2)**" in summary
    assert f"| `case` | `no-ssh-from-internet` | {REASON} | 1 |" in summary


def test_the_pack_ignores_an_unjustified_suppression() -> None:
    """The policy pack reads the same gb300:policy: a security rule suppressed without a reason still runs."""
    bare = {"gb300:policy": json.dumps({"suppress": ["no-ssh-from-internet", "required-tags"]})}
    assert stack_settings(bare).suppressed == frozenset()
    justified = {"gb300:policy": json.dumps({"suppress": [{"rule": "no-ssh-from-internet", "reason": REASON}]})}
    assert stack_settings(justified).suppressed == {"no-ssh-from-internet"}
    assert PolicySettings(suppress=["required-tags"]).suppressed == {"required-tags"}


def test_upload_ranges_never_open_the_data_account(write_stack: Any, dev_raw: dict[str, Any], tmp_path: Path) -> None:
    """uploadSourceRanges of 0.0.0.0/1 plus 128.0.0.0/1 (issue 28's reproduction) used to open the account holding
    checkpoints to every IPv4 address. Now they reach only the payload account (signed payloads, no keys): the data
    account stays closed, and the plan says plainly that the payload account admits every IPv4 address."""
    raw = copy.deepcopy(dev_raw)
    storage = raw.setdefault("storage", {})
    storage["nodePayload"] = {**storage.get("nodePayload", {}), "uploadSourceRanges": HALVES}
    out = tmp_path / "plan.json"
    started = time.perf_counter()
    assert cli.main(["plan", "--stack-file", str(write_stack(raw)), "--quiet", "--json", str(out)]) in (0, 1)
    seconds = time.perf_counter() - started
    doc = json.loads(out.read_text())
    found = [f for f in doc["findings"] if f["rule"] == "storage-no-public-access"]
    assert [f for f in found if f["level"] == "error"] == []
    accounts = {
        (r["inputs"].get("tags") or {}).get(gb300_tags.STORAGE_PURPOSE): r["inputs"]
        for r in doc["resources"]
        if r["type"] == "azure-native:storage:StorageAccount"
    }
    assert accounts[gb300_tags.STORAGE_PURPOSE_DATA]["publicNetworkAccess"] == "Disabled"
    (info,) = [f for f in found if f["level"] == "info"]
    assert "(every IPv4 address)" in info["message"]
    assert f"{gb300_tags.STORAGE_PURPOSE}: {gb300_tags.STORAGE_PURPOSE_NODE_PAYLOAD}" in info["message"]
    assert seconds < 10.0


def test_the_planned_data_account_is_tagged_as_holding_data(dev_plan: Any) -> None:
    """The cluster's data account carries gb300-storage-purpose: data and the payload account node-payload, which the
    rule reads; the data account is the one holding the datasets and checkpoints containers."""
    accounts = [r for r in dev_plan.resources if r.type == "azure-native:storage:StorageAccount"]
    purposes = {gb300_tags.storage_purpose_of(a.inputs["tags"]): a.inputs["accountName"] for a in accounts}
    assert set(purposes) == {gb300_tags.STORAGE_PURPOSE_DATA, gb300_tags.STORAGE_PURPOSE_NODE_PAYLOAD}
    containers = {
        r.inputs["containerName"]: r.inputs["accountName"]
        for r in dev_plan.resources
        if r.type == "azure-native:storage:BlobContainer"
    }
    data_containers = {n for n, acct in containers.items() if acct == purposes[gb300_tags.STORAGE_PURPOSE_DATA]}
    assert "gb300-node-payload" not in data_containers
