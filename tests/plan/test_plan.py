"""The offline plan: the real program on the SDK's mock monitor, and the plan JSON contract."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pulumi
import pytest

from gb300 import cli
from gb300.components import compute_package
from gb300.plan import PlanResult, render, run_plan

ARM_ID = re.compile(r"^/subscriptions/[0-9a-f-]{36}/resourceGroups/[^/]+(/providers/[A-Za-z.]+/.+)?$")


def test_reference_counts(reference_plan: PlanResult) -> None:
    """The reference stack is 64 racks, 1,152 VMs, 4,608 GPUs: 147,456 GB300 vCPUs plus the head node's 16."""
    s = reference_plan.summary
    assert (s["racks"], s["vms"], s["gpus"]) == (64, 1152, 4608)
    assert s["vcpus"] == {"standardDDSv5Family": 16, "standardNDISRGB300V6Family": 147456}


def test_dev_counts(dev_plan: PlanResult) -> None:
    """The dev stack is one rack: 18 VMs and 72 GPUs."""
    assert (dev_plan.summary["racks"], dev_plan.summary["vms"], dev_plan.summary["gpus"]) == (1, 18, 72)


def test_json_contract(tmp_path: Path) -> None:
    """``gb300 plan --json`` writes stack, resources, findings, suppressions and summary with the documented fields."""
    out = tmp_path / "plan.json"
    assert cli.main(["plan", "--stack", "dev", "--json", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert set(doc) == {"stack", "resources", "findings", "suppressed", "summary"}
    assert doc["suppressed"] == []
    assert doc["stack"] == "dev"
    assert isinstance(doc["findings"], list)
    for res in doc["resources"]:
        assert {"urn", "type", "name", "parent", "protect", "inputs"} <= set(res)
        assert isinstance(res["protect"], bool)
    vmss = next(r for r in doc["resources"] if r["name"] == "dev-train-r0001")
    assert vmss["inputs"]["sku"] == {"name": "Standard_ND128isr_GB300_v6", "tier": "Standard", "capacity": 18}
    assert {"racks", "vms", "gpus", "vcpus"} <= set(doc["summary"])


def test_urns_unique_and_parents_registered(reference_plan: PlanResult) -> None:
    """Every URN is unique and every parent is either another registered resource or the stack."""
    urns = [r.urn for r in reference_plan.resources]
    assert len(urns) == len(set(urns))
    for r in reference_plan.resources:
        assert r.parent is not None
        assert r.parent in urns or r.parent.endswith("pulumi:pulumi:Stack::gb300-reference")


def test_ids_look_like_azure_ids(reference_plan: PlanResult) -> None:
    """Mocked ids read like real Azure resource ids, so references between resources read naturally."""
    custom = [
        r
        for r in reference_plan.resources
        if r.id is not None and (r.type.startswith("azure-native:") or compute_package.is_package_type(r.type))
    ]
    assert custom
    bad = [r.id for r in custom if not ARM_ID.match(r.id or "")]
    assert not bad


def test_references_resolve_to_registered_ids(reference_plan: PlanResult) -> None:
    """Every id a scale set names (subnet, identity, interconnect group) is the id of a registered resource."""
    ids = {r.id for r in reference_plan.resources}
    vmss = next(r for r in reference_plan.resources if r.type == compute_package.SCALE_SET_TOKEN)
    props: dict[str, Any] = vmss.inputs
    nic = props["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"][0]
    assert nic["ipConfigurations"][0]["subnet"]["id"] in ids
    group = props["virtualMachineProfile"]["networkProfile"]["interconnectGroupProfile"]["interconnectGroup"]["id"]
    assert group in ids
    assert set(vmss.inputs["identity"]["userAssignedIdentities"]) <= ids


def test_subnet_usage_in_summary(reference_plan: PlanResult) -> None:
    """The summary shows the GPU subnet (the upper half of the space) with its usable addresses and VMs in use."""
    gpu = next(s for s in reference_plan.summary["subnets"] if s["name"] == "gpu")
    assert gpu == {"name": "gpu", "prefix": "10.40.128.0/17", "usable": 32763, "used": 1152, "vms": 1152, "holds": {}}


def test_subnets_say_what_they_hold(reference_plan: PlanResult) -> None:
    """No subnet that holds something reads as empty: the head's NIC, the private endpoints, Bastion and Lustre."""
    by_name = {s["name"]: s for s in reference_plan.summary["subnets"]}
    assert by_name["head"]["holds"] == {"NIC": 1}
    assert by_name["head"]["used"] == 1
    # blob and key vault of the data side, and the payload account's blob endpoint
    assert by_name["endpoints"]["holds"] == {"private endpoint": 3}
    assert by_name["AzureBastionSubnet"]["holds"] == {"Bastion": 1}
    assert by_name["storage"]["holds"] == {"Lustre": 1}
    text = render.text(reference_plan, stack_file="stacks/Pulumi.reference.yaml")
    assert "holds 3 private endpoints" in text
    assert "0 used" not in text


def test_the_plan_reads_in_a_few_lines(reference_plan: PlanResult) -> None:
    """Resource types take a few lines, not one per type; access and storage have a line each; no "1 racks"."""
    text = render.text(reference_plan, stack_file="stacks/Pulumi.reference.yaml")
    lines = text.splitlines()
    start = lines.index(f"Resources ({len(reference_plan.resources):,})")
    block = lines[start + 1 : lines.index("", start)]
    assert len(block) <= 8
    assert "64 VirtualMachineScaleSet" in " ".join(block)
    assert "no public IP on any VM; SSH as azureuser through Bastion" in text
    lustre = reference_plan.config.storage.lustre
    assert lustre is not None
    assert f"Lustre {lustre.sku}, {lustre.capacity_ti_b:,} TiB, " in text
    assert " GB/s, at /lustre" in text


@pytest.mark.parametrize("stack", ["reference", "dev"])
def test_shipped_stacks_plan_clean(stack: str, request: pytest.FixtureRequest) -> None:
    """The stacks we ship plan with no error finding."""
    plan: PlanResult = request.getfixturevalue(f"{stack}_plan")
    assert not [f for f in plan.findings if f.level.label == "error"]


def test_program_reads_config_the_engine_passes(dev_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``pulumi up`` the engine hands config as PULUMI_CONFIG; the program reads the same typed config."""
    from gb300 import config, program  # noqa: PLC0415 - mocks are set in conftest before this import

    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(config.to_pulumi_config(dev_raw)))
    pulumi.runtime.set_all_config({})
    assert program.read_config() == config.parse(dev_raw)


def test_gpu_subnet_sized_for_growth(dev_raw: dict[str, Any]) -> None:
    """``gb300:network.gpuSubnetPrefixLength`` gives one rack a subnet with room for 56 more, and plans clean."""
    raw = copy.deepcopy(dev_raw)
    raw["network"] = {**raw["network"], "gpuSubnetPrefixLength": 22}
    plan = run_plan("dev", raw)
    gpu = next(s for s in plan.summary["subnets"] if s["name"] == "gpu")
    assert gpu == {"name": "gpu", "prefix": "10.41.252.0/22", "usable": 1019, "used": 18, "vms": 18, "holds": {}}
    assert not [f for f in plan.findings if f.level.label == "error"]


def test_racks_share_one_copy_of_their_custom_data(reference_plan: PlanResult) -> None:
    """The plan holds the GPU nodes' custom data once, not once per rack (1,388 racks held 1,388 copies)."""
    racks = [r for r in reference_plan.resources if r.type == compute_package.SCALE_SET_TOKEN]
    data = [r.inputs["virtualMachineProfile"]["osProfile"]["customData"] for r in racks]
    assert len(racks) == 64
    assert len({id(d) for d in data}) == 1


DEPLOYED_SUBSCRIPTION = "6f1c2d3e-aaaa-bbbb-cccc-0123456789ab"


def _deployed_in(subscription: str, dev_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch, path: Path) -> Path:
    """The export of the dev stack as deployed in ``subscription``: its ids and the names gb300 derives from the
    subscription (the storage accounts, the custom data naming the payload account) are that subscription's."""
    from gb300.plan import mocks  # noqa: PLC0415
    from tests.support.state import write_stack_export  # noqa: PLC0415

    with monkeypatch.context() as patched:
        patched.setattr(mocks, "SUBSCRIPTION_ID", subscription)
        deployed = run_plan("dev", copy.deepcopy(dev_raw))
    return write_stack_export(path, deployed)


@pytest.mark.parametrize("in_stack_file", [False, True], ids=["from-the-state", "from-the-stack-file"])
def test_the_state_of_a_deployment_in_a_real_subscription_plans_clean(
    dev_raw: dict[str, Any], write_stack: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, in_stack_file: bool
) -> None:
    """``gb300 plan --state`` of the unchanged stack deployed in a real subscription (named by the state's ids, or by
    the stack file's ``azure-native:subscriptionId``) passes with no storage account, container or VM replaced: the
    plan names the storage accounts from that subscription, as the deployment did, not from its mocks'."""
    state = _deployed_in(DEPLOYED_SUBSCRIPTION, dev_raw, monkeypatch, tmp_path / "state.json")
    stack = write_stack(copy.deepcopy(dev_raw), "dev")
    if in_stack_file:  # a state whose ids name no subscription: the stack file's is the one deployed to
        doc = json.loads(state.read_text(encoding="utf-8"))
        for entry in doc["deployment"]["resources"]:
            entry["id"] = None
        state.write_text(json.dumps(doc), encoding="utf-8")
        stack.write_text(
            stack.read_text(encoding="utf-8") + f"  azure-native:subscriptionId: {DEPLOYED_SUBSCRIPTION}\n",
            encoding="utf-8",
        )
    out = tmp_path / "plan.json"
    code = cli.main(["plan", "--stack-file", str(stack), "--state", str(state), "--json", str(out), "--quiet"])
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert [f["rule"] for f in doc["findings"] if f["level"] == "error"] == []
    assert code == 0
    assert doc["summary"]["replacesVms"] == []
    assert doc["summary"]["changes"] == {"adds": [], "changes": [], "destroys": []}
