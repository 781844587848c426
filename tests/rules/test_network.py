"""Network rules, as tables of resources -> expected findings."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300.facts import egress
from gb300.findings import Level
from gb300.plan import run_plan
from gb300.resources import ResourceRecord
from tests.support.policy_support import (
    assert_findings,
    levels,
    lustre,
    record,
    run,
    scale_set,
    subnet,
    subnet_id,
    vnet,
    with_inputs,
)


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
        pytest.param([subnet("gpu", "172.16.0.0/20", "hub-vnet")], ["error"], id="existing-vnet-subnet-inside"),
        pytest.param([subnet("gpu", "10.60.32.0/19", "hub-vnet")], [], id="existing-vnet-subnet-outside"),
        pytest.param([vnet(["10.40.0.0/16"]), subnet("gpu", "172.16.0.0/20")], [], id="declared-vnet-judged-by-space"),
    ],
)
def test_vnet_avoids_rdma_range(resources: list[ResourceRecord], expected: list[str]) -> None:
    """A VNet overlapping 172.16.0.0/16, or a subnet overlapping it in a VNet the stack does not declare, is an error
    naming the range and a fix; others pass."""
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
RT = {"id": "/subscriptions/x/resourceGroups/t-rg/providers/Microsoft.Network/routeTables/t-egress-rt"}


def _route_table(*routes: dict[str, str]) -> ResourceRecord:
    """The route table ``t-egress-rt`` with ``routes``."""
    return record(
        "azure-native:network:RouteTable",
        "t-egress-rt",
        {"routeTableName": "t-egress-rt", "location": "eastus2", "routes": list(routes)},
    )


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        pytest.param(
            [_storage_subnet(defaultOutboundAccess=False, natGateway=NAT), _fs(subnet_id("storage"))], [], id="nat"
        ),
        pytest.param(
            [vnet(), _storage_subnet(defaultOutboundAccess=False), _fs(subnet_id("storage"))],
            ["error"],
            id="no-way-out",
        ),
        pytest.param(
            [_storage_subnet(defaultOutboundAccess=False), _fs(subnet_id("storage"))], [], id="existing-vnet-hub-routes"
        ),
        pytest.param(
            [
                _route_table({"addressPrefix": "0.0.0.0/0", "nextHopType": "VirtualAppliance"}),
                _storage_subnet(defaultOutboundAccess=False, routeTable=RT),
                _fs(subnet_id("storage")),
            ],
            [],
            id="firewall-route",
        ),
        pytest.param(
            [
                vnet(),
                _route_table({"addressPrefix": "10.0.0.0/8", "nextHopType": "VirtualAppliance"}),
                _storage_subnet(defaultOutboundAccess=False, routeTable=RT),
                _fs(subnet_id("storage")),
            ],
            ["error"],
            id="route-table-without-default-route",
        ),
        pytest.param(
            [vnet(), _storage_subnet(defaultOutboundAccess=False, routeTable=RT), _fs(subnet_id("storage"))],
            [],
            id="route-table-not-declared",
        ),
        pytest.param(
            [_storage_subnet(defaultOutboundAccess=True), _fs(subnet_id("storage"))], [], id="default-outbound"
        ),
        pytest.param([_storage_subnet(defaultOutboundAccess=False), _fs(subnet_id("other", "hub"))], [], id="foreign"),
        pytest.param([_storage_subnet(defaultOutboundAccess=False), _fs(None)], [], id="property-absent"),
    ],
)
def test_lustre_subnet_egress(resources: list[ResourceRecord], expected: list[str]) -> None:
    """A Lustre filesystem in a subnet of a declared VNet with no NAT, no default route and no default outbound access
    is an error; a firewall's default route, or a landing zone's VNet whose routes the plan cannot see, is not."""
    found = run("lustre-subnet-egress", resources)
    assert levels(found) == expected
    for f in found:
        assert "gb300:network.natGateway" in f.message or "gb300:network.egress.via: firewall" in f.message


def test_stack_without_nat_cannot_host_lustre(dev_raw: dict[str, Any]) -> None:
    """gb300 plan refuses a stack with Lustre and gb300:network.natGateway: false, and names the key to set."""
    raw = copy.deepcopy(dev_raw)
    raw["network"] = {**raw.get("network", {}), "natGateway": False}
    raw["storage"] = {
        "lustre": {"sku": "AMLFS-Durable-Premium-500", "capacityTiB": 4},
        "nodePayload": dev_raw["storage"]["nodePayload"],
    }
    found = [f for f in run_plan("dev", raw).findings if f.rule == "lustre-subnet-egress"]
    assert [f.level for f in found] == [Level.ERROR]


def _nat(ips: int = 1, prefixes: tuple[str, ...] = ()) -> ResourceRecord:
    """The NAT gateway ``t-nat`` with ``ips`` public IPs and the named public IP prefixes."""
    net = "/subscriptions/x/resourceGroups/t-rg/providers/Microsoft.Network"
    return record(
        "azure-native:network:NatGateway",
        "t-nat",
        {
            "natGatewayName": "t-nat",
            "publicIpAddresses": [{"id": f"{net}/publicIPAddresses/t-nat-ip-{i}"} for i in range(ips)],
            "publicIpPrefixes": [{"id": f"{net}/publicIPPrefixes/{p}"} for p in prefixes],
        },
    )


def _prefix(name: str, length: int) -> ResourceRecord:
    return record("azure-native:network:PublicIPPrefix", name, {"publicIpPrefixName": name, "prefixLength": length})


def _gpu_behind_nat() -> ResourceRecord:
    return with_inputs(subnet("gpu", "10.40.0.0/17"), natGateway=NAT)


def _racks(n: int) -> list[ResourceRecord]:
    return [scale_set(f"t-train-r{i:04d}", capacity=18) for i in range(n)]


@pytest.mark.parametrize(
    ("resources", "expected", "words"),
    [
        pytest.param([_gpu_behind_nat(), _nat(1), *_racks(10)], [], [], id="180-nodes-one-ip"),
        pytest.param([_gpu_behind_nat(), _nat(1), *_racks(11)], ["warning"], ["needs 2 public IPs"], id="198-on-one"),
        pytest.param([_gpu_behind_nat(), _nat(6), *_racks(64)], [], [], id="reference-64-racks-six-ips"),
        pytest.param(
            [_gpu_behind_nat(), _nat(0, ("t-prefix",)), _prefix("t-prefix", 28), *_racks(173)], [], [], id="28-prefix"
        ),
        pytest.param(
            [_gpu_behind_nat(), _nat(16), *_racks(174)],
            ["warning"],
            ["at most 16 public IPs", "3,125 nodes", "private endpoint", "one NAT gateway each"],
            id="beyond-one-gateway",
        ),
        pytest.param([subnet("gpu", "10.40.0.0/17"), _nat(1), *_racks(100)], [], [], id="subnet-without-nat"),
        pytest.param([_gpu_behind_nat(), _nat(0, ("unknown",)), *_racks(100)], [], [], id="addresses-unknown"),
    ],
)
def test_nat_egress_capacity(resources: list[ResourceRecord], expected: list[str], words: list[str]) -> None:
    """A NAT gateway with fewer addresses than its nodes' connections to one destination need gets a warning."""
    assert_findings(run("nat-egress-capacity", resources), expected, words)


def test_reference_stack_gets_the_nat_ips_its_nodes_need(reference_plan: Any) -> None:
    """The reference stack's 1,153 nodes (64 racks and the head) get 6 NAT public IPs, and the rule is silent."""
    [nat] = [r for r in reference_plan.resources if r.type == "azure-native:network:NatGateway"]
    ips = [
        r for r in reference_plan.resources if r.type == "azure-native:network:PublicIPAddress" and "-nat-ip" in r.name
    ]
    assert len(nat.inputs["publicIpAddresses"]) == len(ips) == 6
    assert sorted(r.name for r in ips)[0] == "ref-nat-ip"  # the one address older stacks had keeps its name
    assert all(r.inputs["zones"] == nat.inputs["zones"] for r in ips)
    assert egress.nat_sizing().nodes_for(6) >= 64 * 18 + 1
    assert [f for f in reference_plan.findings if f.rule == "nat-egress-capacity"] == []


@pytest.mark.slow
def test_1388_racks_exceed_one_nat_gateway(reference_raw: dict[str, Any]) -> None:
    """At 1,388 racks (24,985 nodes) the plan gives the gateway 16 IPs and warns with the limit and the fix."""
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["racks"] = 1388
    plan = run_plan("large", raw)
    [nat] = [r for r in plan.resources if r.type == "azure-native:network:NatGateway"]
    assert len(nat.inputs["publicIpAddresses"]) == 16
    [found] = [f for f in plan.findings if f.rule == "nat-egress-capacity"]
    assert found.level == Level.WARNING
    for words in ("24,985 nodes", "at most 16 public IPs", "3,125 nodes at most", "128 IPs", "private endpoint"):
        assert words in found.message


def test_a_full_gpu_subnet_names_the_key_that_sizes_it(dev_raw: dict[str, Any]) -> None:
    """180 VMs in a /25 GPU subnet: the error names gb300:network.gpuSubnetPrefixLength, the key changed."""
    from gb300.plan import run_plan  # noqa: PLC0415

    raw = copy.deepcopy(dev_raw)
    raw["network"] = {**raw.get("network", {}), "gpuSubnetPrefixLength": 25}
    raw["gpuPools"][0]["racks"] = 10
    found = [f for f in run_plan("gpu25", raw).findings if f.rule == "subnet-fits-pool"]
    assert found
    assert all("set gb300:network.gpuSubnetPrefixLength to 24 or less" in f.message for f in found)
