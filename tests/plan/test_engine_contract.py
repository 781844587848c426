"""The plan holds the program to what the Pulumi engine enforces: URNs built as the engine builds them, no
URN registered twice, pool names that cannot collide with gb300's own, and boot-time dependencies declared."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pulumi
import pytest

from gb300 import cli, config
from gb300.azure import inventory
from gb300.plan import PlanResult
from gb300.plan.runner import DuplicateUrnError, register
from gb300.resources import ResourceRecord

STACK_TYPE = "pulumi:pulumi:Stack"
KEY_VAULT_SECRETS_USER = "4633458b-17de-408a-b874-0445c86b69e6"  # Azure's built-in role id (data/roles.yaml)
HEAD_VM = "azure-native:compute:VirtualMachine"


def _qualified_type(urn: str) -> str:
    return urn.split("::")[2]


@pytest.mark.parametrize("stack", ["reference", "dev"])
def test_urns_are_built_as_the_engine_builds_them(stack: str, request: pytest.FixtureRequest) -> None:
    """Root resources' URNs carry their own type only; a child's carries its parent's whole qualified type."""
    plan: PlanResult = request.getfixturevalue(f"{stack}_plan")
    by_urn = {r.urn: r for r in plan.resources}
    roots = 0
    for r in plan.resources:
        assert r.urn.startswith(f"urn:pulumi:{stack}::gb300::")
        assert r.urn.endswith(f"::{r.name}")
        assert STACK_TYPE not in r.urn
        assert r.parent is not None
        if _qualified_type(r.parent) == STACK_TYPE:
            roots += 1
            assert _qualified_type(r.urn) == r.type
        else:
            assert _qualified_type(r.urn) == f"{_qualified_type(by_urn[r.parent].urn)}${r.type}"
    assert roots >= 5  # resource group, network, identity, secrets, head, pools...


def _two_of_a_kind() -> None:
    pulumi.ComponentResource("gb300:test:Thing", "same")
    pulumi.ComponentResource("gb300:test:Thing", "same")


def test_a_duplicate_urn_fails_the_plan(dev_raw: dict[str, Any]) -> None:
    """Two registrations with one URN fail the plan with the engine's message, instead of one silently winning."""
    with pytest.raises(DuplicateUrnError) as caught:
        register("dev", copy.deepcopy(dev_raw), program=_two_of_a_kind)
    assert str(caught.value).startswith("Duplicate resource URN 'urn:pulumi:dev::gb300::gb300:test:Thing::same'")


@pytest.mark.parametrize("name", config.RESERVED_POOL_NAMES)
def test_pool_names_gb300_uses_are_refused(
    name: str, dev_raw: dict[str, Any], write_stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pool named like one of gb300's own parts is refused with its key path (exit 2), before any registration."""
    raw = copy.deepcopy(dev_raw)
    raw["gpuPools"][0]["name"] = name
    assert cli.main(["plan", "--stack-file", str(write_stack(raw)), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"gb300:gpuPools[0].name: is a name gb300 gives its own resources (got {name!r})" in err
    assert "Traceback" not in err


def _boot_reads(plan: PlanResult) -> dict[str, ResourceRecord]:
    """The munge secret, the node identity's read access to that secret, and the vault's private DNS zone group."""
    res = plan.resources
    (secret,) = [r for r in res if r.type == "azure-native:keyvault:Secret" and r.inputs["secretName"] == "munge-key"]
    (grant,) = [
        r
        for r in res
        if r.type == "azure-native:authorization:RoleAssignment"
        and r.inputs["scope"] == secret.id
        and r.inputs["roleDefinitionId"].endswith(KEY_VAULT_SECRETS_USER)
    ]
    (zone_group,) = [
        r
        for r in res
        if r.type == "azure-native:network:PrivateDnsZoneGroup"
        and r.inputs["privateDnsZoneConfigs"][0]["name"] == "vault"
    ]
    return {"secret": secret, "role assignment": grant, "DNS zone group": zone_group}


@pytest.mark.parametrize("stack", ["reference", "dev"])
def test_nodes_are_created_after_what_their_first_boot_reads(stack: str, request: pytest.FixtureRequest) -> None:
    """The head VM and every GPU scale set depend on the munge secret, the nodes' read access and the vault's DNS."""
    plan: PlanResult = request.getfixturevalue(f"{stack}_plan")
    needed = _boot_reads(plan)
    nodes = [r for r in plan.resources if inventory.is_scale_set(r) or r.type == HEAD_VM]
    assert len(nodes) == plan.summary["racks"] + 1
    for node in nodes:
        missing = [what for what, r in needed.items() if r.urn not in node.dependencies]
        assert missing == [], f"{node.name} does not wait for {missing}"


def test_plan_json_records_dependencies(tmp_path: Path) -> None:
    """`gb300 plan --json` lists each resource's dependencies as URNs of registered resources."""
    out = tmp_path / "plan.json"
    assert cli.main(["plan", "--stack", "dev", "--json", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    urns = {r["urn"] for r in doc["resources"]}
    rack = next(r for r in doc["resources"] if r["name"] == "dev-train-r0001")
    assert rack["dependencies"]
    assert set(rack["dependencies"]) <= urns
    assert any("keyvault:Secret::" in d for d in rack["dependencies"])
