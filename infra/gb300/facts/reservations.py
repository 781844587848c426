"""What Azure's capacity reservations can hold (``data/reservations.yaml``): the series on-demand reservations do
not support, and what a block reservation needs."""

from __future__ import annotations

from dataclasses import dataclass

from gb300.errors import DataError
from gb300.facts.loader import data

__all__ = ["ReservationFacts", "load"]


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

    def on_demand_supports(self, vm_size: str) -> bool:
        """Whether an on-demand (Targeted) reservation can hold ``vm_size`` (``Standard_ND128isr_GB300_v6``)."""
        series = vm_size.removeprefix("Standard_").upper()
        return not any(series.startswith(p.upper()) for p in self.unsupported_prefixes)


def load() -> ReservationFacts:
    """The facts of ``data/reservations.yaml``; a malformed file is a :class:`DataError` (a bug in gb300)."""
    raw = data("reservations.yaml")
    try:
        on_demand, block = raw["onDemand"], raw["block"]
        return ReservationFacts(
            tuple(str(p) for p in on_demand["unsupportedSeriesPrefixes"]),
            str(on_demand["source"]).strip(),
            str(on_demand["status"]),
            str(block["capability"]),
            str(block["value"]),
            tuple(int(c) for c in block["capacities"]),
            str(block["source"]).strip(),
            str(block["status"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"data/reservations.yaml: malformed ({exc!r})") from None
