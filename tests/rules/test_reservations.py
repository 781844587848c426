"""capacity-reservation-supported: an ND pool on a capacity reservation group is told what Azure supports."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300 import config
from gb300.facts import reservations
from gb300.findings import Level
from gb300.rules.reservations import capacity_reservation_supported

GROUP = (
    "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Compute/"
    "capacityReservationGroups/crg"
)


def _cfg(dev_raw: dict[str, Any], **pool: Any) -> config.StackConfig:
    raw = copy.deepcopy(dev_raw)
    raw["gpuPools"][0].update(pool)
    return config.parse(raw)


def test_an_nd_pool_on_a_reservation_group_is_warned_with_what_block_reservations_need(
    dev_raw: dict[str, Any],
) -> None:
    """The dev stack's GB300 pool with a reservation group: one warning at the key, naming the source, the
    block reservation's capability and its capacity steps."""
    facts = reservations.load()
    [report] = capacity_reservation_supported.check(_cfg(dev_raw, capacityReservationGroupId=GROUP))
    assert report.level == Level.WARNING
    assert report.resource == "gb300:gpuPools[0].capacityReservationGroupId"
    assert facts.on_demand_source in report.message
    assert f"{facts.block_value} in {facts.block_capability}" in report.message
    assert ", ".join(str(c) for c in facts.block_capacities) in report.message


@pytest.mark.parametrize(("vm_size", "supported"), [("Standard_ND128isr_GB300_v6", False), ("Standard_D4s_v5", True)])
def test_the_series_comes_from_the_data_file(vm_size: str, supported: bool) -> None:
    """ND sizes are refused by on-demand reservations (data/reservations.yaml); others are not."""
    assert reservations.load().on_demand_supports(vm_size) is supported


def test_a_pool_without_a_reservation_group_is_quiet(dev_raw: dict[str, Any]) -> None:
    """No key, no finding."""
    assert capacity_reservation_supported.check(_cfg(dev_raw)) == []
