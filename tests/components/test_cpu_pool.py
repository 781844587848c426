"""A CPU pool in the plan (examples/custom-slurm): its own scale set in the GPU nodes' subnet without InfiniBand,
booting the cpu-node payload, counted by the quota and subnet rules and priced in the cost table."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from gb300 import config
from gb300.azure import inventory, quota
from gb300.components.compute_package import SCALE_SET_TOKEN
from gb300.facts import catalog
from gb300.paths import REPO_ROOT
from gb300.plan import PlanResult, run_plan
from gb300.rules import quota as quota_rule
from gb300.rules.base import RuleContext

EXAMPLE = REPO_ROOT / "examples" / "custom-slurm" / "Pulumi.custom.yaml"


@pytest.fixture(scope="module")
def example_raw() -> dict[str, Any]:
    return config.load_stack_file(EXAMPLE)


@pytest.fixture(scope="module")
def example_plan(example_raw: dict[str, Any]) -> PlanResult:
    """The example stack (one GPU rack, CPU pool `prep`) planned once for this module."""
    return run_plan("custom", copy.deepcopy(example_raw))


def _scale_sets(plan: PlanResult) -> dict[str, Mapping[str, Any]]:
    return {r.name: r.inputs for r in plan.resources if r.type == SCALE_SET_TOKEN}


def _subnet(inputs: Mapping[str, Any]) -> str:
    [nic] = inputs["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"]
    [ip] = nic["ipConfigurations"]
    return str(ip["subnet"]["id"])


def test_the_cpu_pool_is_its_own_scale_set_of_its_size_and_count(
    example_plan: PlanResult, example_raw: dict[str, Any]
) -> None:
    """The pool's scale set `<cluster>-<pool>` holds `count` VMs of its size, tagged with its pool, in its zone."""
    [pool] = example_raw["cpuPools"]
    inputs = _scale_sets(example_plan)[f"custom-{pool['name']}"]
    assert (inputs["sku"]["name"], inputs["sku"]["capacity"]) == (pool["vmSize"], pool["count"])
    assert inputs["tags"]["gb300-pool"] == pool["name"]
    assert inputs["tags"]["gb300-role"] == "cpu-node"
    assert inputs["zones"] == [example_raw["cluster"]["zone"]]
    assert inputs["virtualMachineProfile"]["osProfile"]["computerNamePrefix"] == f"custom-{pool['name']}-"


def test_the_cpu_pool_sits_in_the_gpu_subnet_without_infiniband(example_plan: PlanResult) -> None:
    """The CPU pool's VMs join the GPU racks' subnet, with no interconnect group and no single placement group."""
    sets = _scale_sets(example_plan)
    cpu, rack = sets["custom-prep"], sets["custom-train-r0001"]
    assert _subnet(cpu) == _subnet(rack)
    assert "interconnectGroupProfile" not in cpu["virtualMachineProfile"]["networkProfile"]
    assert "interconnectGroupProfile" in rack["virtualMachineProfile"]["networkProfile"]
    assert cpu["singlePlacementGroup"] is False


def test_the_cpu_pool_boots_its_own_payload(example_plan: PlanResult) -> None:
    """The CPU pool's custom data is not the GPU rack's: its tag carries another hash (the cpu-node payload)."""
    sets = _scale_sets(example_plan)
    assert (
        sets["custom-prep"]["tags"]["gb300-custom-data-sha256"]
        != sets["custom-train-r0001"]["tags"]["gb300-custom-data-sha256"]
    )


def test_the_plan_passes_with_the_cpu_pool(example_plan: PlanResult) -> None:
    """The example with its CPU pool has no error finding, and the plan's summary lists the pool (its VMs, no GPUs)
    and the cpu-node role's custom data and payload apart from the GPU nodes'."""
    assert [f for f in example_plan.findings if f.level.label == "error"] == []
    summary = example_plan.summary
    assert (summary["pools"]["prep"]["vms"], summary["pools"]["prep"]["gpus"]) == (4, 0)
    assert {"cpu-node", "gpu-node", "head"} <= set(summary["customDataBytes"])
    assert {"cpu-node", "gpu-node", "head"} <= set(summary["nodePayloadBytes"])


def test_quota_counts_the_cpu_pools_family(example_plan: PlanResult, example_raw: dict[str, Any]) -> None:
    """The CPU pool's vCPUs count against its size's quota family (data/skus.yaml quotaFamily), beside the head's;
    too little of that family is an error naming it and the numbers."""
    [pool] = example_raw["cpuPools"]
    sku = catalog.load().sku(pool["vmSize"])
    head = catalog.load().sku(config.parse(example_raw).head.vm_size)
    demands, _ = quota.demand(example_plan.resources)
    family = {d.family: d.vcpus for d in demands}[sku.quota_family.value]
    shared = head.vcpus if head.quota_family.value == sku.quota_family.value else 0
    assert family == pool["count"] * sku.vcpus + shared
    usages = [
        {"name": {"value": sku.quota_family.value}, "currentValue": 0, "limit": family - 1},
        {"name": {"value": "cores"}, "currentValue": 0, "limit": 10_000_000},
    ]
    usages += [
        {"name": {"value": d.family}, "currentValue": 0, "limit": 10_000_000}
        for d in demands
        if d.family != sku.quota_family.value
    ]
    snapshot = quota.QuotaSnapshot("test", {"eastus2": quota.RegionQuota("eastus2", tuple(quota.parse_usages(usages)))})
    found = quota_rule.quota_sufficient(example_plan.resources, RuleContext(quota=snapshot))
    [short] = [f for f in found if f.level.label == "error"]
    assert sku.quota_family.value in short.message
    assert f"requested {family:,} vCPUs" in short.message


def test_the_subnet_rule_counts_the_cpu_pools_vms(example_raw: dict[str, Any]) -> None:
    """A GPU subnet with room for the rack but not for the rack and the CPU pool fails subnet-fits-pool."""
    raw = copy.deepcopy(example_raw)
    reserved = int(catalog.load().limit("subnetReservedAddresses"))
    room = 32 - reserved  # a /27
    rack = catalog.load().sku(raw["gpuPools"][0]["vmSize"]).vms_per_nvlink_domain
    raw["network"] = {**raw["network"], "gpuSubnetPrefixLength": 27}
    raw["cpuPools"][0]["count"] = room - rack + 1
    found = run_plan("custom", raw).findings
    assert [f.rule for f in found if f.level.label == "error"] == ["subnet-fits-pool"]
    raw["cpuPools"][0]["count"] = room - rack
    assert not [f for f in run_plan("custom", raw).findings if f.rule == "subnet-fits-pool"]


def test_the_cost_table_prices_the_cpu_pools_vms(example_plan: PlanResult, example_raw: dict[str, Any]) -> None:
    """The cost table has a line for the CPU pool's VMs at their size's meter and count, priced (data/prices.yaml)."""
    [pool] = example_raw["cpuPools"]
    items = example_plan.summary["cost"]["items"]
    [row] = [r for r in items if r["item"] == f"pool {pool['name']} VMs"]
    assert (row["meter"], row["quantity"]) == (f"vm/{pool['vmSize']}", pool["count"])
    assert row["hourly"] > 0


def test_the_scale_set_reads_as_a_pool_to_the_rules(example_plan: PlanResult) -> None:
    """The rules' inventory sees the CPU scale set as pool `prep` of its size and count."""
    [view] = [ss for ss in inventory.scale_sets(example_plan.resources) if ss.pool == "prep"]
    assert (view.vm_size, view.capacity) == ("Standard_D32ds_v5", 4)
