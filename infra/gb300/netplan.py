"""Carving the cluster's subnets out of ``gb300:network.addressSpace``.

Pure arithmetic, no Pulumi. Carving never fails: when the address space is too small, the subnets that
do not fit get the best block left (possibly too small or overlapping), and the ``subnet-fits-pool`` rule
reports it with every other finding in one run.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from typing import Literal

Role = Literal["gpu", "head", "storage", "endpoints", "bastion"]

# Azure's names for subnets that must have a fixed name.
SUBNET_NAMES: dict[Role, str] = {
    "gpu": "gpu",
    "head": "head",
    "storage": "storage",
    "endpoints": "endpoints",
    "bastion": "AzureBastionSubnet",
}
# Fixed sizes (prefix lengths) for the small subnets. Bastion needs /26 or larger (Azure Bastion docs).
FIXED_PREFIX: dict[Role, int] = {"head": 27, "storage": 24, "endpoints": 27, "bastion": 26}
MIN_PREFIX = 29  # the smallest subnet Azure allows


@dataclass(frozen=True)
class SubnetPlan:
    """One carved subnet: its role, prefix, and how many addresses its users need."""

    role: Role
    name: str
    prefix: str
    needed: int  # addresses the role needs, Azure's reserved ones excluded
    fits: bool

    @property
    def size(self) -> int:
        return int(ipaddress.IPv4Network(self.prefix).num_addresses)


def prefix_for(addresses: int) -> int:
    """The longest prefix whose block holds ``addresses`` (reserved ones included), at most /29."""
    bits = max(3, math.ceil(math.log2(max(addresses, 1))))
    return min(MIN_PREFIX, 32 - bits)


def carve(
    address_space: str,
    *,
    gpu_vms: int,
    reserved: int,
    roles: tuple[Role, ...] = ("gpu", "head", "storage", "endpoints", "bastion"),
    storage_prefix: int | None = None,
    gpu_prefix: int | None = None,
) -> list[SubnetPlan]:
    """Carve one subnet per role, largest first, each aligned to its size, in address order.

    The GPU subnet is the smallest block that holds ``gpu_vms`` unless ``gpu_prefix`` asks for a size
    (room to add racks later: a subnet with VMs in it cannot simply be resized).
    """
    space = ipaddress.IPv4Network(address_space)
    wanted: dict[Role, int] = {}
    needed: dict[Role, int] = {}
    for role in roles:
        if role == "gpu":
            wanted[role] = gpu_prefix if gpu_prefix is not None else prefix_for(gpu_vms + reserved)
            needed[role] = gpu_vms
        elif role == "storage" and storage_prefix is not None:
            wanted[role] = storage_prefix
            needed[role] = 0
        else:
            wanted[role] = FIXED_PREFIX[role]
            needed[role] = 0
    order = sorted(roles, key=lambda r: (wanted[r], roles.index(r)))
    cursor = int(space.network_address)
    end = int(space.broadcast_address) + 1
    plans: dict[Role, SubnetPlan] = {}
    for role in order:
        prefix = max(wanted[role], space.prefixlen)
        block = 2 ** (32 - prefix)
        start = -(-cursor // block) * block  # align up
        fits = prefix == wanted[role] and start + block <= end
        if start + block > end:
            # Shrink to what is left (never below /29); the rule reports that it does not fit.
            left = max(end - cursor, 0)
            prefix = max(prefix, 32 - int(math.log2(left)) if left >= 8 else MIN_PREFIX)
            block = 2 ** (32 - prefix)
            start = -(-cursor // block) * block
            if start + block > end:
                start = end - block if end - block >= int(space.network_address) else int(space.network_address)
            fits = False
        net = ipaddress.IPv4Network((start, prefix))
        plans[role] = SubnetPlan(role, SUBNET_NAMES[role], str(net), needed[role], fits)
        cursor = max(cursor, start + block)
    return [plans[r] for r in roles]
