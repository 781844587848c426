"""With the deployed state, the plan names the pools whose running nodes need a reimage for a new bootstrap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli
from gb300.findings import Level
from gb300.plan import PlanResult
from gb300.resources import DeployedResource
from gb300.rules import reimage


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


def test_changed_bootstrap_is_reported_per_pool(reference_plan: PlanResult) -> None:
    """Each pool whose deployed hash differs is named with the scale sets to reimage, and how to roll it out."""
    deployed = _deployed(reference_plan, {"ref-train-r0001", "ref-train-r0002"})
    assert reimage.changed(reference_plan.resources, deployed) == {"train": ["ref-train-r0001", "ref-train-r0002"]}
    assert reimage.replaced(reference_plan.resources, deployed) == []
    (found,) = reimage.findings(reference_plan.resources, deployed)
    assert found.level == Level.INFO
    assert "gb300 rollout --stack <stack> --state <export> --azure live --dry-run" in found.message
    assert "ref-train-r0001 first" in found.message
    assert "az vmss reimage" not in found.message


@pytest.mark.parametrize("stale", [{"ref-head"}, {"ref-head", "ref-train-r0064"}], ids=["head", "rack-and-head"])
def test_changed_head_bootstrap_replaces_the_vm(reference_plan: PlanResult, stale: set[str]) -> None:
    """A changed head bootstrap is a replacement of the head VM, warned with VM advice, never `az vmss reimage`."""
    deployed = _deployed(reference_plan, stale)
    assert reimage.replaced(reference_plan.resources, deployed) == ["ref-head"]
    assert "head" not in reimage.changed(reference_plan.resources, deployed)
    [head] = [f for f in reimage.findings(reference_plan.resources, deployed) if f.resource == "gb300:head"]
    assert head.level == Level.WARNING
    assert "replaces the head VM" in head.message
    assert "vmss" not in head.message


def test_head_vm_is_replaced_when_its_custom_data_changes(reference_plan: PlanResult) -> None:
    """The head VM is declared so that the engine replaces it (old one first) when its custom data changes."""
    [vm] = [r for r in reference_plan.resources if r.type == "azure-native:compute:VirtualMachine"]
    assert vm.replace_on_changes == ("osProfile.customData", "storageProfile.imageReference")
    assert vm.delete_before_replace


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
    assert doc["summary"]["replacesVms"] == []
    assert [f["rule"] for f in doc["findings"] if f["rule"] == "custom-data-changed"] == ["custom-data-changed"]
