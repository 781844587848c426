"""Shared storage: the Lustre filesystem, the private storage account, and how the plan protects their data."""

from __future__ import annotations

import copy
import ipaddress
import json
import re
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli
from gb300 import tags as gb300_tags
from gb300.components.lustre import lustre_nid_range
from gb300.facts import storage_facts
from gb300.findings import Level
from gb300.plan import PlanResult, mocks
from gb300.plan.runner import register
from gb300.plan.state import parse_state
from gb300.resources import DeployedResource, ResourceRecord
from gb300.rules.data_loss import data_loss
from tests.support import signing
from tests.support.state import write_stack_export
from tests.support.tie import TIE_PRINCIPAL

AMLFS = "azure-native:storagecache:AmlFilesystem"
ACCOUNT = "azure-native:storage:StorageAccount"
TIE = {"enabled": True, "servicePrincipalId": TIE_PRINCIPAL}


def _is_data_account(r: ResourceRecord) -> bool:
    purpose = (r.inputs.get("tags") or {}).get(gb300_tags.STORAGE_PURPOSE)
    return r.type == ACCOUNT and purpose == gb300_tags.STORAGE_PURPOSE_DATA


def _is_payload_account(r: ResourceRecord) -> bool:
    purpose = (r.inputs.get("tags") or {}).get(gb300_tags.STORAGE_PURPOSE)
    return r.type == ACCOUNT and purpose == gb300_tags.STORAGE_PURPOSE_NODE_PAYLOAD


def _one(plan: PlanResult, typ: str) -> ResourceRecord:
    """The one resource of ``typ``; for storage accounts, the data account (the payload account is its own)."""
    found = [r for r in plan.resources if (_is_data_account(r) if typ == ACCOUNT else r.type == typ)]
    assert len(found) == 1, typ
    return found[0]


def _payload_settings() -> dict[str, Any]:
    """gb300:storage.nodePayload with the tests' signing key (every stack needs one)."""
    return {"signingPublicKey": signing.public_key(), "deployerPrincipalType": "ServicePrincipal"}


def _subnet(plan: PlanResult, name: str) -> ResourceRecord:
    return next(r for r in plan.resources if r.type == "azure-native:network:Subnet" and r.inputs["subnetName"] == name)


def test_lustre_filesystem_inputs(reference_plan: PlanResult) -> None:
    """The reference Lustre is 128 TiB of the 500 MB/s tier in zone 1, in the storage subnet, with a window."""
    fs = _one(reference_plan, AMLFS)
    assert fs.inputs["sku"] == {"name": "AMLFS-Durable-Premium-500"}
    assert fs.inputs["storageCapacityTiB"] == 128
    assert fs.inputs["zones"] == ["1"]
    assert fs.inputs["filesystemSubnet"] == _subnet(reference_plan, "storage").id
    assert fs.inputs["maintenanceWindow"] == {"dayOfWeek": "Sunday", "timeOfDayUTC": "02:00"}


@pytest.mark.parametrize("typ", [AMLFS, ACCOUNT])
def test_stateful_storage_is_protected(reference_plan: PlanResult, typ: str) -> None:
    """Lustre and the account are protected, retained on delete, and replaced only on the inputs Azure cannot change."""
    res = _one(reference_plan, typ)
    assert res.protect is True
    assert res.retain_on_delete is True
    assert res.delete_before_replace is False
    assert set(res.replace_on_changes) == set(storage_facts.stateful()[typ]["replaceOn"])


def test_allow_replace_lifts_the_guards_of_one_store_only(dev_raw: dict[str, Any]) -> None:
    """gb300:storage.allowReplace: [account] unprotects the account and leaves Lustre protected."""
    raw = copy.deepcopy(dev_raw)
    raw["storage"] = {
        "nodePayload": _payload_settings(),
        "lustre": {"sku": "AMLFS-Durable-Premium-500", "capacityTiB": 4, "blobIntegration": TIE},
        "blob": {},
        "allowReplace": ["account"],
    }
    records = {r.type: r for r in register("dev", raw) if not _is_payload_account(r)}
    assert (records[ACCOUNT].protect, records[ACCOUNT].retain_on_delete) == (False, False)
    assert records[ACCOUNT].delete_before_replace is True
    assert (records[AMLFS].protect, records[AMLFS].retain_on_delete) == (True, True)


def test_storage_account_is_private_and_keyless(reference_plan: PlanResult, tied_plan: PlanResult) -> None:
    """The account has a flat namespace, no public or anonymous access, TLS 1.2 and HTTPS only, and no shared keys;
    only a stack that ties Lustre to it turns shared keys on, as Azure's blob integration requires."""
    inputs = _one(reference_plan, ACCOUNT).inputs
    assert inputs["allowSharedKeyAccess"] is False
    assert _one(tied_plan, ACCOUNT).inputs["allowSharedKeyAccess"] is True
    assert inputs["defaultToOAuthAuthentication"] is True  # the nodes and the portal sign in with Entra ID
    assert inputs["isHnsEnabled"] is False  # a flat namespace, so blob versioning is on (test_blob_protection)
    assert inputs["allowBlobPublicAccess"] is False
    assert inputs["minimumTlsVersion"] == "TLS1_2"
    assert inputs["publicNetworkAccess"] == "Disabled"
    assert inputs["enableHttpsTrafficOnly"] is True
    assert inputs["networkRuleSet"] == {"defaultAction": "Deny", "bypass": "None"}
    assert inputs["kind"] == "StorageV2"
    assert 3 <= len(inputs["accountName"]) <= 24
    assert inputs["accountName"].isalnum()


def test_reference_plan_has_no_account_with_shared_keys(reference_plan: PlanResult) -> None:
    """Every storage account in the reference plan (the data account and the node payload account) has
    allowSharedKeyAccess false (not true, not left to Azure's default): without the Lustre opt-in no account takes
    account keys."""
    accounts = [r for r in reference_plan.resources if r.type == ACCOUNT]
    assert accounts
    assert {a.name: a.inputs.get("allowSharedKeyAccess") for a in accounts} == {a.name: False for a in accounts}


@pytest.mark.parametrize(
    ("tied", "names"),
    [
        (False, ["checkpoints", "datasets", "gb300-node-payload"]),
        (True, ["checkpoints", "datasets", "gb300-node-payload", "lustre-logging"]),
    ],
)
def test_containers_are_private(
    reference_plan: PlanResult, tied_plan: PlanResult, *, tied: bool, names: list[str]
) -> None:
    """The datasets and checkpoints containers (and, on a stack tying Lustre to Blob, Lustre's logging container)
    exist in the data account, the node payloads' in the payload account, all with no public access."""
    plan = tied_plan if tied else reference_plan
    data = _one(plan, ACCOUNT)
    [payload] = [r for r in plan.resources if _is_payload_account(r)]
    containers = [r for r in plan.resources if r.type == "azure-native:storage:BlobContainer"]
    assert sorted(c.inputs["containerName"] for c in containers) == names
    for c in containers:
        account = payload if c.inputs["containerName"] == "gb300-node-payload" else data
        assert c.inputs["publicAccess"] == "None"
        assert c.inputs["accountName"] == account.inputs["accountName"]
        assert c.id is not None
        assert c.id.startswith(f"{account.id}/blobServices/default/containers/")


def test_private_endpoints_and_dns(reference_plan: PlanResult) -> None:
    """The flat-namespace account gets one private endpoint, blob, in the endpoints subnet, with its private DNS zone
    linked to the VNet (nothing on a flat account uses dfs)."""
    account = _one(reference_plan, ACCOUNT)
    vnet = _one(reference_plan, "azure-native:network:VirtualNetwork")
    expected = storage_facts.private_link_zones()
    ours = [r for r in reference_plan.resources if r.parent and "gb300:storage:BlobStore" in r.parent]
    endpoints = [r for r in ours if r.type == "azure-native:network:PrivateEndpoint"]
    zones = {r.id: r for r in ours if r.type == "azure-native:privatedns:PrivateZone"}
    links = [r for r in ours if r.type == "azure-native:privatedns:VirtualNetworkLink"]
    groups = [r for r in ours if r.type == "azure-native:network:PrivateDnsZoneGroup"]
    assert _endpoint_groups(reference_plan.resources) == ["blob"]
    assert [z.inputs["privateZoneName"] for z in zones.values()] == [expected["blob"]]
    assert len(links) == len(groups) == 1
    for e in endpoints:
        assert e.inputs["subnet"]["id"] == _subnet(reference_plan, "endpoints").id
        assert e.inputs["privateLinkServiceConnections"][0]["privateLinkServiceId"] == account.id
    assert all(link.inputs["virtualNetwork"]["id"] == vnet.id for link in links)
    assert all(link.inputs["registrationEnabled"] is False for link in links)
    for g in groups:
        (config,) = g.inputs["privateDnsZoneConfigs"]
        assert zones[config["privateDnsZoneId"]].inputs["privateZoneName"] == expected[config["name"]]


def _endpoint_groups(records: list[ResourceRecord]) -> list[str]:
    """The sub-resources the storage account's private endpoints serve, sorted."""
    return sorted(
        g
        for r in records
        if r.type == "azure-native:network:PrivateEndpoint" and "gb300:storage:BlobStore" in (r.parent or "")
        for c in r.inputs["privateLinkServiceConnections"]
        for g in c["groupIds"]
    )


def test_hierarchical_namespace_adds_the_dfs_endpoint(reference_raw: dict[str, Any]) -> None:
    """An HNS account, which nodes mount over dfs, gets a dfs private endpoint and zone next to blob's."""
    raw = copy.deepcopy(reference_raw)
    raw["storage"]["blob"].update({"hierarchicalNamespace": True, "versioning": False})
    records = register("reference", raw)
    assert _endpoint_groups(records) == ["blob", "dfs"]
    zones = {r.inputs["privateZoneName"] for r in records if r.type == "azure-native:privatedns:PrivateZone"}
    assert set(storage_facts.private_link_zones().values()) <= zones


def test_storage_subnet_sized_by_config(dev_raw: dict[str, Any]) -> None:
    """The storage subnet is Azure's documented /27 for 4 TiB, and subnetPrefixLength overrides it."""
    raw = copy.deepcopy(dev_raw)
    raw["storage"] = {
        "nodePayload": _payload_settings(),
        "lustre": {"sku": "AMLFS-Durable-Premium-500", "capacityTiB": 4},
    }
    assert ipaddress.IPv4Network(_subnet_of(register("dev", raw), "storage")).prefixlen == 27
    raw["storage"]["lustre"]["subnetPrefixLength"] = 25
    assert ipaddress.IPv4Network(_subnet_of(register("dev", raw), "storage")).prefixlen == 25


def _subnet_of(records: list[ResourceRecord], name: str) -> str:
    return str(
        next(r for r in records if r.type == "azure-native:network:Subnet" and r.inputs["subnetName"] == name).inputs[
            "addressPrefix"
        ]
    )


@pytest.mark.parametrize("answer", [11, 4_091])
def test_reference_subnets_ignore_the_mocked_lustre_answer(
    reference_plan: PlanResult, reference_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch, answer: int
) -> None:
    """Whatever the mocks answer to getRequiredAmlFSSubnetsSize, the reference plan carves the same subnets."""
    monkeypatch.setattr(mocks, "amlfs_subnet_addresses", lambda capacity_tib: answer)
    records = register("reference", copy.deepcopy(reference_raw))
    names = ("gpu", "head", "storage", "endpoints", "AzureBastionSubnet")
    assert {n: _subnet_of(records, n) for n in names} == {
        n: _subnet(reference_plan, n).inputs["addressPrefix"] for n in names
    }


def test_lustre_beyond_documented_sizes_needs_a_subnet_size(
    write_stack: Any, dev_raw: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """Above the capacities Azure documents a size for, the stack must set subnetPrefixLength (exit 2, key path)."""
    raw = copy.deepcopy(dev_raw)
    raw["storage"] = {
        "nodePayload": _payload_settings(),
        "lustre": {"sku": "AMLFS-Durable-Premium-500", "capacityTiB": 404},
    }
    assert cli.main(["plan", "--stack-file", str(write_stack(raw)), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "gb300:storage.lustre.subnetPrefixLength: is required for capacityTiB above" in err
    assert "Traceback" not in err


def test_reference_storage_subnet_fits_128_tib(reference_plan: PlanResult) -> None:
    """The reference stack's 128 TiB filesystem gets the /24 Azure recommends for 96-196 TiB."""
    assert ipaddress.IPv4Network(_subnet(reference_plan, "storage").inputs["addressPrefix"]).prefixlen == 24


def _nsg_of(plan_resources: list[ResourceRecord], subnet: ResourceRecord) -> ResourceRecord:
    nsg_id = subnet.inputs["networkSecurityGroup"]["id"]
    return next(r for r in plan_resources if r.id == nsg_id)


def test_lustre_subnet_reaches_azure_services(reference_plan: PlanResult) -> None:
    """The Lustre subnet egresses through the NAT gateway, and its NSG allows Azure Monitor in and AzureCloud out."""
    subnet = _subnet(reference_plan, "storage")
    (nat,) = [r for r in reference_plan.resources if r.type == "azure-native:network:NatGateway"]
    assert subnet.inputs["defaultOutboundAccess"] is False
    assert subnet.inputs["natGateway"] == {"id": nat.id}
    rules = _nsg_of(reference_plan.resources, subnet).inputs["securityRules"]
    allowed = {(r["direction"], r["sourceAddressPrefix"], r["destinationAddressPrefix"]) for r in rules
               if r["access"] == "Allow"}  # fmt: skip
    # Azure Managed Lustre's network prerequisites and NSG guidance (learn.microsoft.com azure-managed-lustre).
    assert ("Inbound", "AzureMonitor", "VirtualNetwork") in allowed
    assert ("Outbound", "VirtualNetwork", "AzureCloud") in allowed
    monitor = next(r for r in rules if r["sourceAddressPrefix"] == "AzureMonitor")
    assert monitor["protocol"] == "Tcp"
    deny = next(r for r in rules if r["name"] == "deny-internet-inbound")
    inbound = [r for r in rules if r["access"] == "Allow" and r["direction"] == "Inbound"]
    assert all(r["priority"] < deny["priority"] for r in inbound)


def _with_blob(dev_raw: dict[str, Any]) -> dict[str, Any]:
    raw = copy.deepcopy(dev_raw)
    raw["storage"] = {"nodePayload": _payload_settings(), "blob": {}}
    return raw


def test_account_name_differs_per_subscription(dev_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Two subscriptions deploying one stack file get different account names; one subscription always the same."""
    from gb300.plan import mocks  # noqa: PLC0415

    def account_name(subscription: str) -> str:
        monkeypatch.setattr(mocks, "SUBSCRIPTION_ID", subscription)
        (account,) = [r for r in register("dev", _with_blob(dev_raw)) if _is_data_account(r)]
        name: str = account.inputs["accountName"]
        assert re.fullmatch(r"[a-z0-9]{3,24}", name), name
        return name

    first = account_name("aaaaaaaa-0000-0000-0000-000000000001")
    assert account_name("bbbbbbbb-0000-0000-0000-000000000002") != first
    assert account_name("aaaaaaaa-0000-0000-0000-000000000001") == first


def test_explicit_account_name_is_kept(dev_raw: dict[str, Any]) -> None:
    """gb300:storage.blob.accountName is used as written, whatever the subscription."""
    raw = _with_blob(dev_raw)
    raw["storage"]["blob"]["accountName"] = "myclusterckpt"
    (account,) = [r for r in register("dev", raw) if _is_data_account(r)]
    assert account.inputs["accountName"] == "myclusterckpt"


# --- the resource group that holds the data ------------------------------------------------------------------


def _group(resources: list[ResourceRecord]) -> ResourceRecord:
    (group,) = [r for r in resources if r.type == "azure-native:resources:ResourceGroup"]
    return group


def test_group_holding_stores_is_protected_and_retained(reference_plan: PlanResult) -> None:
    """The resource group of Lustre and the account is protected and retained, so Pulumi never deletes it."""
    group = _group(reference_plan.resources)
    assert (group.protect, group.retain_on_delete) == (True, True)


def test_lustre_lock_blocks_group_deletion(reference_plan: PlanResult) -> None:
    """A CanNotDelete lock on the filesystem makes Azure refuse to delete the group (no partial deletion)."""
    fs = _one(reference_plan, AMLFS)
    (lock,) = [r for r in reference_plan.resources if r.type == "azure-native:authorization:ManagementLockByScope"]
    assert lock.inputs["scope"] == fs.id
    assert lock.inputs["level"] == "CanNotDelete"
    # Unprotected in Pulumi's state: allowReplace must be able to remove it before the filesystem goes.
    assert (lock.protect, lock.retain_on_delete) == (False, False)


def test_allow_replace_of_every_store_frees_the_group(dev_raw: dict[str, Any]) -> None:
    """With both stores in allowReplace the group is neither protected nor retained, and the lock is gone."""
    raw = copy.deepcopy(dev_raw)
    raw["storage"] = {
        "nodePayload": _payload_settings(),
        "lustre": {"sku": "AMLFS-Durable-Premium-500", "capacityTiB": 4, "blobIntegration": TIE},
        "blob": {},
        "allowReplace": ["lustre", "account"],
    }
    resources = register("dev", raw)
    assert (_group(resources).protect, _group(resources).retain_on_delete) == (False, False)
    assert not [r for r in resources if r.type == "azure-native:authorization:ManagementLockByScope"]


def test_group_without_stores_is_not_protected(dev_raw: dict[str, Any]) -> None:
    """A stack without stateful storage keeps an ordinary resource group that pulumi destroy removes."""
    raw = copy.deepcopy(dev_raw)
    raw["storage"] = {"nodePayload": dev_raw["storage"]["nodePayload"]}
    group = _group(register("dev", raw))
    assert (group.protect, group.retain_on_delete) == (False, False)


def test_no_data_storage_when_not_configured(dev_raw: dict[str, Any]) -> None:
    """A stack without Lustre or gb300:storage.blob declares no Lustre and no data container: its data account
    holds nothing, unprotected, and private; the payload container is in the payload account."""
    raw = copy.deepcopy(dev_raw)
    raw["storage"] = {"nodePayload": dev_raw["storage"]["nodePayload"]}
    resources = register("dev", raw)
    assert AMLFS not in {r.type for r in resources}
    containers = [r for r in resources if r.type == "azure-native:storage:BlobContainer"]
    [payload] = [r for r in resources if _is_payload_account(r)]
    assert [(c.inputs["containerName"], c.inputs["accountName"]) for c in containers] == [
        ("gb300-node-payload", payload.inputs["accountName"])
    ]
    [account] = [r for r in resources if _is_data_account(r)]
    assert (account.protect, account.retain_on_delete) == (False, False)
    assert account.inputs["publicNetworkAccess"] == "Disabled"


def test_payload_account_faces_the_deploy_job_with_entra_id_only(reference_plan: PlanResult) -> None:
    """The payload account: Entra ID only (no shared key, OAuth by default), no anonymous access, TLS 1.2, public
    endpoint open (default action Allow: hosted runners have no fixed address), a blob private endpoint in the VNet
    joined to the data account's privatelink.blob zone, and the node and deployer roles on its container only."""
    [account] = [r for r in reference_plan.resources if _is_payload_account(r)]
    inputs = account.inputs
    assert inputs["allowSharedKeyAccess"] is False
    assert inputs["defaultToOAuthAuthentication"] is True
    assert inputs["allowBlobPublicAccess"] is False
    assert inputs["minimumTlsVersion"] == "TLS1_2"
    assert inputs["kind"] == "StorageV2"
    assert inputs["publicNetworkAccess"] == "Enabled"
    assert inputs["networkRuleSet"] == {"defaultAction": "Allow", "bypass": "None"}
    assert re.fullmatch(r"refpl[0-9a-f]{8}", inputs["accountName"])
    endpoints = [
        r
        for r in reference_plan.resources
        if r.type == "azure-native:network:PrivateEndpoint"
        and r.inputs["privateLinkServiceConnections"][0]["privateLinkServiceId"] == account.id
    ]
    assert [e.inputs["privateLinkServiceConnections"][0]["groupIds"] for e in endpoints] == [["blob"]]
    [group] = [
        r
        for r in reference_plan.resources
        if r.type == "azure-native:network:PrivateDnsZoneGroup"
        and r.inputs["privateEndpointName"] == endpoints[0].inputs["privateEndpointName"]
    ]
    blob_zone = storage_facts.private_link_zones()["blob"]
    zones = {
        r.id: r
        for r in reference_plan.resources
        if r.type == "azure-native:privatedns:PrivateZone" and r.inputs["privateZoneName"] == blob_zone
    }
    assert len(zones) == 1  # one privatelink.blob zone serves both accounts
    assert group.inputs["privateDnsZoneConfigs"][0]["privateDnsZoneId"] in zones


def test_upload_source_ranges_close_the_payload_account_to_other_addresses(dev_raw: dict[str, Any]) -> None:
    """gb300:storage.nodePayload.uploadSourceRanges limits the payload account's public endpoint to those
    addresses (default action Deny; a /32 becomes the single address Azure requires); the data account stays
    closed whatever they say."""
    raw = copy.deepcopy(dev_raw)
    raw["storage"] = {"blob": {}, "nodePayload": {**dev_raw["storage"]["nodePayload"]}}
    raw["storage"]["nodePayload"]["uploadSourceRanges"] = ["203.0.113.0/24", "198.51.100.7/32"]
    resources = register("dev", raw)
    [account] = [r for r in resources if _is_payload_account(r)]
    assert account.inputs["publicNetworkAccess"] == "Enabled"
    rules = account.inputs["networkRuleSet"]
    assert rules["defaultAction"] == "Deny"
    assert [r["iPAddressOrRange"] for r in rules["ipRules"]] == ["203.0.113.0/24", "198.51.100.7"]
    [data] = [r for r in resources if _is_data_account(r)]
    assert data.inputs["publicNetworkAccess"] == "Disabled"
    assert data.inputs["networkRuleSet"] == {"defaultAction": "Deny", "bypass": "None"}


# --- data-loss protection ------------------------------------------------------------------------------------


def _deployed(plan: PlanResult, **changes: Any) -> list[DeployedResource]:
    """The reference plan as if deployed, with some inputs of the Lustre filesystem as they were at creation."""
    out = []
    for r in plan.resources:
        inputs = dict(r.inputs)
        if r.type == AMLFS:
            inputs.update(changes)
        out.append(DeployedResource(r.urn, r.type, r.name, r.id, inputs))
    return out


def test_unchanged_storage_is_not_data_loss(reference_plan: PlanResult) -> None:
    """A plan identical to the deployed state reports no data loss."""
    assert list(data_loss(reference_plan.resources, _deployed(reference_plan), [])) == []


@pytest.mark.parametrize(
    ("deployed_inputs", "shown"),
    [
        ({"storageCapacityTiB": 64}, "storageCapacityTiB: 64 -> 128"),
        (
            {"sku": {"name": "AMLFS-Durable-Premium-250"}},
            "sku: 'AMLFS-Durable-Premium-250' -> 'AMLFS-Durable-Premium-500'",
        ),
        ({"zones": ["2"]}, "zones: ['2'] -> ['1']"),
    ],
)
def test_lustre_replacement_is_a_data_loss_error(
    reference_plan: PlanResult, deployed_inputs: dict[str, Any], shown: str
) -> None:
    """Changing what Azure cannot change on a deployed Lustre filesystem is an error naming the change."""
    (finding,) = data_loss(reference_plan.resources, _deployed(reference_plan, **deployed_inputs), [])
    assert finding.level == Level.ERROR
    assert finding.rule == "storage-data-loss"
    assert shown in finding.message
    assert "gb300:storage.allowReplace" in finding.message


def test_allowed_replacement_is_a_warning(reference_plan: PlanResult) -> None:
    """With gb300:storage.allowReplace: [lustre] the same change is a warning that still says what is lost."""
    (finding,) = data_loss(reference_plan.resources, _deployed(reference_plan, storageCapacityTiB=64), ["lustre"])
    assert finding.level == Level.WARNING
    assert "data would be lost" in finding.message


def test_removing_deployed_storage_is_a_data_loss_error(reference_plan: PlanResult) -> None:
    """A deployed storage account that the plan no longer declares would be deleted: an error."""
    deployed = _deployed(reference_plan)
    planned = [r for r in reference_plan.resources if not _is_data_account(r)]
    (finding,) = data_loss(planned, deployed, [])
    assert finding.level == Level.ERROR
    assert "would delete the storage account" in finding.message


def test_state_file_drives_the_plan_verdict(tmp_path: Path, reference_plan: PlanResult) -> None:
    """gb300 plan --state with a smaller deployed Lustre exits 1 with exactly one error: storage-data-loss."""
    state = write_stack_export(
        tmp_path / "state.json",
        reference_plan,
        inputs=lambda r: {**r.inputs, "storageCapacityTiB": 64} if r.type == AMLFS else r.inputs,
    )
    out = tmp_path / "plan.json"
    assert cli.main(["plan", "--stack", "reference", "--state", str(state), "--json", str(out), "--quiet"]) == 1
    findings = json.loads(out.read_text())["findings"]
    assert [f["rule"] for f in findings if f["level"] == "error"] == ["storage-data-loss"]


def test_state_file_must_be_a_stack_export(tmp_path: Path) -> None:
    """A state file that is not a 'pulumi stack export' document is a usage error (exit 2), not a traceback."""
    bad = tmp_path / "state.json"
    bad.write_text("[]")
    assert cli.main(["plan", "--stack", "dev", "--state", str(bad), "--quiet"]) == 2
    assert (
        parse_state(
            {"deployment": {"resources": [{"urn": "urn:pulumi:dev::gb300::t::u", "type": "t", "delete": True}]}}
        )
        == []
    )


def test_never_deployed_stack_has_nothing_to_lose() -> None:
    """The export of a stack never deployed (no deployment, or no resources) compares as empty, not as an error."""
    assert parse_state({"version": 3}) == []
    assert parse_state({"version": 3, "deployment": {"manifest": {}}}) == []


def _nid_addresses(nid: str) -> tuple[ipaddress.IPv4Address, ipaddress.IPv4Address]:
    """The first and last address a Lustre NID range (``10.0.[128-143].[0-255]@tcp``) names."""
    address, lnet = nid.split("@")
    assert lnet == "tcp"
    lows, highs = [], []
    for octet in address.split("."):
        low, _, high = octet.strip("[]").partition("-")
        lows.append(low)
        highs.append(high or low)
    return ipaddress.IPv4Address(".".join(lows)), ipaddress.IPv4Address(".".join(highs))


def test_root_on_any_client_outside_the_cluster_subnets_is_squashed(reference_plan: PlanResult) -> None:
    """Lustre squashes root (RootOnly, to nobody) on every client except the GPU and head subnets: the trusted
    NID ranges name exactly those two subnets' addresses, so a peered network or a jump box gets no root."""
    fs = _one(reference_plan, AMLFS)
    squash = fs.inputs["rootSquashSettings"]
    facts = storage_facts.lustre_root_squash()
    assert (squash["mode"], squash["squashUID"], squash["squashGID"]) == (
        "RootOnly",
        facts["squashUid"],
        facts["squashGid"],
    )
    assert squash["squashUID"] != 0
    trusted = {_nid_addresses(nid) for nid in squash["noSquashNidLists"].split(";")}
    subnets = {_subnet(reference_plan, name).inputs["addressPrefix"] for name in ("gpu", "head")}
    assert trusted == {
        (ipaddress.IPv4Network(cidr).network_address, ipaddress.IPv4Network(cidr).broadcast_address) for cidr in subnets
    }


@pytest.mark.parametrize(
    ("cidr", "nid"),
    [
        ("10.0.0.0/17", "10.0.[0-127].[0-255]@tcp"),
        ("10.0.128.0/24", "10.0.128.[0-255]@tcp"),
        ("10.0.129.64/26", "10.0.129.[64-127]@tcp"),
        ("192.168.7.9/32", "192.168.7.9@tcp"),
        ("10.0.0.0/8", "10.[0-255].[0-255].[0-255]@tcp"),
    ],
)
def test_a_subnet_becomes_one_nid_range_of_exactly_its_addresses(cidr: str, nid: str) -> None:
    """Each octet of a CIDR block is one range; a /26 inside an octet keeps only its 64 addresses."""
    assert lustre_nid_range(cidr, "tcp") == nid
    net = ipaddress.IPv4Network(cidr)
    assert _nid_addresses(nid) == (net.network_address, net.broadcast_address)
