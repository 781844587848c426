"""The cluster scope: the placement every component takes, said once, and the URNs deployed states hold."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300.components import ClusterScope, NetworkIds
from gb300.plan import PlanResult, run_plan

ROLE_ID = (
    "/subscriptions/00000000-0000-0000-0000-000000000000/providers/Microsoft.Authorization/roleDefinitions/"
    "11111111-2222-3333-4444-555555555555"
)


def _scope() -> ClusterScope:
    return ClusterScope(
        cluster_name="t",
        resource_group_name="t-rg",
        resource_group_id="/subscriptions/s/resourceGroups/t-rg",
        location="eastus2",
        subscription_id="s",
        tenant_id="tenant",
    )


def test_a_scope_without_its_network_says_which_component_comes_first() -> None:
    """Asking a scope for a subnet before the network component has declared them fails with what to do."""
    with pytest.raises(ValueError, match="no network yet: declare the Network component and use with_network"):
        _scope().subnet_id("gpu")
    with pytest.raises(ValueError, match="no network yet"):
        _ = _scope().vnet_id


def test_a_scope_refuses_a_subnet_it_does_not_have() -> None:
    """A role the network did not carve (Bastion off) is refused by name, with the roles the scope has."""
    scope = _scope().with_network(NetworkIds("/vnet", {"gpu": "/vnet/subnets/gpu", "head": "/vnet/subnets/head"}))
    assert scope.subnet_id("head") == "/vnet/subnets/head"
    assert scope.vnet_id == "/vnet"
    with pytest.raises(ValueError, match=r"no 'bastion' subnet \(it has \['gpu', 'head'\]\)"):
        scope.subnet_id("bastion")


@pytest.fixture(scope="module")
def heal_plan(dev_raw: dict[str, Any]) -> PlanResult:
    """The dev stack with the remediation loop on (both identities), planned once."""
    raw = copy.deepcopy(dev_raw)
    raw["remediation"] = {"enabled": True, "roleDefinitionId": ROLE_ID}
    return run_plan("dev", raw)


def test_both_identities_keep_the_urns_deployed_states_hold(heal_plan: PlanResult) -> None:
    """The one identity component declares the node identity and the remediation identity under the type tokens
    they had as two components, so a deployed stack's identities (and the role assignment) are neither replaced
    nor aliased."""
    prefix = "urn:pulumi:dev::gb300::"
    urns = {r.urn for r in heal_plan.resources if "Identity" in r.urn}
    assert urns == {
        f"{prefix}gb300:identity:NodeIdentity::dev-node",
        f"{prefix}gb300:identity:NodeIdentity$azure-native:managedidentity:UserAssignedIdentity::dev-node-id",
        f"{prefix}gb300:heal:RemediationIdentity::dev-heal",
        f"{prefix}gb300:heal:RemediationIdentity$azure-native:managedidentity:UserAssignedIdentity::dev-heal-id",
        f"{prefix}gb300:heal:RemediationIdentity$azure-native:authorization:RoleAssignment::dev-heal-role",
    }


def test_every_component_places_its_resources_where_the_scope_says(heal_plan: PlanResult) -> None:
    """Every resource that names a resource group is in the cluster's, and every located one is in the stack's
    region (or global, as private DNS and action groups are)."""
    groups = {r.inputs["resourceGroupName"] for r in heal_plan.resources if "resourceGroupName" in r.inputs}
    assert groups == {"dev-rg"}
    locations = {r.inputs["location"] for r in heal_plan.resources if "location" in r.inputs}
    assert locations <= {"eastus2", "global", "Global"}
    assert "eastus2" in locations
