"""``capacity-reservation-supported``: a GPU pool that targets a capacity reservation group names a size Azure's
reservations can hold. Offline the facts are ``data/reservations.yaml`` (:mod:`gb300.facts.reservations`); gone live
(``gb300 plan --quota live``), the size's own Resource SKU capabilities in the stack's region win, and each finding
says which of the two it used."""

from __future__ import annotations

from gb300.azure.quota import QuotaSnapshot
from gb300.config import StackConfig
from gb300.config.compute import GpuPool
from gb300.facts import catalog, reservations
from gb300.facts.reservations import ReservationFacts, SkuReservations
from gb300.findings import Level, Report
from gb300.rules.base import sku_config_rule

_BY_HAND = "Check the group's type (az capacity reservation group show --query reservationType) or remove the key"


@sku_config_rule("capacity-reservation-supported")
def capacity_reservation_supported(cfg: StackConfig, quota: QuotaSnapshot | None) -> list[Report]:
    """A pool targeting a capacity reservation group has a size on-demand reservations hold, or needs a block one."""
    facts = reservations.load()
    out: list[Report] = []
    for index, pool in enumerate(cfg.gpu_pools):
        if not pool.capacity_reservation_group_id:
            continue
        key = f"gb300:gpuPools[{index}].capacityReservationGroupId"
        answer = _live_answer(facts, quota, cfg.cluster.location, pool.vm_size)
        if answer is not None:
            report = _from_azure(facts, pool, key, cfg.cluster.location, answer)
        elif not facts.on_demand_supports(pool.vm_size):
            report = _from_data(facts, pool, key)
        else:
            report = None
        if report is not None:
            out.append(report)
    return out


def _live_answer(
    facts: ReservationFacts, quota: QuotaSnapshot | None, location: str, vm_size: str
) -> SkuReservations | None:
    """The size's answer from the live Resource SKUs of ``location``; None when the plan did not go live, Azure
    did not answer, or the SKU lists no capacity reservation capability."""
    region = quota.regions.get(location) if quota is not None else None
    if region is None or region.unverified is not None or region.offers is None:
        return None
    offer = region.offers.get(vm_size)
    return facts.from_sku(offer.capability) if offer is not None else None


def _block_needs(facts: ReservationFacts, pool: GpuPool) -> str:
    vms = pool.racks * catalog.load().sku(pool.vm_size).vms_per_nvlink_domain
    steps = ", ".join(str(c) for c in facts.block_capacities)
    return (
        f"a block capacity reservation group (reservationType: Block) can hold its {vms} VMs, in reservations of "
        f"{steps} VMs whose size and capacity cannot change once made"
    )


def _from_data(facts: ReservationFacts, pool: GpuPool, key: str) -> Report:
    """No live answer: the series list of data/reservations.yaml, with its status and source."""
    return Report(
        Level.WARNING,
        key,
        f"pool {pool.name} ({pool.vm_size}) targets a capacity reservation group, but on-demand capacity "
        f"reservations do not support {pool.vm_size.removeprefix('Standard_')[:2]}-series sizes (from "
        f"infra/gb300/data/reservations.yaml, {facts.on_demand_status}: {facts.on_demand_source}; `gb300 plan "
        f"--quota live` asks Azure instead). Only {_block_needs(facts, pool)}: Azure offers it for sizes whose "
        f"Resource SKU lists {facts.block_value} in {facts.block_capability}. {_BY_HAND}.",
    )


def _from_azure(
    facts: ReservationFacts, pool: GpuPool, key: str, location: str, answer: SkuReservations
) -> Report | None:
    """Azure's own answer for the size in the region (it wins over the data file)."""
    said = (
        f"from Azure's Resource SKUs in {location}, live: {facts.live_supported_capability} "
        f"{'True' if answer.supported else 'False'}"
        + (f", {facts.live_types_capability} {', '.join(answer.types)}" if answer.types else "")
    )
    where = f"pool {pool.name} ({pool.vm_size}) targets a capacity reservation group"
    if facts.holds_on_demand(answer):
        overrides = (
            "" if facts.on_demand_supports(pool.vm_size) else "; this overrides infra/gb300/data/reservations.yaml"
        )
        return Report(Level.INFO, key, f"{where}; on-demand capacity reservations hold the size ({said}{overrides}).")
    if facts.holds_block(answer):
        return Report(
            Level.WARNING,
            key,
            f"{where}, but on-demand capacity reservations do not support the size ({said}). Only "
            f"{_block_needs(facts, pool)}. {_BY_HAND}.",
        )
    return Report(
        Level.ERROR,
        key,
        f"{where}, but Azure supports no capacity reservation of the size in {location} ({said}): the group cannot "
        "hold the pool's VMs. Remove the key, or choose a size and region whose Resource SKU supports one.",
    )
