"""Each component's resources and their security-relevant inputs, as the provider would receive them."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pytest

from gb300.azure import inventory
from gb300.components import ClusterScope, Network, NetworkArgs, compute_package
from gb300.config import netplan
from gb300.facts import catalog, storage_facts
from gb300.plan import PlanResult
from gb300.plan.runner import register

# Azure resources that take no tags.
UNTAGGABLE = {
    "azure-native:network:Subnet",
    "azure-native:authorization:RoleAssignment",
    "azure-native:authorization:ManagementLockByScope",
    "azure-native:network:PrivateDnsZoneGroup",
    # ARM takes no tags on these: blob containers and the blob service, Log Analytics tables, collection rule
    # associations.
    "azure-native:storage:BlobContainer",
    "azure-native:storage:BlobServiceProperties",
    "azure-native:storage:ManagementPolicy",
    "azure-native:operationalinsights:Table",
    "azure-native:monitor:DataCollectionRuleAssociation",
}


def _of(plan: PlanResult, typ: str) -> list[Any]:
    return [r for r in plan.resources if r.type == typ]


def test_every_rack_is_a_scale_set_in_one_fabric(reference_plan: PlanResult) -> None:
    """64 scale sets of 18 GB300 VMs, all joined to the pool's single interconnect group."""
    sets = inventory.scale_sets(reference_plan.resources)
    groups = _of(reference_plan, "azure-native:network:InterconnectGroup")
    assert len(sets) == 64
    assert len(groups) == 1
    assert {s.capacity for s in sets} == {18}
    assert {s.interconnect_group_id for s in sets} == {groups[0].id}
    assert groups[0].inputs["subgroupProfile"] == {
        "vmSize": "Standard_ND128isr_GB300_v6",
        "scope": "VerticalConnect",
        "size": 18,
    }


def test_scale_set_api_version_comes_from_the_fabric_model(reference_plan: PlanResult) -> None:
    """Every scale set is a resource of the azure-native package at the Compute API version the catalog's fabric
    model names, registered with that package (its parameterization) and the rack's timeouts."""
    model = catalog.load().fabric_models["interconnect-group"]
    sets = [r for r in reference_plan.resources if inventory.is_scale_set(r)]
    assert {r.type for r in sets} == {compute_package.SCALE_SET_TOKEN}
    assert model.scale_set_api_version.value == compute_package.API_VERSION
    assert {(r.package or {}).get("name") for r in sets} == {compute_package.PACKAGE_NAME}
    assert all(r.custom_timeouts and r.custom_timeouts.get("create") for r in sets)


def test_nodes_ssh_key_only_no_public_ip_accelerated(reference_plan: PlanResult) -> None:
    """GPU nodes take SSH keys only, have accelerated networking and no public IP, and run as the node identity."""
    identity = _of(reference_plan, "azure-native:managedidentity:UserAssignedIdentity")[0]
    for ss in inventory.scale_sets(reference_plan.resources):
        profile = ss.properties["virtualMachineProfile"]
        linux = profile["osProfile"]["linuxConfiguration"]
        assert linux["disablePasswordAuthentication"] is True
        assert "adminPassword" not in profile["osProfile"]
        assert linux["ssh"]["publicKeys"][0]["keyData"].startswith("ssh-ed25519 ")
        nic = profile["networkProfile"]["networkInterfaceConfigurations"][0]
        assert nic["enableAcceleratedNetworking"] is True
        assert all("publicIPAddressConfiguration" not in c for c in nic["ipConfigurations"])
        assert ss.properties["upgradePolicy"] == {"mode": "Manual"}
    assert all(
        identity.id in r.inputs["identity"]["userAssignedIdentities"]
        for r in reference_plan.resources
        if inventory.is_scale_set(r)
    )


def test_only_bastion_and_nat_have_public_ips(reference_plan: PlanResult) -> None:
    """The only public addresses belong to Bastion and the NAT gateway (egress, six for 1,153 nodes), never to a NIC."""
    ips = {r.inputs["publicIpAddressName"] for r in _of(reference_plan, "azure-native:network:PublicIPAddress")}
    assert ips == {"ref-bastion-ip", "ref-nat-ip", *(f"ref-nat-ip-{i}" for i in range(2, 7))}


def test_nsgs_deny_internet_and_ssh_only_from_bastion(reference_plan: PlanResult) -> None:
    """Every NSG ends with a deny from the Internet; with no sshSourceRanges SSH comes only from Bastion."""
    nsgs = _of(reference_plan, "azure-native:network:NetworkSecurityGroup")
    assert len(nsgs) == 4
    for nsg in nsgs:
        rules = nsg.inputs["securityRules"]
        deny = [r for r in rules if r["access"] == "Deny" and r["sourceAddressPrefix"] == "Internet"]
        assert deny
        assert deny[0]["direction"] == "Inbound"
        allows = [r for r in rules if r["access"] == "Allow"]
        assert all(r["sourceAddressPrefix"] not in ("*", "Internet", "0.0.0.0/0") for r in allows)
    head = next(n for n in nsgs if n.inputs["networkSecurityGroupName"] == "ref-head-nsg")
    ssh = [r for r in head.inputs["securityRules"] if r.get("destinationPortRange") == "22"]
    bastion = next(s for s in reference_plan.summary["subnets"] if s["name"] == "AzureBastionSubnet")
    assert [r["sourceAddressPrefix"] for r in ssh] == [bastion["prefix"]]


def test_gpu_subnet_egress_through_nat(reference_plan: PlanResult) -> None:
    """The GPU and head subnets reach the Internet only through the NAT gateway, with no default outbound."""
    nat = _of(reference_plan, "azure-native:network:NatGateway")[0]
    subnets = {s.inputs["subnetName"]: s.inputs for s in _of(reference_plan, "azure-native:network:Subnet")}
    for name in ("gpu", "head"):
        assert subnets[name]["natGateway"] == {"id": nat.id}
    assert all(s["defaultOutboundAccess"] is False for s in subnets.values())


def test_every_taggable_resource_carries_cluster_tags(reference_plan: PlanResult) -> None:
    """Every Azure resource that takes tags has the user's tags and the toolkit's cluster tag."""
    for r in reference_plan.resources:
        if not r.type.startswith("azure-native:") or r.type in UNTAGGABLE:
            continue
        tags = r.inputs.get("tags", {})
        assert tags.get("gb300-cluster") == "ref", r.urn
        assert tags.get("owner") == "ml-platform", r.urn


def test_children_are_parented_to_components(reference_plan: PlanResult) -> None:
    """Everything but the resource group and the components is a child of a gb300 component."""
    for r in reference_plan.resources:
        if r.type.startswith("gb300:") or r.type == "azure-native:resources:ResourceGroup":
            continue
        assert "$gb300:" in (r.parent or "") or "::gb300:" in (r.parent or ""), r.urn


def test_vault_is_private_rbac_and_purge_protected(reference_plan: PlanResult) -> None:
    """The Key Vault uses RBAC, keeps purge protection, and is reachable only through its private endpoint."""
    vault = _of(reference_plan, "azure-native:keyvault:Vault")[0]
    props = vault.inputs["properties"]
    assert props["enableRbacAuthorization"] is True
    assert props["enablePurgeProtection"] is True
    assert props["publicNetworkAccess"] == "Disabled"
    assert props["networkAcls"]["defaultAction"] == "Deny"
    endpoints = [
        r
        for r in _of(reference_plan, "azure-native:network:PrivateEndpoint")
        if r.inputs["privateLinkServiceConnections"][0]["privateLinkServiceId"] == vault.id
    ]
    assert len(endpoints) == 1
    assert endpoints[0].inputs["privateLinkServiceConnections"][0]["groupIds"] == ["vault"]
    zones = {r.inputs["privateZoneName"] for r in _of(reference_plan, "azure-native:privatedns:PrivateZone")}
    assert "privatelink.vaultcore.azure.net" in zones


def test_private_dns_links_fall_back_to_public_resolution(reference_plan: PlanResult) -> None:
    """Every private DNS zone's VNet link resolves names the zone lacks publicly instead of answering NXDOMAIN."""
    links = _of(reference_plan, "azure-native:privatedns:VirtualNetworkLink")
    assert links
    assert {link.name: link.inputs.get("resolutionPolicy") for link in links} == {
        link.name: "NxDomainRedirect" for link in links
    }


def test_munge_key_is_a_secret_read_by_the_node_identity_only(reference_plan: PlanResult) -> None:
    """The munge key is stored as a secret (never shown in the plan) and nodes may read that one secret only."""
    secret = _of(reference_plan, "azure-native:keyvault:Secret")[0]
    assert secret.inputs["secretName"] == "munge-key"
    assert secret.inputs["properties"] == "[secret]"
    vault = _of(reference_plan, "azure-native:keyvault:Vault")[0]
    identity = _of(reference_plan, "azure-native:managedidentity:UserAssignedIdentity")[0]
    grants = [
        r
        for r in _of(reference_plan, "azure-native:authorization:RoleAssignment")
        if r.inputs["roleDefinitionId"].endswith("4633458b-17de-408a-b874-0445c86b69e6")
    ]
    assert len(grants) == 1
    assert grants[0].inputs["scope"] == secret.id
    assert grants[0].inputs["scope"].startswith(vault.id + "/secrets/")
    assert grants[0].inputs["principalType"] == "ServicePrincipal"
    assert grants[0].inputs["principalId"] != identity.id  # a principal (object) id, not the resource id


# azure-native deletes these through the vault's data plane (custom_keyvault.go), not through ARM.
DATA_PLANE_DELETES = ("azure-native:keyvault:Secret", "azure-native:keyvault:Key")


def test_nothing_pulumi_would_delete_through_the_vaults_data_plane(reference_plan: PlanResult) -> None:
    """The munge key's secret and its vault are retained on delete and not protected: `pulumi destroy` and a
    replacement never call Key Vault's data plane (closed, and the deploy identity has no data role), and
    destroy is not stopped by them; every other resource of those types would be deleted that way, so none exists."""
    secrets = [r for r in reference_plan.resources if r.type in DATA_PLANE_DELETES]
    assert [r.type for r in secrets] == ["azure-native:keyvault:Secret"]
    vault = _of(reference_plan, "azure-native:keyvault:Vault")[0]
    for resource in (*secrets, vault):
        assert (resource.retain_on_delete, resource.protect) == (True, False), resource.name
    assert vault.inputs["properties"]["enablePurgeProtection"] is True
    # The longest retention Key Vault takes (docs/day2.md: the name is held 90 days), read from data/storage.yaml.
    longest = storage_facts.load()["keyVaultSoftDelete"]["maxDays"]
    days = vault.inputs["properties"]["softDeleteRetentionInDays"]
    assert days == storage_facts.key_vault_soft_delete_days() == longest


def test_nodes_find_the_vault_by_tag_not_custom_data(reference_plan: PlanResult) -> None:
    """Scale sets and the head carry the vault's name as a tag, so custom data holds no secret or vault name."""
    vault = _of(reference_plan, "azure-native:keyvault:Vault")[0]
    head = _of(reference_plan, "azure-native:compute:VirtualMachine")[0]
    for tags in [ss.tags for ss in inventory.scale_sets(reference_plan.resources)] + [head.inputs["tags"]]:
        assert tags["gb300-keyvault"] == vault.inputs["vaultName"]


def test_head_node_has_no_public_ip_by_default(reference_plan: PlanResult) -> None:
    """The head node's NIC has no public IP unless the stack asks for one, and it logs in by key only."""
    nic = next(r for r in _of(reference_plan, "azure-native:network:NetworkInterface") if r.name == "ref-head-nic")
    assert all("publicIPAddress" not in c for c in nic.inputs["ipConfigurations"])
    head = _of(reference_plan, "azure-native:compute:VirtualMachine")[0]
    assert head.inputs["osProfile"]["linuxConfiguration"]["disablePasswordAuthentication"] is True


def test_head_vm_deploys_without_the_standard_security_type_feature(reference_plan: PlanResult) -> None:
    """The head VM sends no securityProfile: an explicit Standard needs UseStandardSecurityType at API 2024-11-01."""
    (head,) = _of(reference_plan, "azure-native:compute:VirtualMachine")
    assert "securityProfile" not in head.inputs


def test_login_public_ip_is_opt_in(dev_raw: dict[str, Any]) -> None:
    """With loginPublicIp the head NIC gets a public IP; nothing else does."""
    raw = copy.deepcopy(dev_raw)
    raw["access"] = {**raw["access"], "loginPublicIp": True, "sshSourceRanges": ["203.0.113.0/24"]}
    resources = register("dev", raw)
    ip = next(r for r in resources if r.name == "dev-head-ip")
    nic = next(r for r in resources if r.name == "dev-head-nic")
    assert nic.inputs["ipConfigurations"][0]["publicIPAddress"] == {"id": ip.id}


@pytest.fixture
def ssh_network_args() -> NetworkArgs:
    plans = netplan.carve("10.50.0.0/16", gpu_vms=18, reserved=5)
    return NetworkArgs(
        scope=ClusterScope(
            cluster_name="t",
            resource_group_name="rg",
            resource_group_id="/subscriptions/s/resourceGroups/rg",
            location="eastus2",
            subscription_id="s",
            tenant_id="t",
            tags={"gb300-cluster": "t"},
        ),
        address_space="10.50.0.0/16",
        subnets=plans,
        ssh_source_ranges=["203.0.113.0/24"],
        nat_gateway=False,
        bastion=False,
    )


@pulumi.runtime.test
def test_network_outputs_subnet_ids(ssh_network_args: NetworkArgs) -> Any:
    """The network component's subnet outputs resolve to Azure subnet ids inside its VNet."""
    net = Network("t", ssh_network_args)

    def check(values: list[str]) -> None:
        vnet_id, gpu_id, head_id = values
        assert vnet_id.endswith("/providers/Microsoft.Network/virtualNetworks/t-vnet")
        assert gpu_id == f"{vnet_id}/subnets/gpu"
        assert head_id == f"{vnet_id}/subnets/head"

    return pulumi.Output.all(net.vnet_id, net.subnet_ids["gpu"], net.subnet_ids["head"]).apply(check)
