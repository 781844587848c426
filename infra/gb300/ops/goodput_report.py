"""``gb300 goodput``'s report: the node list read, the split swept per node, the cost priced and the text printed.

The sweep gives every paid second of a node to one part (the precedence of :mod:`gb300.ops.goodput`); two job
records on one node at once are an overlap, counted and named, and the second-by-second time goes to the job that
started first, so no hour is counted twice and the parts add up to the GPU-hours paid.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gb300.cost import prices
from gb300.ops import goodput, sacct_stream
from gb300.ops.goodput import PARTS, RANK, Node, Report

SHOWN = 5  # problems named per kind; the rest are counted
TITLES = {
    "completed": "in jobs that completed",
    "nodeFault": "in jobs failed or requeued by node faults",
    "endedOtherwise": "in jobs that ended otherwise (failed, cancelled, timed out)",
    "running": "in jobs still running at the period's end",
    "repairHold": "held by the repair loop",
    "gateDrain": "drained by the health gate",
    "idle": "idle and schedulable",
    "unregistered": "nodes not yet registered",
}


def _time(value: Any, default: float | None = None) -> float | None:
    if value is None:
        return default
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return goodput.when(value) if isinstance(value, str) else None


def _node(report: Report, row: Any, index: int) -> None:
    where = f"nodes[{index}]"
    if not isinstance(row, Mapping) or not isinstance(row.get("name"), str):
        report.problem("unreadableNode", f"{where}: no name")
        return
    gpus, start = row.get("gpus"), _time(row.get("paidFrom"))
    end, registered = _time(row.get("paidTo"), report.period[1]), _time(row.get("registered"), report.period[1])
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0 or start is None or end is None:
        report.problem("unreadableNode", f"{where} ({row['name'][:60]}): gpus or paidFrom cannot be read")
        return
    if end < start:
        report.problem("clockBackwards", f"{where} ({row['name'][:60]}): paidTo is before paidFrom")
        return
    if row["name"] in report.nodes:
        report.problem("duplicateNode", f"{where} ({row['name'][:60]}): listed before; this row is not counted")
        return
    reg = registered if registered is not None else report.period[1]
    node = Node(row["name"], gpus, (start, end), reg, str(row.get("vmSize") or ""))
    report.nodes[node.name] = node
    goodput.add_span(report, node, start, node.registered, "unregistered", "")
    for n, drain in enumerate(row.get("gateDrains") or []):
        d_start = _time(drain.get("start")) if isinstance(drain, Mapping) else None
        d_end = _time(drain.get("end"), report.period[1]) if isinstance(drain, Mapping) else None
        if d_start is None or d_end is None or d_end < d_start:
            report.problem("clockBackwards", f"{where}.gateDrains[{n}]: ends before it starts or cannot be read")
            continue
        goodput.add_span(report, node, d_start, d_end, "gateDrain", str(drain.get("reason") or ""))
        report.records["gateDrain"] += 1


def load(nodes: Any, sacct: Path, heal: Path | None, period: tuple[float, float]) -> Report:
    """The report of the node list (a document read by the strict reader), the sacct file and the decision
    records (both streamed: any size; what cannot be read in them is a problem, not an exception)."""
    report = Report(period, {})
    rows = nodes.get("nodes") if isinstance(nodes, Mapping) else None
    if not isinstance(rows, list):
        report.problem("unreadableNode", 'the node list has no "nodes" array')
    for index, row in enumerate(rows if isinstance(rows, list) else []):
        _node(report, row, index)
    read = sacct_stream.Read()
    for job in sacct_stream.jobs(sacct, read):
        goodput.add_job(report, job)
    for what in read.problems:
        report.problem("badSacct", what)
    if heal is not None:
        try:
            with heal.open(encoding="utf-8", errors="replace") as handle:
                goodput.add_heal_records(report, handle)
        except OSError as exc:
            report.problem("unreadableFile", f"{heal}: {exc.strerror or exc}")
    return report


def _sweep(report: Report, node: Node, seconds: dict[str, float], causes: dict[str, float]) -> None:
    """Give each second of the node's paid time in the period to the first span by precedence, else idle."""
    low, high = max(node.paid[0], report.period[0]), min(node.paid[1], report.period[1])
    points = sorted({low, high, *(s[0] for s in node.spans), *(s[1] for s in node.spans)})
    spans = sorted(node.spans)
    active: list[tuple[float, float, str, str]] = []
    i = 0
    for a, b in itertools.pairwise(points):
        if a < low or b > high:
            continue
        while i < len(spans) and spans[i][0] <= a:
            active.append(spans[i])
            i += 1
        active = [s for s in active if s[1] > a]
        jobs = [s for s in active if RANK[s[2]] == 1]
        if len(jobs) > 1 and jobs[1][0] == a:
            report.problem("overlappingRecords", f"{node.name}: {jobs[0][3]} and {jobs[1][3]} at once")
        best = min(active, key=lambda s: RANK[s[2]], default=None)
        part = best[2] if best else "idle"
        seconds[part] += (b - a) * node.gpus
        if part == "repairHold" and best is not None:
            causes[best[3]] += (b - a) * node.gpus


def _price(nodes: Mapping[str, Node]) -> tuple[dict[str, float | None], list[str]]:
    """Price per GPU-hour by VM size, and the sizes whose price is unknown (named with why)."""
    book = prices.table_book()
    per_gpu: dict[str, float | None] = {}
    unknown: list[str] = []
    for node in nodes.values():
        size = node.size
        if size in per_gpu:
            continue
        price = book.get(f"vm/{size}")
        per_gpu[size] = price.hourly / node.gpus if price.hourly is not None and node.gpus else None
        if per_gpu[size] is None:
            unknown.append(f"vm/{size or '(no vmSize)'}: {price.unknown_because or 'no price'}")
    return per_gpu, unknown


def _money(hours: float, per_gpu: float | None) -> float | None:
    return None if per_gpu is None else round(hours * per_gpu, 2)


def _costs(report: Report, per_gpu: Mapping[str, float | None]) -> dict[str, Any]:
    by_account: dict[str, dict[str, Any]] = {}
    for (account, size), hours in sorted(report.accounts.items()):
        row = by_account.setdefault(account, {"account": account, "gpuHours": 0.0, "cost": 0.0, "unpriced": 0.0})
        row["gpuHours"] += hours
        cost = _money(hours, per_gpu.get(size))
        if cost is None:
            row["unpriced"] += hours
        else:
            row["cost"] += cost
    accounts = sorted(by_account.values(), key=lambda r: -float(r["gpuHours"]))
    for row in accounts:
        row |= {k: round(float(row[k]), 2) for k in ("gpuHours", "cost", "unpriced")}
        row["cost"] = None if row["unpriced"] and not row["cost"] else row["cost"]
    jobs = [
        {"job": job, "account": acct, "gpuHours": round(h, 2), "cost": _money(h, per_gpu.get(size))}
        for h, job, acct, size in sorted(report.top, reverse=True)
    ]
    return {"byAccount": accounts, "costliestJobs": jobs}


def summary(report: Report) -> dict[str, Any]:
    """The split as JSON: GPU-hours per part (with the source records behind it), goodput, problems and cost."""
    seconds: dict[str, float] = defaultdict(float)
    causes: dict[str, float] = defaultdict(float)
    for node in report.nodes.values():
        _sweep(report, node, seconds, causes)
    paid = sum(seconds.values()) / 3600
    per_gpu, unknown = _price(report.nodes)
    parts = {
        p: {"title": TITLES[p], "gpuHours": round(seconds[p] / 3600, 3), "sourceRecords": report.records.get(p, 0)}
        for p in PARTS
    }
    return {
        "period": {
            "start": report.period[0],
            "end": report.period[1],
            "hours": (report.period[1] - report.period[0]) / 3600,
        },
        "nodes": len(report.nodes),
        "gpuHoursPaid": round(paid, 3),
        "goodput": round(seconds["completed"] / 3600 / paid, 4) if paid else None,
        "parts": parts,
        "repairHoldByCause": {c or "(none)": round(s / 3600, 3) for c, s in sorted(causes.items())},
        "problems": {
            kind: {"count": len(found), "first": found[:SHOWN]} for kind, found in sorted(report.problems.items())
        },
        "cost": {"currency": "USD", "unknownPrices": unknown, **_costs(report, per_gpu)},
    }


def text(doc: Mapping[str, Any]) -> list[str]:
    """The report a person reads: goodput, each part, problems by kind, then cost."""
    paid = float(doc["gpuHoursPaid"])
    share = "-" if doc["goodput"] is None else f"{doc['goodput']:.1%}"
    lines = [f"goodput {share}: of {paid:,.1f} GPU-hours paid on {doc['nodes']:,} nodes, where each went"]
    for part in doc["parts"].values():
        pct = f"{part['gpuHours'] / paid:6.1%}" if paid else "     -"
        lines.append(f"  {part['gpuHours']:>14,.1f} {pct}  {part['title']} ({part['sourceRecords']:,} records)")
    lines += [f"    held by the repair loop, {c}: {h:,.1f} GPU-hours" for c, h in doc["repairHoldByCause"].items()]
    for kind, found in doc["problems"].items():
        lines.append(f"  problem {kind} x{found['count']:,}: " + "; ".join(found["first"][:2]))
    cost = doc["cost"]
    for why in cost["unknownPrices"]:
        lines.append(f"  price unknown: {why}")
    for row in cost["byAccount"][:SHOWN]:
        money = "price unknown" if row["cost"] is None else f"{row['cost']:,.2f} {cost['currency']}"
        lines.append(f"  account {row['account']}: {row['gpuHours']:,.1f} GPU-hours in jobs, {money}")
    return lines
