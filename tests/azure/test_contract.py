"""The contract test: every ARM body gb300 writes as data, in every shipped stack's plan JSON, is one Azure's own
SDK models (azure-mgmt-compute) accept, key by key; so is every role assignment (azure-mgmt-authorization)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli
from gb300.azure import contract
from gb300.components import compute_package
from gb300.config import stacks as gb300_stacks
from gb300.facts import catalog, roles
from gb300.plan import PlanResult
from gb300.resources import UNKNOWN, ResourceRecord
from tests.support import authorization_models
from tests.support.policy_support import run

STACKS = gb300_stacks.stack_names()
ACCESS_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "access" / "Pulumi.access.yaml"


def _plan_json(stack: str, tmp_path: Path, *, stack_file: Path | None = None) -> list[ResourceRecord]:
    out = tmp_path / f"{stack}.json"
    which = ["--stack-file", str(stack_file)] if stack_file else ["--stack", stack]
    assert cli.main(["plan", *which, "--json", str(out), "--quiet"]) in (0, 1)
    doc = json.loads(out.read_text())
    return [
        ResourceRecord(r["urn"], r["type"], r["name"], r["parent"], r["protect"], r["id"], r["inputs"])
        for r in doc["resources"]
    ]


@pytest.mark.parametrize("stack", STACKS)
def test_shipped_stacks_match_azures_models(stack: str, tmp_path: Path) -> None:
    """Each shipped stack's plan JSON holds data-declared bodies, and every key of every one passes the models."""
    resources = _plan_json(stack, tmp_path)
    checked = [r for r in resources if contract.body_of(r) is not None]
    assert checked  # the racks at least: a check of nothing would pass by accident
    assert [str(v) for v in contract.violations(resources)] == []
    assert any(r.type == authorization_models.ROLE_ASSIGNMENT for r in resources)
    assert authorization_models.violations(resources) == []


@pytest.fixture(scope="module")
def access_resources(tmp_path_factory: pytest.TempPathFactory) -> list[ResourceRecord]:
    """The plan JSON's resources of the access example (two login nodes, Entra user and admin groups)."""
    return _plan_json("access", tmp_path_factory.mktemp("access"), stack_file=ACCESS_EXAMPLE)


def _rack(plan: PlanResult) -> ResourceRecord:
    return next(r for r in plan.resources if r.type == compute_package.SCALE_SET_TOKEN)


def _broken(rack: ResourceRecord, change: Any) -> ResourceRecord:
    inputs = copy.deepcopy(rack.inputs)
    change(inputs)
    return ResourceRecord(rack.urn, rack.type, rack.name, rack.parent, rack.protect, rack.id, inputs)


def _old_group_shape(inputs: dict[str, Any]) -> None:
    profile = inputs["virtualMachineProfile"]["networkProfile"]
    profile["interconnectGroupProfile"] = {"id": profile["interconnectGroupProfile"]["interconnectGroup"]["id"]}


def _bad_enum(inputs: dict[str, Any]) -> None:
    inputs["orchestrationMode"] = "Uniformly"


def _read_only(inputs: dict[str, Any]) -> None:
    inputs["uniqueId"] = "0000"


def _wrong_type(inputs: dict[str, Any]) -> None:
    inputs["zones"] = "1"


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        pytest.param(
            _old_group_shape,
            "properties.virtualMachineProfile.networkProfile.interconnectGroupProfile.id",
            "unknown key",
            id="unknown-key",
        ),
        pytest.param(_bad_enum, "properties.orchestrationMode", "'Uniformly' is not a value", id="enum"),
        pytest.param(_read_only, "properties.uniqueId", "read-only key", id="read-only"),
        pytest.param(_wrong_type, "zones", "must be an array (got string)", id="type"),
    ],
)
def test_a_broken_key_is_named_with_its_path(dev_plan: PlanResult, change: Any, path: str, words: str) -> None:
    """A key broken on purpose fails the check, which names the rack and the key's full path."""
    found = contract.violations([_broken(_rack(dev_plan), change)])
    assert [v.path for v in found] == [path]
    assert words in found[0].problem
    assert str(found[0]).startswith(f"dev-train-r0001: {path}: ")


def test_another_api_version_is_refused(dev_plan: PlanResult, monkeypatch: pytest.MonkeyPatch) -> None:
    """A package at an API version that neither the models are of nor data/skus.yaml lets them stand in for is a
    violation on ``apiVersion``."""
    monkeypatch.setattr(compute_package, "API_VERSION", "2024-11-01")
    found = contract.violations([_rack(dev_plan)])
    assert [v.path for v in found] == ["apiVersion"]
    assert contract.sdk_api_version() in found[0].problem


def test_the_package_version_is_checked_by_the_models_that_stand_in_for_it() -> None:
    """The racks' Compute API version (2026-03-01) is checked against the installed models (2026-04-01) only
    because data/skus.yaml says so, with the differences it knows."""
    stand_in = catalog.load().contract_models[compute_package.API_VERSION]
    assert stand_in == contract.sdk_api_version() != compute_package.API_VERSION


def test_the_arm_body_is_rebuilt_from_the_flattened_inputs(dev_plan: PlanResult) -> None:
    """azure-native's flattened inputs go back into ARM's envelopes: the scale set's ``properties``, each network
    and IP configuration's and extension's ``properties``, and the identity list as ARM's map."""
    name, body = contract.arm_body(_rack(dev_plan))
    assert name == "VirtualMachineScaleSet"
    assert set(body) == {"location", "zones", "sku", "identity", "tags", "properties"}
    profile = body["properties"]["virtualMachineProfile"]
    nic = profile["networkProfile"]["networkInterfaceConfigurations"][0]
    assert set(nic) == {"name", "properties"}
    assert set(nic["properties"]["ipConfigurations"][0]) == {"name", "properties"}
    assert "subnet" in nic["properties"]["ipConfigurations"][0]["properties"]
    extension = profile["extensionProfile"]["extensions"][0]
    assert set(extension) == {"name", "properties"}
    assert extension["properties"]["publisher"]
    assert isinstance(body["identity"]["userAssignedIdentities"], dict)
    assert "interconnectGroup" in profile["networkProfile"]["interconnectGroupProfile"]


def test_a_generic_resource_of_an_unknown_type_is_named(dev_plan: PlanResult) -> None:
    """A generic azure-native resource whose type has no SDK model here cannot pass unchecked."""
    generic = ResourceRecord(
        "urn:x",
        contract.GENERIC,
        "odd",
        None,
        False,
        None,
        {"resourceProviderNamespace": "Microsoft.Compute", "resourceType": "galleries", "properties": {}},
    )
    assert [v.path for v in contract.violations([generic])] == ["resourceType"]


def test_the_plan_rule_reports_the_path(dev_plan: PlanResult) -> None:
    """``gb300 plan`` runs the same check as the error rule arm-body-matches-sdk."""
    found = run("arm-body-matches-sdk", [_broken(_rack(dev_plan), _old_group_shape)])
    assert [f.level.label for f in found] == ["error"]
    assert "interconnectGroupProfile.id: unknown key" in found[0].message


def _racks(rack: ResourceRecord, count: int, change: Any = None, at: int | None = None) -> list[ResourceRecord]:
    """``count`` copies of ``rack`` named as a pool names its racks (each its own name and rack tag), ``change``
    applied to the inputs of rack number ``at`` (1-based) only."""
    text = json.dumps(rack.inputs)
    out = []
    for n in range(1, count + 1):
        inputs = json.loads(text)
        name = f"dev-train-r{n:04d}"
        inputs["vmScaleSetName"] = name
        inputs["virtualMachineProfile"]["osProfile"]["computerNamePrefix"] = f"{name}-"
        inputs["tags"]["gb300-rack"] = str(n)
        if n == at:
            change(inputs)
        out.append(ResourceRecord(f"{rack.urn}{n}", rack.type, name, rack.parent, rack.protect, rack.id, inputs))
    return out


def _name_not_text(inputs: dict[str, Any]) -> None:
    inputs["virtualMachineProfile"]["osProfile"]["computerNamePrefix"] = 7


GROUP_ID = "properties.virtualMachineProfile.networkProfile.interconnectGroupProfile.id"


@pytest.mark.parametrize(
    ("change", "path", "at"),
    [
        pytest.param(_old_group_shape, GROUP_ID, 1, id="unknown-key-first"),
        pytest.param(_old_group_shape, GROUP_ID, 700, id="unknown-key-700th"),
        pytest.param(_old_group_shape, GROUP_ID, 1388, id="unknown-key-last"),
        pytest.param(_bad_enum, "properties.orchestrationMode", 700, id="enum-700th"),
        pytest.param(_read_only, "properties.uniqueId", 700, id="read-only-700th"),
        pytest.param(_wrong_type, "zones", 700, id="type-700th"),
        pytest.param(
            _name_not_text, "properties.virtualMachineProfile.osProfile.computerNamePrefix", 700, id="name-700th"
        ),
    ],
)
def test_a_broken_rack_among_many_is_the_one_named(dev_plan: PlanResult, change: Any, path: str, at: int) -> None:
    """Of 1,388 racks alike but for their names, the one whose body breaks a key is named, and only that one."""
    found = contract.violations(_racks(_rack(dev_plan), 1388, change, at))
    assert [(v.resource, v.path) for v in found] == [(f"dev-train-r{at:04d}", path)]


PRIMARY = "properties.virtualMachineProfile.networkProfile.networkInterfaceConfigurations[0].properties.primary"


def _primary(value: Any) -> Any:
    def change(inputs: dict[str, Any]) -> None:
        inputs["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"][0]["primary"] = value

    return change


@pytest.mark.parametrize(("others", "odd", "named"), [(True, 1, [2]), (False, 0, [2]), (1, True, [1, 3])])
def test_a_number_is_not_taken_for_a_boolean(dev_plan: PlanResult, others: Any, odd: Any, named: list[int]) -> None:
    """Racks whose network profiles are equal in Python (``1 == True``) but not in JSON are each checked."""
    racks = _racks(_rack(dev_plan), 3, _primary(odd), at=2)
    for rack in (racks[0], racks[2]):
        _primary(others)(rack.inputs)
    found = contract.violations(racks)
    assert [(v.resource, v.path) for v in found] == [(f"dev-train-r{n:04d}", PRIMARY) for n in named]
    assert all("must be a boolean (got number)" in v.problem for v in found)


def test_values_a_preview_cannot_know_are_not_checked(dev_plan: PlanResult) -> None:
    """A rack whose identity and subnet are not known yet (a first preview, as the policy pack passes them) passes the
    check, and a broken key beside them is still named: the real engine's first preview of a new stack."""

    def unknown(inputs: dict[str, Any]) -> None:
        inputs["identity"] = UNKNOWN
        nic = inputs["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"][0]
        nic["ipConfigurations"][0]["subnet"] = {"id": UNKNOWN}

    def unknown_and_broken(inputs: dict[str, Any]) -> None:
        unknown(inputs)
        _bad_enum(inputs)

    assert contract.violations([_broken(_rack(dev_plan), unknown)]) == []
    found = contract.violations([_broken(_rack(dev_plan), unknown_and_broken)])
    assert [v.path for v in found] == ["properties.orchestrationMode"]


def test_the_entra_extension_matches_azures_model(access_resources: list[ResourceRecord]) -> None:
    """The access example's Entra sign-in extensions (and every other VM extension), rebuilt as ARM bodies, pass
    azure-mgmt-compute's VirtualMachineExtension model key by key."""
    resources = access_resources
    entra = [r for r in resources if r.name.endswith("-entra")]
    assert [contract.arm_body(r, "VirtualMachineExtension")[1]["properties"]["type"] for r in entra] == [
        "AADSSHLoginForLinux"
    ] * 2
    assert [str(v) for v in contract.typed_violations(resources)] == []


def test_a_broken_extension_key_is_named(tmp_path: Path) -> None:
    """An extension body with a key the model lacks is a violation naming its path (the check can fail)."""
    inputs = {"vmName": "x", "publisher": "p", "type": "t", "typeHandlerVersion": "1.0", "bogus": 1}
    rec = ResourceRecord("urn:x", "azure-native:compute:VirtualMachineExtension", "x-entra", None, False, None, inputs)
    assert [v.path for v in contract.typed_violations([rec])] == ["properties.bogus"]


def test_the_vm_login_role_assignments_match_azures_model(access_resources: list[ResourceRecord]) -> None:
    """Each login VM's grants (Virtual Machine User Login to each user group, Administrator Login to each admin
    group, scoped to that VM) and every other role assignment of the access example pass azure-mgmt-authorization's
    RoleAssignmentCreateParameters, key by key, at the API version azure-native sends."""
    assigned = [r for r in access_resources if r.type == authorization_models.ROLE_ASSIGNMENT]
    names = ("Virtual Machine Administrator Login", "Virtual Machine User Login")
    grants = sorted(
        (r.inputs["scope"].rsplit("/", 1)[1], name, r.inputs["principalType"])
        for r in assigned
        if (name := roles.name_of(r.inputs["roleDefinitionId"]) or "") in names
    )
    vms = sorted({vm for vm, _, _ in grants})
    assert len(vms) == 2
    assert grants == sorted((vm, name, "Group") for vm in vms for name in names)
    assert len(assigned) > len(grants)  # the identities' own grants are checked too
    assert authorization_models.violations(access_resources) == []


def _grant(resources: list[ResourceRecord], **change: Any) -> ResourceRecord:
    """The first VM login role assignment, with ``change`` made to its inputs (None: the key removed)."""
    grant = next(r for r in resources if r.type == authorization_models.ROLE_ASSIGNMENT and "-login-" in r.name)
    inputs = {**grant.inputs, **change}
    inputs = {k: v for k, v in inputs.items() if v is not None}
    return ResourceRecord(grant.urn, grant.type, grant.name, grant.parent, grant.protect, grant.id, inputs)


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        pytest.param({"roleDefinitionName": "Reader"}, "properties.roleDefinitionName", "unknown key", id="unknown"),
        pytest.param({"createdOn": "2026-01-01T00:00:00Z"}, "properties.createdOn", "read-only key", id="read-only"),
        pytest.param({"principalId": 7}, "properties.principalId", "must be a string (got int)", id="type"),
        pytest.param({"principalType": "Person"}, "properties.principalType", "'Person' is not a value", id="enum"),
        pytest.param({"principalId": None}, "properties.principalId", "required by", id="required"),
    ],
)
def test_a_broken_role_assignment_key_is_named(
    access_resources: list[ResourceRecord], change: dict[str, Any], path: str, words: str
) -> None:
    """A role assignment body broken on purpose fails the check, which names the assignment and the key's path."""
    broken = _grant(access_resources, **change)
    [found] = authorization_models.violations([broken])
    assert found.startswith(f"{broken.name}: {path}: ")
    assert words in found


def test_the_role_assignment_models_are_the_version_azure_native_sends() -> None:
    """The models the role assignments are held to are of the Authorization API version azure-native's
    RoleAssignment sends (read from the installed provider SDK), which azure-mgmt-authorization ships."""
    version = authorization_models.api_version()
    assert authorization_models.models().__name__ == f"azure.mgmt.authorization.v{version.replace('-', '_')}.models"
