"""``gb300 goodput``: of the GPU-hours paid in a period, how many ran jobs to completion and where the rest went."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gb300.errors import UsageError
from gb300.io import reader, writer
from gb300.ops import goodput, goodput_report

NAME = "goodput"


def add_parser(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="split the GPU-hours paid in a period into jobs completed, node faults, repairs, drains and idle",
        description=(
            "Read saved files: 'sacct --json' (one job at a time, any size), the repair loop's decision records "
            "(remediation.log) and the node list (docs/goodput.md#the-node-list), and print where each GPU-hour "
            "paid in the period went: jobs completed, jobs failed or requeued by node faults, jobs ended "
            "otherwise, jobs still running, held by the repair loop (by cause), drained by the health gate, idle, "
            "not yet registered; the parts add up to the GPU-hours paid. Bad records (a truncated or hostile sacct "
            "file, jobs on unknown nodes, clocks going backwards, overlapping records) are counted and named. Cost "
            "per account and per job comes from data/prices.yaml; unknown prices are named. Exit 0: printed; 2: a "
            "bad period."
        ),
    )
    p.add_argument("--sacct", metavar="FILE", type=Path, required=True, help="saved 'sacct --json' output")
    p.add_argument("--nodes", metavar="FILE", type=Path, required=True, help="the node list (docs/goodput.md)")
    p.add_argument("--heal", metavar="FILE", type=Path, help="the repair loop's decision records (JSON lines)")
    p.add_argument("--since", metavar="TIME", required=True, help="period start, ISO 8601 UTC")
    p.add_argument("--until", metavar="TIME", required=True, help="period end, ISO 8601 UTC")
    p.add_argument("--json", metavar="FILE", type=Path, help="also write the report as JSON here ('-': stdout only)")


def _period(args: argparse.Namespace) -> tuple[float, float]:
    since, until = goodput.when(args.since), goodput.when(args.until)
    if since is None or until is None:
        raise UsageError(f"--since {args.since!r} / --until {args.until!r}: must be ISO 8601 times")
    if until <= since:
        raise UsageError(f"--until {args.until} must come after --since {args.since}")
    return since, until


def run(args: argparse.Namespace) -> int:
    period = _period(args)
    nodes = reader.load_json(args.nodes, reader.GOODPUT_NODES)  # bad: one line naming the file, exit 2
    report = goodput_report.load(nodes, args.sacct, args.heal, period)
    doc = goodput_report.summary(report)
    if args.json is not None and str(args.json) == "-":
        json.dump(doc, sys.stdout, indent=2)
        print()
        return 0
    print("\n".join(goodput_report.text(doc)))
    if args.json is not None:
        writer.replace(args.json, json.dumps(doc, indent=2) + "\n", mode=0o644, label="--json")
    return 0
