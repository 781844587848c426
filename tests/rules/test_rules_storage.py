"""Storage rules (Lustre capacity and zone, storage account exposure), as tables of resources -> findings.

The resources have the shapes pulumi-azure-native gives ``storagecache.AmlFilesystem`` and
``storage.StorageAccount``, so the rules fire on the storage component's resources once it declares them.
"""

from __future__ import annotations

from typing import Any

import pytest

from gb300.facts import sizing
from gb300.plan.runner import ResourceRecord
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
)


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
        pytest.param(_acct(minimumTlsVersion="TLS1_0"), ["error"], ["TLS1_2"], id="old-tls"),
        pytest.param(_acct(minimumTlsVersion="TLS1_3"), [], [], id="newer-tls"),
        pytest.param(
            _acct(publicNetworkAccess="Enabled"), ["warning"], ["publicNetworkAccess"], id="internet-reachable"
        ),
        pytest.param(
            _acct(publicNetworkAccess="Enabled", tags={**TAGS, "gb300-storage-purpose": "node-payload"}),
            [],
            [],
            id="payload-account-faces-the-deploy-job",
        ),
        pytest.param(
            _acct(
                publicNetworkAccess="Enabled",
                allowSharedKeyAccess=True,
                tags={**TAGS, "gb300-storage-purpose": "node-payload"},
            ),
            ["error"],
            ["allowSharedKeyAccess"],
            id="payload-account-with-shared-keys",
        ),
        pytest.param(
            _acct(publicNetworkAccess="Enabled", tags={**TAGS, "gb300-storage-purpose": "data"}),
            ["warning"],
            ["publicNetworkAccess"],
            id="data-account-reachable",
        ),
        pytest.param(
            [account()],
            ["error", "error", "error", "warning"],
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
    """Public blobs, shared keys or TLS below 1.2 are errors; an Internet-reachable endpoint is a warning."""
    found = run("storage-no-public-access", resources)
    assert_findings(found, expected, words)
