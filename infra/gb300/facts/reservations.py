"""What Azure's capacity reservations can hold (``data/reservations.yaml``): the series on-demand reservations do
not support, what a block reservation needs, and how to read a size's own answer from its Resource SKU
capabilities (``gb300 plan --quota live``), which wins over the series list when there is one."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from gb300.errors import DataError
from gb300.facts.loader import data

__all__ = ["ReservationFacts", "SkuReservations", "load"]


@dataclass(frozen=True)
class SkuReservations:
    """What a size's Resource SKU in one region says of capacity reservations."""

    supported: bool
    """``CapacityReservationSupported`` is true."""
    types: tuple[str, ...]
    """``SupportedCapacityReservationTypes`` as listed (``Targeted``, ``Block``); empty when Azure lists none."""


@dataclass(frozen=True)
class ReservationFacts:
    """The facts, with their sources and status."""

    unsupported_prefixes: tuple[str, ...]
    on_demand_source: str
    on_demand_status: str
    block_capability: str
    block_value: str
    block_capacities: tuple[int, ...]
    block_source: str
    block_status: str
    live_supported_capability: str
    live_types_capability: str
    live_on_demand_type: str
    live_source: str
    live_status: str

    def on_demand_supports(self, vm_size: str) -> bool:
        """Whether an on-demand (Targeted) reservation can hold ``vm_size`` (``Standard_ND128isr_GB300_v6``)."""
        series = vm_size.removeprefix("Standard_").upper()
        return not any(series.startswith(p.upper()) for p in self.unsupported_prefixes)

    def from_sku(self, capability: Callable[[str], str | None]) -> SkuReservations | None:
        """A size's answer from its Resource SKU's capabilities (``capability(name)`` gives a value or None); None
        when the SKU says nothing of capacity reservations."""
        supported = capability(self.live_supported_capability)
        if supported is None:
            return None
        if supported.strip().lower() != "true":
            return SkuReservations(False, ())
        listed = capability(self.live_types_capability) or ""
        return SkuReservations(True, tuple(t for t in re.split(r"[\s,;]+", listed) if t))

    def holds_on_demand(self, answer: SkuReservations) -> bool:
        """Whether ``answer`` lets an on-demand reservation hold the size (true and no types listed counts: the
        capability predates the types list)."""
        return answer.supported and (not answer.types or _has(answer.types, self.live_on_demand_type))

    def holds_block(self, answer: SkuReservations) -> bool:
        """Whether ``answer`` lets a block reservation hold the size."""
        return answer.supported and _has(answer.types, self.block_value)


def _has(types: tuple[str, ...], wanted: str) -> bool:
    return wanted.lower() in {t.lower() for t in types}


def load() -> ReservationFacts:
    """The facts of ``data/reservations.yaml``; a malformed file is a :class:`DataError` (a bug in gb300)."""
    raw = data("reservations.yaml")
    try:
        on_demand, block, live = raw["onDemand"], raw["block"], raw["live"]
        return ReservationFacts(
            tuple(str(p) for p in on_demand["unsupportedSeriesPrefixes"]),
            str(on_demand["source"]).strip(),
            str(on_demand["status"]),
            str(block["capability"]),
            str(block["value"]),
            tuple(int(c) for c in block["capacities"]),
            str(block["source"]).strip(),
            str(block["status"]),
            str(live["supportedCapability"]),
            str(live["typesCapability"]),
            str(live["onDemandType"]),
            str(live["source"]).strip(),
            str(live["status"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"data/reservations.yaml: malformed ({exc!r})") from None
