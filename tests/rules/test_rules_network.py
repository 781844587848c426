"""Network rules, as tables of resources -> expected findings."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300.findings import Level
from gb300.plan import run_plan
from gb300.plan.runner import ResourceRecord
from tests.support.policy_support import assert_findings, levels, lustre, run, scale_set, subnet, subnet_id, vnet


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        pytest.param([vnet(["10.40.0.0/16"])], [], id="compliant"),
        pytest.param([vnet(["172.16.0.0/16"])], ["error"], id="inside-rdma-range"),
        pytest.param([vnet(["172.16.0.0/12"])], ["error"], id="containing-rdma-range"),
        pytest.param([vnet(["172.17.0.0/16"])], [], id="neighbour-range"),
        pytest.param([vnet([])], [], id="property-absent"),
        pytest.param([vnet(["not-a-cidr", 42])], [], id="odd-values"),  # type: ignore[list-item]
        pytest.param([vnet(["172.16.1.0/24", "172.16.2.0/24"])], ["error", "error"], id="several"),
    ],
)
def test_vnet_avoids_rdma_range(resources: list[ResourceRecord], expected: list[str]) -> None:
    """A VNet overlapping 172.16.0.0/16 is an error naming the range and a fix; others pass."""
    found = run("vnet-avoids-rdma-range", resources)
    assert levels(found) == expected
    for f in found:
        assert "172.16.0.0/16" in f.message
        assert "gb300:network.addressSpace" in f.message


def _net(gpu: str = "10.40.0.0/21", head: str = "10.40.8.0/27", space: str = "10.40.0.0/16") -> list[ResourceRecord]:
    return [vnet([space]), subnet("gpu", gpu), subnet("head", head)]


@pytest.mark.parametrize(
    ("resources", "expected", "words"),
    [
        pytest.param([*_net(), scale_set(capacity=1152)], [], [], id="compliant-64-racks-in-a-21"),
        pytest.param(
            [*_net(gpu="10.40.0.0/22"), scale_set(capacity=1152)], ["error"], ["1,152 VMs", "/21"], id="too-small"
        ),
        pytest.param(
            [*_net(gpu="10.40.0.0/27"), scale_set(capacity=18), scale_set("t-train-r0002", capacity=18)],
            ["error"],
            ["36 VMs", "27 usable"],
            id="two-racks-in-a-27",
        ),
        pytest.param([*_net(gpu="10.40.0.0/27"), scale_set(capacity=27)], [], [], id="exactly-full"),
        pytest.param(_net(head="10.41.0.0/27"), ["error"], ["inside", "10.41.0.0/27"], id="outside-address-space"),
        pytest.param(_net(head="10.40.0.0/27"), ["error"], ["overlap", "gpu (10.40.0.0/21)"], id="overlapping"),
        pytest.param([subnet("gpu", "10.40.0.0/29"), scale_set(subnet="unknown")], [], [], id="property-absent"),
        pytest.param(
            [*_net(gpu="10.40.0.0/28", head="10.40.0.0/27", space="10.40.0.0/27"), scale_set(capacity=18)],
            ["error", "error"],
            ["overlap", "18 VMs"],
            id="several",
        ),
    ],
)
def test_subnet_fits_pool(resources: list[ResourceRecord], expected: list[str], words: list[str]) -> None:
    """Subnets too small for their scale sets, outside the VNet or overlapping each other are errors."""
    found = run("subnet-fits-pool", resources)
    assert_findings(found, expected, words)
    assert all("gb300:network.addressSpace" in f.message for f in found)


def test_subnet_fits_pool_counts_only_scale_sets_on_that_subnet() -> None:
    """VMs on another subnet do not count against the GPU subnet."""
    resources = [
        *_net(gpu="10.40.0.0/27"),
        scale_set(capacity=18),
        scale_set("other", capacity=900, subnet=subnet_id("head")),
    ]
    found = run("subnet-fits-pool", resources)
    assert [f.resource for f in found] == [resources[2].urn]


def _storage_subnet(**inputs: Any) -> ResourceRecord:
    sub = subnet("storage", "10.40.8.0/24")
    return ResourceRecord(sub.urn, sub.type, sub.name, None, False, sub.id, {**sub.inputs, **inputs})


def _fs(subnet_ref: str | None) -> ResourceRecord:
    return lustre(filesystemSubnet=subnet_ref) if subnet_ref is not None else lustre()


NAT = {"id": "/subscriptions/x/resourceGroups/t-rg/providers/Microsoft.Network/natGateways/t-nat"}


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        pytest.param(
            [_storage_subnet(defaultOutboundAccess=False, natGateway=NAT), _fs(subnet_id("storage"))], [], id="nat"
        ),
        pytest.param(
            [_storage_subnet(defaultOutboundAccess=False), _fs(subnet_id("storage"))], ["error"], id="no-way-out"
        ),
        pytest.param(
            [_storage_subnet(defaultOutboundAccess=True), _fs(subnet_id("storage"))], [], id="default-outbound"
        ),
        pytest.param([_storage_subnet(defaultOutboundAccess=False), _fs(subnet_id("other", "hub"))], [], id="foreign"),
        pytest.param([_storage_subnet(defaultOutboundAccess=False), _fs(None)], [], id="property-absent"),
    ],
)
def test_lustre_subnet_egress(resources: list[ResourceRecord], expected: list[str]) -> None:
    """A Lustre filesystem in a declared subnet with neither NAT nor default outbound access is an error."""
    found = run("lustre-subnet-egress", resources)
    assert levels(found) == expected
    for f in found:
        assert "gb300:network.natGateway" in f.message


def test_stack_without_nat_cannot_host_lustre(dev_raw: dict[str, Any]) -> None:
    """gb300 plan refuses a stack with Lustre and gb300:network.natGateway: false, and names the key to set."""
    raw = copy.deepcopy(dev_raw)
    raw["network"] = {**raw.get("network", {}), "natGateway": False}
    raw["storage"] = {"lustre": {"sku": "AMLFS-Durable-Premium-500", "capacityTiB": 4}}
    found = [f for f in run_plan("dev", raw).findings if f.rule == "lustre-subnet-egress"]
    assert [f.level for f in found] == [Level.ERROR]
