"""Least privilege: every role assignment is a known built-in role, scoped to the one resource it serves."""

from __future__ import annotations

import copy
import uuid
from collections import Counter
from typing import Any

import pytest

from gb300.facts import roles
from gb300.plan import PlanResult
from gb300.plan.runner import register
from gb300.resources import ResourceRecord

ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"


def _assignments(plan: PlanResult) -> list[ResourceRecord]:
    return [r for r in plan.resources if r.type == ROLE_ASSIGNMENT]


def _by_id(plan: PlanResult) -> dict[str, ResourceRecord]:
    return {r.id: r for r in plan.resources if r.id}


def _node_principal(plan: PlanResult) -> str:
    identity = next(r for r in plan.resources if r.type == "azure-native:managedidentity:UserAssignedIdentity")
    # The mocks derive principal ids from the resource name (plan/mocks.py computed_outputs).
    from gb300.plan.mocks import _guid  # noqa: PLC0415

    return _guid("principal", identity.name)


def test_every_role_is_a_known_builtin(reference_plan: PlanResult) -> None:
    """Every role definition id is a built-in role listed in data/roles.yaml."""
    assert _assignments(reference_plan)
    for ra in _assignments(reference_plan):
        role_id = ra.inputs["roleDefinitionId"]
        assert "/providers/Microsoft.Authorization/roleDefinitions/" in role_id
        assert roles.name_of(role_id) is not None, role_id


def test_every_scope_is_one_registered_resource(reference_plan: PlanResult) -> None:
    """No assignment is scoped to a subscription or resource group: each names a resource the plan declares."""
    ids = _by_id(reference_plan)
    for ra in _assignments(reference_plan):
        scope = ra.inputs["scope"]
        assert scope in ids, scope
        assert ids[scope].type not in ("azure-native:resources:ResourceGroup",)
        assert "/providers/" in scope


def test_node_identity_gets_exactly_what_nodes_need(reference_plan: PlanResult) -> None:
    """Nodes read datasets and their node payloads, write checkpoints, publish metrics and read the munge key
    secret only, nothing else."""
    ids = _by_id(reference_plan)
    node = _node_principal(reference_plan)
    granted = sorted(
        (
            roles.name_of(ra.inputs["roleDefinitionId"]),
            ids[ra.inputs["scope"]].type.split(":")[-1],
            ids[ra.inputs["scope"]].name,
        )
        for ra in _assignments(reference_plan)
        if ra.inputs["principalId"] == node
    )
    assert granted == [
        ("Key Vault Secrets User", "Secret", "ref-munge-key"),
        ("Monitoring Metrics Publisher", "DataCollectionRule", "ref-mon-prom-dcr"),
        ("Storage Blob Data Contributor", "BlobContainer", "ref-blob-checkpoints"),
        ("Storage Blob Data Reader", "BlobContainer", "ref-blob-datasets"),
        ("Storage Blob Data Reader", "BlobContainer", "ref-payload-container"),
    ]
    assert all(
        ra.inputs["principalType"] == "ServicePrincipal"
        for ra in _assignments(reference_plan)
        if ra.inputs["principalId"] == node
    )


def test_deployer_writes_only_the_node_payload_container(reference_plan: PlanResult) -> None:
    """The identity running `pulumi up` gets one data role, to upload node payloads, on that one container, as
    the principal type the stack names (the reference stack is deployed by the pipelines: ServicePrincipal)."""
    ids = _by_id(reference_plan)
    [deployer] = [ra for ra in _assignments(reference_plan) if ra.name == "ref-payload-deployer"]
    assert roles.name_of(deployer.inputs["roleDefinitionId"]) == "Storage Blob Data Contributor"
    container = ids[deployer.inputs["scope"]]
    assert (container.type, container.inputs["containerName"]) == (
        "azure-native:storage:BlobContainer",
        "gb300-node-payload",
    )
    assert deployer.inputs["principalType"] == "ServicePrincipal"


def test_deployer_is_granted_as_a_user_by_default(reference_raw: dict[str, Any]) -> None:
    """A stack that does not set deployerPrincipalType grants the deployer's role as a User (a person's az login)."""
    raw = copy.deepcopy(reference_raw)
    del raw["storage"]["nodePayload"]["deployerPrincipalType"]
    [deployer] = [r for r in register("reference", raw) if r.name == "ref-payload-deployer"]
    assert deployer.inputs["principalType"] == "User"


def test_grafana_reads_only_the_workspaces(reference_plan: PlanResult) -> None:
    """Grafana's identity reads the Azure Monitor workspace (resource and data) and the Log Analytics workspace."""
    ids = _by_id(reference_plan)
    node = _node_principal(reference_plan)
    tie = reference_plan.config.storage.lustre_tie  # the reference does not tie Lustre to Blob (an opt-in)
    lustre_service = tie.service_principal_id if tie is not None else None
    others = Counter(
        (roles.name_of(ra.inputs["roleDefinitionId"]), ids[ra.inputs["scope"]].type)
        for ra in _assignments(reference_plan)
        if ra.inputs["principalId"] not in {node, lustre_service} and ra.name != "ref-payload-deployer"
    )
    assert others == Counter(
        {
            ("Monitoring Reader", "azure-native:monitor:AzureMonitorWorkspace"): 1,
            ("Monitoring Data Reader", "azure-native:monitor:AzureMonitorWorkspace"): 1,
            ("Log Analytics Reader", "azure-native:operationalinsights:Workspace"): 1,
        }
    )


@pytest.mark.parametrize("name", sorted(roles._roles()))
def test_role_data_is_a_guid(name: str) -> None:
    """Each role in data/roles.yaml maps to a built-in role definition GUID."""
    guid = roles._roles()[name]
    assert len(guid) == 36
    assert guid.count("-") == 4
    assert roles.name_of(roles.definition_id(name)) == name


def test_assignment_names_differ_per_subscription(dev_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Role assignment names (unique tenant-wide) differ between two subscriptions and repeat within one."""
    from gb300.plan import mocks  # noqa: PLC0415
    from gb300.plan.runner import register  # noqa: PLC0415

    def names(subscription: str) -> dict[str, str]:
        monkeypatch.setattr(mocks, "SUBSCRIPTION_ID", subscription)
        found = {r.name: r.inputs["roleAssignmentName"] for r in register("dev", dev_raw) if r.type == ROLE_ASSIGNMENT}
        assert found
        for guid in found.values():
            assert str(uuid.UUID(guid)) == guid
        return found

    first = names("aaaaaaaa-0000-0000-0000-000000000001")
    second = names("bbbbbbbb-0000-0000-0000-000000000002")
    assert first.keys() == second.keys()
    assert not set(first.values()) & set(second.values())
    assert names("aaaaaaaa-0000-0000-0000-000000000001") == first


def test_renamed_assignment_is_deleted_before_it_is_created(reference_plan: PlanResult) -> None:
    """Azure refuses a second assignment of one role to one principal on one scope, so replacement deletes first."""
    assert all(ra.delete_before_replace for ra in _assignments(reference_plan))
