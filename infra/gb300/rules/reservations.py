"""``capacity-reservation-supported``: a GPU pool that targets a capacity reservation group names a size Azure's
reservations can hold (facts: ``data/reservations.yaml``, :mod:`gb300.facts.reservations`)."""

from __future__ import annotations

from gb300.config import StackConfig
from gb300.facts import catalog, reservations
from gb300.findings import Level, Report
from gb300.rules.base import config_rule


@config_rule("capacity-reservation-supported")
def capacity_reservation_supported(cfg: StackConfig) -> list[Report]:
    """A pool targeting a capacity reservation group has a size on-demand reservations hold, or needs a block one."""
    facts = reservations.load()
    out: list[Report] = []
    for index, pool in enumerate(cfg.gpu_pools):
        if not pool.capacity_reservation_group_id or facts.on_demand_supports(pool.vm_size):
            continue
        vms = pool.racks * catalog.load().sku(pool.vm_size).vms_per_nvlink_domain
        steps = ", ".join(str(c) for c in facts.block_capacities)
        out.append(
            Report(
                Level.WARNING,
                f"gb300:gpuPools[{index}].capacityReservationGroupId",
                f"pool {pool.name} ({pool.vm_size}) targets a capacity reservation group, but on-demand capacity "
                f"reservations do not support {pool.vm_size.removeprefix('Standard_')[:2]}-series sizes "
                f"({facts.on_demand_status}: {facts.on_demand_source}). Only a block capacity reservation group "
                f"(reservationType: Block) can hold its {vms} VMs: Azure offers it for sizes whose Resource SKU lists "
                f"{facts.block_value} in {facts.block_capability}, in reservations of {steps} VMs, whose size and "
                "capacity cannot change once made. Check the group's type (az capacity reservation group show "
                "--query reservationType) or remove the key",
            )
        )
    return out
