"""Lustre sizing for checkpoints: how many TiB of a SKU write one checkpoint within a time budget.

Pure arithmetic over ``data/lustre.yaml`` and ``data/checkpoint.yaml``. Units are Azure's: throughput per TiB
in decimal MB/s (10^6 bytes per second), capacity in TiB. A checkpoint of ``P`` parameters weighs ``P x 16``
bytes (checkpoint.yaml), so writing it in ``t`` seconds needs ``P x 16 / t / 10^6`` MB/s; a SKU of ``r`` MB/s per
TiB needs that divided by ``r`` TiB, rounded up to the SKU's increment and at least its minimum.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from gb300.facts.catalog import Sourced, sourced
from gb300.facts.loader import data

MB = 1_000_000


class LustreSku(BaseModel):
    """One Azure Managed Lustre SKU (``data/lustre.yaml``): throughput per TiB and the capacities Azure accepts.

    The one type of this fact: the sizing, the storage rules and ``gb300 size-storage`` all read it.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    mbps_per_tib: int
    min_tib: int
    increment_tib: int
    max_tib: Sourced  # the smaller documented maximum, with its status (conflict where documents disagree)
    max_alternative: int | None = None  # the larger maximum another Azure document gives, if any

    def valid_capacity(self, tib: int) -> bool:
        """True when Azure accepts ``tib`` for this SKU (at least the minimum, a whole number of increments)."""
        return tib >= self.min_tib and tib % self.increment_tib == 0

    def throughput_mbps(self, tib: int) -> int:
        return tib * self.mbps_per_tib

    def round_up(self, tib: float) -> int:
        """The smallest valid capacity of at least ``tib`` TiB."""
        steps = max(math.ceil(tib / self.increment_tib - 1e-9), 1)
        return max(steps * self.increment_tib, self.min_tib)


@dataclass(frozen=True)
class Sizing:
    """The capacity of one SKU that writes a checkpoint in time, and what it gives."""

    sku: LustreSku
    needed_mbps: float
    exact_tib: float
    capacity_tib: int

    @property
    def throughput_mbps(self) -> int:
        return self.sku.throughput_mbps(self.capacity_tib)

    @property
    def over_max(self) -> bool:
        return self.capacity_tib > int(self.sku.max_tib.value)


@functools.cache
def lustre_skus() -> dict[str, LustreSku]:
    """The Lustre SKU table, read once per process."""
    raw = data("lustre.yaml")["skus"]
    return {
        name: LustreSku(
            name=name,
            mbps_per_tib=int(row["mbpsPerTiB"]),
            min_tib=int(row["minTiB"]),
            increment_tib=int(row["incrementTiB"]),
            max_tib=sourced(row["maxTiB"]),
            max_alternative=row["maxTiB"].get("alternative") if isinstance(row["maxTiB"], dict) else None,
        )
        for name, row in raw.items()
    }


@functools.cache
def bytes_per_parameter() -> Sourced:
    """Bytes one model parameter adds to a checkpoint (data/checkpoint.yaml)."""
    return sourced(data("checkpoint.yaml")["bytesPerParameter"])


def checkpoint_bytes(parameters: float, per_parameter: float | None = None) -> float:
    return parameters * (per_parameter if per_parameter is not None else float(bytes_per_parameter().value))


def needed_mbps(parameters: float, minutes: float, per_parameter: float | None = None) -> float:
    """Decimal MB/s that write one checkpoint of ``parameters`` in ``minutes``."""
    return checkpoint_bytes(parameters, per_parameter) / (minutes * 60) / MB


def export_mbps(parameters: float, drain_minutes: float, per_parameter: float | None = None) -> float:
    """Decimal MB/s the auto-export reads off the filesystem to copy one checkpoint to Blob within ``drain_minutes``
    (the checkpoint interval, by the assumption ``autoExport`` of ``data/lustre.yaml``)."""
    return needed_mbps(parameters, drain_minutes, per_parameter)


def size(
    sku: LustreSku,
    parameters: float,
    minutes: float,
    per_parameter: float | None = None,
    *,
    export_minutes: float | None = None,
) -> Sizing:
    """The capacity of ``sku`` that writes one checkpoint of ``parameters`` within ``minutes``; with
    ``export_minutes``, while the auto-export also reads the previous one off it over that many minutes."""
    mbps = needed_mbps(parameters, minutes, per_parameter)
    if export_minutes is not None:
        mbps += export_mbps(parameters, export_minutes, per_parameter)
    exact = mbps / sku.mbps_per_tib
    return Sizing(sku=sku, needed_mbps=mbps, exact_tib=exact, capacity_tib=sku.round_up(exact))


def size_all(
    parameters: float, minutes: float, per_parameter: float | None = None, *, export_minutes: float | None = None
) -> list[Sizing]:
    """:func:`size` for every SKU, fastest tier first."""
    skus = sorted(lustre_skus().values(), key=lambda s: -s.mbps_per_tib)
    return [size(s, parameters, minutes, per_parameter, export_minutes=export_minutes) for s in skus]


def write_minutes(sku: LustreSku, tib: int, parameters: float, per_parameter: float | None = None) -> float:
    """Minutes a filesystem of ``tib`` TiB of ``sku`` takes to write one checkpoint at its full throughput."""
    return checkpoint_bytes(parameters, per_parameter) / (sku.throughput_mbps(tib) * MB) / 60


def fmt_count(value: float) -> str:
    """A parameter count as people write it: ``1e12``, ``7e10``, ``405000000``."""
    if value >= 1e6:
        text = f"{value:.4g}".replace("e+", "e")
        return text if "e" in text else f"{value:.0f}"
    return f"{value:g}"
