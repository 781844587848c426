"""Carving the cluster's subnets out of ``gb300:network.addressSpace``: a layout where no subnet ever moves.

Pure arithmetic, no Pulumi. A subnet that holds VMs, a Lustre filesystem or private endpoints cannot be
re-addressed in place, so the layout (docs/day2.md) gives every subnet a slot that depends only on the
address space and on its own size, never on how many racks there are or whether Bastion is on:

* the small subnets sit at fixed offsets from the start of the space: ``head`` /27 at +0, ``endpoints`` /27
  at +32, ``AzureBastionSubnet`` /26 at +64 (the slot stays reserved when Bastion is off), ``storage`` at the
  first offset of at least +256 aligned to its own size (a /24 at +256, a /23 at +512, a /22 at +1024);
* the GPU subnet is the last block of the space: by default its upper half, or the size
  ``gb300:network.gpuSubnetPrefixLength`` asks for. Adding racks fills it; it never moves.

Carving never fails: a subnet that does not fit (outside the space, overlapping another, or too small for
its VMs) is still carved, marked ``fits=False``, and the ``subnet-fits-pool`` rule reports it with every
other finding in one run.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

Role = Literal["gpu", "head", "storage", "endpoints", "bastion"]
LUSTRE_CLIENT_ROLES: tuple[Role, ...] = ("gpu", "head")
"""The subnets whose machines mount Lustre (GPU nodes, head): root there is not squashed (data/storage.yaml)."""

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
# Fixed offsets (addresses from the start of the space) of the small subnets; storage's depends on its size.
FIXED_OFFSET: dict[Role, int] = {"head": 0, "endpoints": 32, "bastion": 64}
STORAGE_MIN_OFFSET = 256  # after the first /24, which holds head, endpoints and Bastion


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


def storage_offset(prefix: int) -> int:
    """Where the storage subnet of this prefix length starts, from the start of the space."""
    block = 2 ** (32 - prefix)
    return int(max(STORAGE_MIN_OFFSET, block))


def gpu_network(address_space: str, gpu_prefix: int | None = None) -> ipaddress.IPv4Network:
    """The GPU subnet: the last block of the space, of ``gpu_prefix`` when given, else the upper half."""
    space = ipaddress.IPv4Network(address_space)
    prefix = gpu_prefix if gpu_prefix is not None else min(space.prefixlen + 1, 32)
    prefix = max(prefix, space.prefixlen)
    end = int(space.broadcast_address) + 1
    return ipaddress.IPv4Network((end - 2 ** (32 - prefix), prefix))


def carve(
    address_space: str,
    *,
    gpu_vms: int,
    reserved: int,
    roles: tuple[Role, ...] = ("gpu", "head", "storage", "endpoints", "bastion"),
    storage_prefix: int | None = None,
    gpu_prefix: int | None = None,
) -> list[SubnetPlan]:
    """Carve one subnet per role in ``roles`` at its fixed slot (module docstring), in the order of ``roles``.

    The GPU subnet is the last block of the space, of ``gpu_prefix`` when given, else the upper half.
    """
    space = ipaddress.IPv4Network(address_space)
    base = int(space.network_address)
    nets: dict[Role, ipaddress.IPv4Network] = {}
    needed: dict[Role, int] = {}
    for role in roles:
        if role == "gpu":
            gpu = gpu_network(address_space, gpu_prefix)
            prefix, start = gpu.prefixlen, int(gpu.network_address)
            needed[role] = gpu_vms
        elif role == "storage":
            prefix = storage_prefix if storage_prefix is not None else FIXED_PREFIX[role]
            start = base + storage_offset(prefix)
            needed[role] = 0
        else:
            prefix = FIXED_PREFIX[role]
            start = base + FIXED_OFFSET[role]
            needed[role] = 0
        if start + 2 ** (32 - prefix) > 2**32:
            start = 2**32 - 2 ** (32 - prefix)  # past the end of IPv4: the rule reports it outside the space
        nets[role] = ipaddress.IPv4Network((start, prefix))
    plans = []
    for role in roles:
        net = nets[role]
        inside = net.subnet_of(space)
        apart = not any(net.overlaps(other) for r, other in nets.items() if r != role)
        room = role != "gpu" or net.num_addresses - reserved >= needed[role]
        plans.append(SubnetPlan(role, SUBNET_NAMES[role], str(net), needed[role], inside and apart and room))
    return plans
