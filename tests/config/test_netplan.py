"""Subnet carving: room for every VM, aligned, non-overlapping, and honest when the space is too small."""

from __future__ import annotations

import ipaddress

import pytest

from gb300.config import netplan


@pytest.mark.parametrize("vms", [18, 1152, 2160, 25002])
def test_gpu_subnet_is_the_upper_half_whatever_the_pool_size(vms: int) -> None:
    """By default the GPU subnet is the space's upper half, so adding racks never re-addresses it."""
    gpu = next(p for p in netplan.carve("10.40.0.0/16", gpu_vms=vms, reserved=5) if p.role == "gpu")
    assert gpu.prefix == "10.40.128.0/17"
    assert gpu.fits


@pytest.mark.parametrize(
    "change",
    [{"gpu_vms": 2160}, {"roles": ("gpu", "head", "storage", "endpoints")}, {"gpu_prefix": 20}],
    ids=["grow-64-to-120-racks", "bastion-off", "gpu-prefix"],
)
def test_small_subnets_never_move(change: dict[str, object]) -> None:
    """Growing the pool, turning Bastion off or sizing the GPU subnet leaves head, storage and endpoints in place."""
    base = {p.role: p.prefix for p in netplan.carve("10.40.0.0/16", gpu_vms=1152, reserved=5)}
    args: dict[str, object] = {"gpu_vms": 1152, "reserved": 5, **change}
    after = {p.role: p.prefix for p in netplan.carve("10.40.0.0/16", **args)}  # type: ignore[arg-type]
    assert base["head"] == after["head"] == "10.40.0.0/27"
    assert base["endpoints"] == after["endpoints"] == "10.40.0.32/27"
    assert base["storage"] == after["storage"] == "10.40.1.0/24"
    if "gpu_prefix" not in change:
        assert base["gpu"] == after["gpu"]


def test_storage_slot_is_aligned_to_its_size() -> None:
    """A larger Lustre subnet starts at the first offset of at least 256 aligned to its size, clear of the rest."""
    storage = next(
        p for p in netplan.carve("10.40.0.0/16", gpu_vms=18, reserved=5, storage_prefix=22) if p.role == "storage"
    )
    assert storage.prefix == "10.40.4.0/22"
    assert storage.fits


def test_subnets_do_not_overlap_and_stay_inside() -> None:
    """Every carved subnet lies inside the address space and overlaps no other."""
    space = ipaddress.IPv4Network("10.40.0.0/16")
    nets = [ipaddress.IPv4Network(p.prefix) for p in netplan.carve(str(space), gpu_vms=1152, reserved=5)]
    assert all(n.subnet_of(space) for n in nets)
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1 :])


def test_bastion_subnet_has_azures_name_and_minimum_size() -> None:
    """Bastion's subnet is called AzureBastionSubnet and is at least a /26, as Azure requires."""
    bastion = next(p for p in netplan.carve("10.40.0.0/16", gpu_vms=18, reserved=5) if p.role == "bastion")
    assert bastion.name == "AzureBastionSubnet"
    assert bastion.size >= 64


def test_too_small_space_is_carved_but_marked() -> None:
    """A /24 cannot hold 1,152 VMs: carving still returns subnets, marked as not fitting, for the rule to report."""
    plans = netplan.carve("10.40.0.0/24", gpu_vms=1152, reserved=5)
    gpu = next(p for p in plans if p.role == "gpu")
    assert not gpu.fits
    assert gpu.size - 5 < 1152


def test_gpu_subnet_can_be_sized_for_growth() -> None:
    """A requested GPU prefix length leaves room to add racks later, and the small subnets still fit."""
    plans = netplan.carve("10.40.0.0/16", gpu_vms=18, reserved=5, gpu_prefix=20)
    gpu = next(p for p in plans if p.role == "gpu")
    assert gpu.prefix == "10.40.240.0/20"
    assert gpu.fits
    assert all(p.fits for p in plans)


def test_requested_gpu_prefix_too_small_is_left_for_the_rule() -> None:
    """A requested prefix smaller than the pools need is carved as asked; subnet-fits-pool reports it."""
    gpu = next(p for p in netplan.carve("10.40.0.0/16", gpu_vms=1152, reserved=5, gpu_prefix=24) if p.role == "gpu")
    assert gpu.size - 5 < 1152
