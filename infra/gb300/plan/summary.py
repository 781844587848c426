"""The plan's summary, computed from the registered resources (what would be built), read with the catalog."""

from __future__ import annotations

import ipaddress
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from gb300 import tags as gb300_tags
from gb300.azure import inventory, machines
from gb300.config import StackConfig
from gb300.facts import catalog
from gb300.plan import glance
from gb300.resources import ResourceRecord


def payload_bytes(cfg: StackConfig) -> dict[str, int]:
    """Role -> bytes of the largest node payload its custom data fetches (the archive ``gb300 payload publish``
    uploads; the program's own render of the stack, :func:`gb300.node.custom_data.render_stack`)."""
    from gb300.node.custom_data import render_stack  # noqa: PLC0415 - the summary needs the node package only here

    payload: dict[str, int] = {}
    for data in render_stack(cfg).all:
        payload[data.role] = max(payload.get(data.role, 0), data.payload.size)
    return dict(sorted(payload.items()))


def _pools(
    cat: catalog.Catalog, scale_sets: Sequence[inventory.ScaleSetView]
) -> tuple[dict[str, dict[str, Any]], Counter[str]]:
    """Each GPU pool's scale sets, racks, VMs and GPUs; and the VMs each subnet holds (by subnet id)."""
    pools: dict[str, dict[str, Any]] = {}
    subnet_use: Counter[str] = Counter()
    for ss in scale_sets:
        sku = cat.skus.get(ss.vm_size)
        pool = pools.setdefault(
            ss.pool or ss.name,
            {"vmSize": ss.vm_size, "scaleSets": 0, "racks": 0, "vms": 0, "gpus": 0},
        )
        pool["scaleSets"] += 1
        pool["vms"] += ss.capacity
        if sku is not None:
            pool["gpus"] += ss.capacity * sku.gpus
            if sku.is_rack_scale:
                pool["racks"] += ss.capacity // sku.vms_per_nvlink_domain
        for subnet_id in set(ss.subnet_ids):
            subnet_use[subnet_id] += ss.capacity
    return pools, subnet_use


def _custom_data_bytes(
    scale_sets: Sequence[inventory.ScaleSetView], resources: Sequence[ResourceRecord]
) -> dict[str, int]:
    """Role -> the largest custom data (base64 characters) a scale set or VM of that role boots with."""
    custom_data: dict[str, int] = {}
    for ss in scale_sets:
        data = inventory.dig(ss.properties, "virtualMachineProfile", "osProfile", "customData")
        if isinstance(data, str):
            role = gb300_tags.role_of(ss.tags) or gb300_tags.ROLE_GPU_NODE
            custom_data[role] = max(custom_data.get(role, 0), len(data))
    for vm in inventory.of_type(resources, "azure-native:compute:VirtualMachine"):
        data = inventory.dig(vm.inputs, "osProfile", "customData")
        if isinstance(data, str):
            role = gb300_tags.role_of(vm.inputs.get("tags")) or vm.name
            custom_data[role] = max(custom_data.get(role, 0), len(data))
    return custom_data


def _vcpus(cat: catalog.Catalog, resources: Sequence[ResourceRecord]) -> dict[str, int]:
    """Quota family -> the vCPUs every VM (the head node included) takes of it, sorted."""
    vcpus: dict[str, int] = defaultdict(int)
    for machine in machines.machines(resources):
        msku = cat.skus.get(machine.size)
        if msku is not None:
            vcpus[msku.quota_family.value] += machine.count * msku.vcpus
    return dict(sorted(vcpus.items()))


def _subnets(
    cat: catalog.Catalog, resources: Sequence[ResourceRecord], subnet_use: Counter[str]
) -> list[dict[str, Any]]:
    """Each subnet's prefix, usable and used addresses, VMs and what else it holds, in address order."""
    reserved = int(cat.limit("subnetReservedAddresses"))
    holdings = glance.subnet_holdings(resources)
    subnets = []
    for rec in inventory.of_type(resources, inventory.SUBNET):
        prefix = rec.inputs.get("addressPrefix")
        if not isinstance(prefix, str):
            continue
        size = ipaddress.IPv4Network(prefix).num_addresses
        sid = str(getattr(rec, "id", ""))
        holds = holdings.get(sid, {})
        # Addresses: one per VM, NIC and private endpoint. Bastion and Lustre take what Azure sizes them to
        # (their subnets are sized for it: AzureBastionSubnet /26, Lustre by capacity), shown as held, not counted.
        used = subnet_use.get(sid, 0) + holds.get("NIC", 0) + holds.get("private endpoint", 0)
        subnets.append(
            {
                "name": rec.inputs.get("subnetName", rec.name),
                "prefix": prefix,
                "usable": size - reserved,
                "used": used,
                "vms": subnet_use.get(sid, 0),
                "holds": holds,
            }
        )
    subnets.sort(key=lambda s: ipaddress.IPv4Network(s["prefix"]))
    return subnets


def summarise(cfg: StackConfig, resources: Sequence[ResourceRecord]) -> dict[str, Any]:
    """Racks, VMs, GPUs, vCPUs per quota family, address use per subnet, resources by type, custom data sizes."""
    cat = catalog.load()
    scale_sets = inventory.scale_sets(resources)
    pools, subnet_use = _pools(cat, scale_sets)
    custom_data = _custom_data_bytes(scale_sets, resources)
    vcpus = _vcpus(cat, resources)
    subnets = _subnets(cat, resources, subnet_use)
    return {
        "cluster": cfg.cluster.name,
        "location": cfg.cluster.location,
        "zone": cfg.cluster.zone,
        "racks": sum(p["racks"] for p in pools.values()),
        "vms": sum(p["vms"] for p in pools.values()),
        "gpus": sum(p["gpus"] for p in pools.values()),
        "vcpus": vcpus,
        "pools": pools,
        "subnets": subnets,
        "customDataBytes": custom_data,
        "nodePayloadBytes": payload_bytes(cfg),
        "resourceCount": len(resources),
        "resourcesByType": dict(sorted(Counter(r.type for r in resources).items())),
        "access": glance.access(cfg),
        "storage": glance.storage(cfg),
        "hooks": glance.hooks(cfg),
    }
