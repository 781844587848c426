"""``gb300 size-storage``: the Lustre capacity, per SKU, that writes one checkpoint within a time budget."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from gb300.errors import UsageError
from gb300.facts import sizing

NAME = "size-storage"


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number such as 1e12 (got {text!r})") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number (got {text!r})")
    return value


def add_parser(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="size Azure Managed Lustre to write one checkpoint in time",
        description=(
            "For each Azure Managed Lustre SKU, print the capacity that writes one checkpoint of a model within "
            "the given minutes. A checkpoint weighs parameters x bytes per parameter (16 for mixed-precision "
            "Adam: infra/gb300/data/checkpoint.yaml); a SKU writes capacity x its MB/s per TiB (decimal); the "
            "capacity is rounded up to the SKU's increment and minimum (infra/gb300/data/lustre.yaml)."
        ),
    )
    p.add_argument("--params", type=_positive, required=True, metavar="N", help="model parameters, e.g. 1e12")
    p.add_argument(
        "--checkpoint-minutes", type=_positive, required=True, metavar="M", help="minutes one checkpoint may take"
    )
    p.add_argument(
        "--bytes-per-param",
        type=_positive,
        default=None,
        metavar="B",
        help=f"checkpoint bytes per parameter (default {sizing.bytes_per_parameter().value})",
    )
    p.add_argument(
        "--export-minutes",
        type=_positive,
        default=None,
        metavar="M",
        help="the filesystem is tied to Blob: the auto-export reads each checkpoint back off it over M minutes (the "
        "checkpoint interval; assumption autoExport in infra/gb300/data/lustre.yaml), on top of the write",
    )
    p.add_argument("--json", action="store_true", help="print the table as JSON")


def rows(
    params: float, minutes: float, per_param: float | None, export_minutes: float | None = None
) -> list[dict[str, Any]]:
    """The table ``size-storage`` prints, one row per SKU, fastest tier first."""
    out = []
    for s in sizing.size_all(params, minutes, per_param, export_minutes=export_minutes):
        out.append(
            {
                "sku": s.sku.name,
                "mbpsPerTiB": s.sku.mbps_per_tib,
                "neededMBps": round(s.needed_mbps, 1),
                "exactTiB": round(s.exact_tib, 2),
                "capacityTiB": s.capacity_tib,
                "throughputMBps": s.throughput_mbps,
                "writeMinutes": round(sizing.write_minutes(s.sku, s.capacity_tib, params, per_param), 2),
                "maxTiB": s.sku.max_tib.value,
                "maxStatus": s.sku.max_tib.status,
                "overMax": s.over_max,
            }
        )
    return out


def run(args: argparse.Namespace) -> int:
    params: float = args.params
    minutes: float = args.checkpoint_minutes
    per_param: float | None = args.bytes_per_param
    if minutes > 7 * 24 * 60:
        raise UsageError(f"--checkpoint-minutes must be at most a week ({7 * 24 * 60}) (got {minutes:g})")
    export: float | None = args.export_minutes
    table = rows(params, minutes, per_param, export)
    if args.json:
        print(json.dumps({"parameters": params, "checkpointMinutes": minutes, "skus": table}, indent=2))
        return 0
    bpp = per_param if per_param is not None else float(sizing.bytes_per_parameter().value)
    size_tb = sizing.checkpoint_bytes(params, per_param) / 1e12
    print(
        f"checkpoint: {sizing.fmt_count(params)} parameters x {bpp:g} bytes = {size_tb:,.1f} TB, "
        f"written in {minutes:g} min"
        + (f" while the auto-export reads the previous one over {export:g} min" if export is not None else "")
        + f" -> needs {table[0]['neededMBps'] / 1000:,.1f} GB/s"
    )
    print()
    print(f"{'SKU':<28} {'MB/s/TiB':>8} {'exact TiB':>10} {'capacity TiB':>13} {'GB/s':>7} {'write min':>10}  note")
    for row in table:
        note = ""
        if row["overMax"]:
            note = (
                f"over the documented maximum of {row['maxTiB']} TiB ({row['maxStatus']}): "
                "ask Azure, or use a faster tier"
            )
        print(
            f"{row['sku']:<28} {row['mbpsPerTiB']:>8} {row['exactTiB']:>10,.2f} {row['capacityTiB']:>13,} "
            f"{row['throughputMBps'] / 1000:>7,.1f} {row['writeMinutes']:>10.2f}  {note}"
        )
    print()
    print("Set gb300:storage.lustre.sku and capacityTiB from one row; size and SKU cannot change after creation.")
    return 0
