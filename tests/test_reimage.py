"""With the deployed state, the plan names the pools whose running nodes need a reimage for a new bootstrap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli
from gb300.findings import Level
from gb300.plan import PlanResult
from gb300.rules import reimage
from gb300.rules.data_loss import DeployedResource


def _deployed(plan: PlanResult, stale: set[str]) -> list[DeployedResource]:
    """The plan's resources as deployed, with an older custom data hash on the named scale sets/VMs."""
    out = []
    for r in plan.resources:
        inputs: dict[str, Any] = dict(r.inputs)
        if r.name in stale and "tags" in inputs:
            inputs["tags"] = {**inputs["tags"], reimage.HASH_TAG: "0" * 64}
        out.append(DeployedResource(r.urn, r.type, r.name, r.id, inputs))
    return out


def test_unchanged_bootstrap_needs_no_reimage(reference_plan: PlanResult) -> None:
    """When the deployed hashes equal the plan's, nothing needs a reimage and no finding appears."""
    assert reimage.changed(reference_plan.resources, _deployed(reference_plan, set())) == {}
    assert reimage.findings(reference_plan.resources, _deployed(reference_plan, set())) == []


@pytest.mark.parametrize(
    ("stale", "expected"),
    [
        ({"ref-train-r0001", "ref-train-r0002"}, {"train": ["ref-train-r0001", "ref-train-r0002"]}),
        ({"ref-head"}, {"head": ["ref-head"]}),
        ({"ref-train-r0064", "ref-head"}, {"head": ["ref-head"], "train": ["ref-train-r0064"]}),
    ],
    ids=["two-racks", "head", "rack-and-head"],
)
def test_changed_bootstrap_is_reported_per_pool(
    reference_plan: PlanResult, stale: set[str], expected: dict[str, list[str]]
) -> None:
    """Each pool (and the head) whose deployed hash differs is named with the scale sets to reimage."""
    deployed = _deployed(reference_plan, stale)
    assert reimage.changed(reference_plan.resources, deployed) == expected
    found = reimage.findings(reference_plan.resources, deployed)
    assert [f.level for f in found] == [Level.INFO] * len(expected)
    assert all("az vmss reimage" in f.message for f in found)


def test_new_racks_need_no_reimage(reference_plan: PlanResult) -> None:
    """Racks that are not deployed yet boot with the new bootstrap, so they are not listed."""
    deployed = [d for d in _deployed(reference_plan, {"ref-train-r0001"}) if d.name != "ref-train-r0001"]
    assert reimage.changed(reference_plan.resources, deployed) == {}


def test_plan_summary_shows_reimage_with_state(tmp_path: Path, reference_plan: PlanResult) -> None:
    """``gb300 plan --state`` puts the reimage count per pool in the summary and the JSON."""
    resources = [
        {"urn": d.urn, "type": d.type, "id": d.id, "inputs": d.inputs}
        for d in _deployed(reference_plan, {"ref-train-r0003"})
    ]
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"version": 3, "deployment": {"resources": resources}}))
    out = tmp_path / "plan.json"
    assert cli.main(["plan", "--stack", "reference", "--state", str(state), "--json", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert doc["summary"]["needsReimage"] == {"train": 1}
    assert [f["rule"] for f in doc["findings"] if f["rule"] == "custom-data-changed"] == ["custom-data-changed"]
