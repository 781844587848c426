"""Storage rules (Lustre capacity and zone, storage account exposure), as tables of resources -> findings.

The resources have the shapes pulumi-azure-native gives ``storagecache.AmlFilesystem`` and
``storage.StorageAccount``, so the rules fire on the storage component's resources once it declares them.
"""

from __future__ import annotations

from typing import Any

import pytest

from gb300 import tags as gb300_tags
from gb300.facts import sizing
from gb300.plan import PlanResult
from gb300.resources import ResourceRecord
from tests.support.policy_support import (
    SECURE_ACCOUNT,
    TAGS,
    account,
    assert_findings,
    levels,
    lustre,
    record,
    run,
    scale_set,
    subnet,
    with_inputs,
)

# Azure reads a bare 0.0.0.0 source as "any"; S104 flags it as a bind address, which it is not here.
BARE_ZERO = "0.0.0.0"  # noqa: S104


def test_lustre_table_matches_domain_facts() -> None:
    """The Lustre SKU table holds Azure's documented minimum/increment per tier and marks the conflicting maxima."""
    table = sizing.lustre_skus()
    assert {n: (s.min_tib, s.increment_tib) for n, s in table.items()} == {
        "AMLFS-Durable-Premium-40": (48, 48),
        "AMLFS-Durable-Premium-125": (16, 16),
        "AMLFS-Durable-Premium-250": (8, 8),
        "AMLFS-Durable-Premium-500": (4, 4),
    }
    assert table["AMLFS-Durable-Premium-40"].max_tib.status == "conflict"
    assert table["AMLFS-Durable-Premium-40"].max_alternative == 1536


@pytest.mark.parametrize(
    ("resources", "expected", "words"),
    [
        pytest.param([lustre("AMLFS-Durable-Premium-500", 128)], [], [], id="compliant"),
        pytest.param([lustre("AMLFS-Durable-Premium-40", 96)], [], [], id="compliant-40"),
        pytest.param([lustre("AMLFS-Durable-Premium-40", 40)], ["error"], ["at least 48"], id="below-minimum"),
        pytest.param(
            [lustre("AMLFS-Durable-Premium-125", 24)], ["error"], ["multiple of 16", "16 or 32"], id="increment"
        ),
        pytest.param(
            [lustre("AMLFS-Durable-Premium-500", 512)], ["info"], ["above the documented maximum"], id="over-max"
        ),
        pytest.param([lustre("AMLFS-Standard-9", 48)], ["error"], ["must be one of"], id="unknown-sku"),
        pytest.param([lustre(None, 48, skuName="AMLFS-Durable-Premium-250")], [], [], id="skuName-input"),
        pytest.param([lustre(None, None)], [], [], id="property-absent"),
        pytest.param([lustre(capacity="lots")], [], [], id="odd-capacity"),
        pytest.param(
            [lustre("AMLFS-Durable-Premium-250", 4), lustre("AMLFS-Durable-Premium-40", 50)],
            ["error", "error"],
            [],
            id="several",
        ),
    ],
)
def test_lustre_capacity_valid(resources: list[ResourceRecord], expected: list[str], words: list[str]) -> None:
    """Lustre below its SKU's minimum or off its increment is an error saying the valid sizes."""
    found = run("lustre-capacity-valid", resources)
    assert_findings(found, expected, words)


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        pytest.param([lustre(zones=["1"]), scale_set(zone="1")], [], id="compliant"),
        pytest.param([lustre(zones=["1"]), scale_set(zone="2")], ["error"], id="different-zone"),
        pytest.param([lustre(zones=["1"]), scale_set(zone=None)], ["warning"], id="pool-without-zone"),
        pytest.param([lustre(zones=None), scale_set(zone="2")], [], id="property-absent"),
        pytest.param([lustre(zones=[1]), scale_set(zone="1")], [], id="zone-as-number"),
        pytest.param(
            [lustre(zones=["1"]), scale_set(zone="2"), scale_set("p2", pool="infer", zone="3")],
            ["error", "error"],
            id="several",
        ),
    ],
)
def test_zone_consistent(resources: list[ResourceRecord], expected: list[str]) -> None:
    """Lustre and a GPU pool in different zones is an error; a pool with no zone is a warning."""
    found = run("zone-consistent", resources)
    assert levels(found) == expected
    assert all("gb300:cluster.zone" in f.message for f in found)


def test_zone_consistent_reads_typed_scale_set_zones() -> None:
    """A typed scale set's own ``zones`` input counts as its zone."""
    typed = record(
        "azure-native:compute:VirtualMachineScaleSet",
        "typed",
        {"location": "eastus2", "zones": ["2"], "sku": {"name": "Standard_ND96isr_H100_v5", "capacity": 2}, "tags": {}},
    )
    assert levels(run("zone-consistent", [lustre(zones=["1"]), typed])) == ["error"]


def _tie(account_name: str) -> dict[str, Any]:
    """A Lustre filesystem's hsm settings naming a container of ``account_name``."""
    base = f"/subscriptions/0/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/{account_name}"
    return {"settings": {"container": f"{base}/blobServices/default/containers/ckpt", "importPrefix": "/"}}


def _acct(**changes: Any) -> list[ResourceRecord]:
    return [account(**{**SECURE_ACCOUNT, **changes})]


@pytest.mark.parametrize(
    ("resources", "expected", "words"),
    [
        pytest.param(_acct(), [], [], id="compliant"),
        pytest.param(
            _acct(publicNetworkAccess="Enabled", networkRuleSet={"defaultAction": "Deny"}), [], [], id="vnet-rules"
        ),
        pytest.param(_acct(allowBlobPublicAccess=True), ["error"], ["allowBlobPublicAccess"], id="public-blobs"),
        pytest.param(_acct(allowSharedKeyAccess=True), ["error"], ["allowSharedKeyAccess"], id="shared-keys"),
        pytest.param(
            [*_acct(allowSharedKeyAccess=True), lustre(hsm=_tie("tdata"))],
            ["info"],
            [
                "Lustre filesystem is tied to it",
                "gb300:storage.lustre.blobIntegration.enabled: true); to keep keys off, remove that key",
                "`gb300 plan --state FILE`",
            ],
            id="shared-keys-for-tied-lustre",
        ),
        pytest.param(
            [*_acct(allowSharedKeyAccess=True), lustre(hsm=_tie("otheraccount"))],
            ["error"],
            ["allowSharedKeyAccess must be false"],
            id="lustre-tied-to-another-account",
        ),
        pytest.param(_acct(minimumTlsVersion="TLS1_0"), ["error"], ["TLS1_2"], id="old-tls"),
        pytest.param(_acct(minimumTlsVersion="TLS1_3"), [], [], id="newer-tls"),
        pytest.param(_acct(publicNetworkAccess="Enabled"), ["error"], ["holds data"], id="internet-reachable"),
        pytest.param(
            [account()],
            ["error", "error", "error", "error"],
            ["unset"],
            id="property-absent",
        ),
        pytest.param(
            _acct(allowBlobPublicAccess=True, allowSharedKeyAccess=True, minimumTlsVersion="TLS1_1"),
            ["error", "error", "error"],
            [],
            id="several",
        ),
    ],
)
def test_storage_no_public_access(resources: list[ResourceRecord], expected: list[str], words: list[str]) -> None:
    """Public blobs, shared keys, TLS below 1.2 or an Internet-reachable endpoint on a data account are errors."""
    found = run("storage-no-public-access", resources)
    assert_findings(found, expected, words)


def _open(*, tags: dict[str, str] | None = None, **rule_set: Any) -> dict[str, Any]:
    """An account input set whose public endpoint is on, with ``rule_set`` as its networkRuleSet."""
    changes: dict[str, Any] = {
        "publicNetworkAccess": "Enabled",
        "networkRuleSet": {"defaultAction": "Deny", **rule_set},
    }
    if tags is not None:
        changes["tags"] = {**TAGS, **tags}
    return changes


def _ip_rules(*ranges: str) -> list[dict[str, str]]:
    return [{"iPAddressOrRange": r, "action": "Allow"} for r in ranges]


DATA = {gb300_tags.STORAGE_PURPOSE: gb300_tags.STORAGE_PURPOSE_DATA}
PAYLOAD = {gb300_tags.STORAGE_PURPOSE: gb300_tags.STORAGE_PURPOSE_NODE_PAYLOAD}
TRUSTED = [{"tenantId": "t", "resourceId": "/subscriptions/*/providers/Microsoft.Synapse/workspaces/*"}]


@pytest.mark.parametrize(
    ("changes", "expected", "words"),
    [
        pytest.param(_open(ipRules=_ip_rules("0.0.0.0/1", "128.0.0.0/1")), ["error"], ["every IPv4"], id="halves"),
        pytest.param(_open(tags=DATA, ipRules=_ip_rules("203.0.113.7")), ["error"], ["1 public"], id="one-address"),
        pytest.param(_open(ipRules=_ip_rules(BARE_ZERO)), ["error"], ["every IPv4"], id="bare-zero"),
        pytest.param(_open(tags=DATA, defaultAction="Allow"), ["error"], ["every address"], id="default-allow"),
        pytest.param(_open(bypass="AzureServices"), ["error"], ["bypass AzureServices"], id="bypass"),
        pytest.param(_open(bypass="Logging, Metrics"), ["error"], ["bypass Logging"], id="bypass-logs"),
        pytest.param(_open(bypass="None"), [], [], id="bypass-none"),
        pytest.param(_open(resourceAccessRules=TRUSTED), ["error"], ["resourceAccessRules"], id="instances"),
        pytest.param(_open(tags=DATA, virtualNetworkRules=[{"id": "subnet"}]), [], [], id="vnet-rule-only"),
        pytest.param(
            {**_open(ipRules=_ip_rules("0.0.0.0/1")), "publicNetworkAccess": "Disabled"}, [], [], id="disabled-wins"
        ),
        pytest.param(_open(tags=PAYLOAD, ipRules=_ip_rules("0.0.0.0/1")), ["info"], ["signed node payloads"], id="pay"),
        pytest.param(
            {**_open(tags=PAYLOAD, defaultAction="Allow"), "allowSharedKeyAccess": True},
            ["error", "error"],
            ["allowSharedKeyAccess"],
            id="payload-with-keys",
        ),
        pytest.param(
            {**_open(tags=PAYLOAD, defaultAction="Allow"), "allowBlobPublicAccess": True},
            ["error", "error"],
            ["allowBlobPublicAccess"],
            id="payload-anonymous",
        ),
        pytest.param(
            _open(tags={gb300_tags.STORAGE_PURPOSE: "scratch"}, ipRules=_ip_rules("203.0.113.0/24")),
            ["error"],
            ["holds data"],
            id="unknown-purpose-is-data",
        ),
    ],
)
def test_public_reach_of_a_storage_account(changes: dict[str, Any], expected: list[str], words: list[str]) -> None:
    """IP rules (united like the SSH rule's sources), default action, bypass and instance rules all open an account:
    an error on a data account, an info on a node payload account with shared keys and anonymous access off."""
    found = run("storage-no-public-access", _acct(**changes))
    assert_findings(found, expected, words)


SQUASHED = {
    "mode": "RootOnly",
    "noSquashNidLists": "10.0.[0-127].[0-255]@tcp;10.0.128.[0-63]@tcp",
    "squashUID": 65534,
    "squashGID": 65534,
}
CLUSTER_SUBNETS = [subnet("gpu", "10.0.0.0/17"), subnet("head", "10.0.128.0/26"), subnet("storage", "10.0.129.0/24")]


@pytest.mark.parametrize(
    ("squash", "expected", "words"),
    [
        pytest.param(SQUASHED, [], [], id="cluster-subnets-only"),
        pytest.param({**SQUASHED, "mode": "All"}, [], [], id="all-users"),
        pytest.param(None, ["error"], ["got nothing", "every user's files"], id="absent"),
        pytest.param({**SQUASHED, "mode": "None"}, ["error"], ["got None"], id="mode-none"),
        pytest.param({**SQUASHED, "squashUID": 0}, ["error"], ["other than 0"], id="squash-to-root"),
        pytest.param(
            {**SQUASHED, "noSquashNidLists": "10.0.[0-127].[0-255]@tcp;10.0.129.[0-255]@tcp"},
            ["error"],
            ["'10.0.129.[0-255]@tcp'"],
            id="storage-subnet-trusted",
        ),
        pytest.param(
            {**SQUASHED, "noSquashNidLists": "[0-255].[0-255].[0-255].[0-255]@tcp"},
            ["error"],
            ["must lie in the GPU or head subnets"],
            id="everyone-trusted",
        ),
        pytest.param(
            {**SQUASHED, "noSquashNidLists": "10.0.[0-128].[0-255]@tcp"}, ["error"], [], id="one-past-the-gpu-subnet"
        ),
        pytest.param({**SQUASHED, "noSquashNidLists": "10.0.*.*@tcp"}, ["error"], [], id="unreadable-nid"),
        pytest.param({**SQUASHED, "noSquashNidLists": ""}, [], [], id="nobody-trusted"),
    ],
)
def test_lustre_root_squash(squash: dict[str, Any] | None, expected: list[str], words: list[str]) -> None:
    """Root is squashed (RootOnly or All, to a uid other than 0) and only the GPU and head subnets are trusted."""
    extra = {} if squash is None else {"rootSquashSettings": squash}
    assert_findings(run("lustre-root-squash", [*CLUSTER_SUBNETS, lustre(**extra)]), expected, words)


def test_the_reference_plan_squashes_root_outside_the_cluster(reference_plan: PlanResult) -> None:
    """The reference plan's filesystem passes lustre-root-squash, and removing its settings makes it an error."""
    resources = list(reference_plan.resources)
    assert run("lustre-root-squash", resources) == []
    stripped = [
        with_inputs(r, rootSquashSettings=None) if r.type == "azure-native:storagecache:AmlFilesystem" else r
        for r in resources
    ]
    assert levels(run("lustre-root-squash", stripped)) == ["error"]
