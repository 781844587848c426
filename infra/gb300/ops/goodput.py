"""Goodput: of the GPU-hours paid for in a period, where each one went (docs/goodput.md defines every term).

Inputs are saved files: ``sacct --json`` (read one job at a time, :mod:`gb300.ops.sacct_stream`), the repair
loop's decision records (JSON lines, ``gb300.heal.ports.decision_record``) and the node list
(docs/goodput.md#the-node-list: each node's GPUs, when its VM was paid for, when it registered, and the health
gate's drains). Every
paid GPU-second of a node lands in exactly one part, by precedence: not yet registered, then a job (completed;
failed or requeued by a node fault; ended otherwise; still running), then held by the repair loop (by cause),
then drained by the health gate, else idle and schedulable. Bad input is counted and named, never raised, and an
interval that ends before it starts is dropped (never a negative hour).
"""

from __future__ import annotations

import heapq
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gb300.slurm import hostlist

PARTS = ("completed", "nodeFault", "endedOtherwise", "running", "repairHold", "gateDrain", "idle", "unregistered")
JOB_PART = {"COMPLETED": "completed", "NODE_FAIL": "nodeFault", "REQUEUED": "nodeFault", "BOOT_FAIL": "nodeFault"}
RANK = {"unregistered": 0, "completed": 1, "nodeFault": 1, "endedOtherwise": 1, "running": 1, "repairHold": 2}
RANK |= {"gateDrain": 3}
HOLD_START = {"drain", "requeue", "reboot", "reimage", "replace", "guest-health-report", "held", "escalated"}
HOLD_CAUSE = ("replace", "reimage", "reboot", "escalated", "held", "guest-health-report", "drain", "requeue")
HOLD_END = {"returned", "ignore"}
TOP_JOBS = 10  # the costliest jobs the report names
MAX_HOSTS = 100_000  # a hostlist naming more hosts than this is hostile, not a job
_RANGE = re.compile(r"(\d+)-(\d+)")


@dataclass
class Node:
    """One node of the stack: GPUs, the paid interval (epoch seconds) and the intervals by part."""

    name: str
    gpus: int
    paid: tuple[float, float]
    registered: float
    size: str = ""  # the VM size (its price is the node's)
    spans: list[tuple[float, float, str, str]] = field(default_factory=list)  # start, end, part, detail


@dataclass
class Report:
    """The split, its problems and the cost rows."""

    period: tuple[float, float]
    nodes: dict[str, Node]
    problems: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    accounts: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))  # (account, size)
    top: list[tuple[float, str, str, str]] = field(default_factory=list)  # heap: gpu-hours, job, account, size
    records: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # part -> source records

    def problem(self, kind: str, what: str) -> None:
        self.problems[kind].append(what)


def _clip(report: Report, node: Node, start: float, end: float) -> tuple[float, float] | None:
    low, high = max(start, node.paid[0], report.period[0]), min(end, node.paid[1], report.period[1])
    return (low, high) if high > low else None


def add_span(report: Report, node: Node, start: float, end: float, part: str, detail: str) -> None:  # noqa: PLR0917
    """Add a node's interval of ``part`` (clipped to its paid time and the period; nothing when empty)."""
    clipped = _clip(report, node, start, end)
    if clipped is not None:
        node.spans.append((clipped[0], clipped[1], part, detail))


def _hosts(expression: str) -> list[str] | None:
    """The hosts of a hostlist, or None when it would name more than MAX_HOSTS (or cannot be read)."""
    if sum(int(b) - int(a) + 1 for a, b in _RANGE.findall(expression)) > MAX_HOSTS:
        return None
    try:
        return hostlist.expand(expression)
    except ValueError:
        return None


def job_times(job: Mapping[str, Any], period_end: float) -> tuple[float, float] | str:
    """A sacct job's (start, end) in epoch seconds, ``period_end`` as the end of one still running; or why not."""
    raw = job.get("time")
    times: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    start, end = times.get("start"), times.get("end")
    if not isinstance(start, int | float) or isinstance(start, bool) or start <= 0:
        return "no start time"
    if not isinstance(end, int | float) or isinstance(end, bool) or end <= 0:
        return (float(start), period_end)  # still running
    if end < start:
        return f"ends {start - end:.0f} s before it starts"
    return (float(start), float(end))


def _job_part(job: Mapping[str, Any], running: bool) -> str:
    raw = job.get("state")
    state: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    current = state.get("current")
    names = [str(s) for s in current] if isinstance(current, list) else [str(current)]
    if running and "RUNNING" in names:
        return "running"
    return next((JOB_PART[n] for n in names if n in JOB_PART), "endedOtherwise")


def add_job(report: Report, job: Mapping[str, Any]) -> None:
    """One sacct job record: its nodes' time goes to the job's part; problems are counted and named."""
    job_id = str(job.get("job_id", "?"))[:40]
    times = job_times(job, report.period[1])
    if isinstance(times, str):
        report.problem("clockBackwards" if "before" in times else "unreadableJob", f"job {job_id}: {times}")
        return
    hosts = _hosts(str(job.get("nodes") or ""))
    if not hosts:
        report.problem("unreadableJob", f"job {job_id}: nodes {str(job.get('nodes'))[:60]!r} cannot be read")
        return
    raw = job.get("state")
    state: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    part = _job_part(job, running="RUNNING" in (state.get("current") or []))
    account, gpu_hours, size = str(job.get("account") or "(none)")[:80], 0.0, ""
    for host in hosts:
        node = report.nodes.get(host)
        if node is None:
            report.problem("unknownNode", f"job {job_id} on {host}, not a node of the stack")
            continue
        clipped = _clip(report, node, *times)
        if clipped is not None:
            node.spans.append((clipped[0], clipped[1], part, f"job {job_id}"))
            gpu_hours += (clipped[1] - clipped[0]) * node.gpus / 3600
            size = node.size
    report.accounts[(account, size)] += gpu_hours
    entry = (gpu_hours, job_id, account, size)
    (heapq.heappush if len(report.top) < TOP_JOBS else heapq.heappushpop)(report.top, entry)
    report.records[part] += 1


def when(value: Any) -> float | None:
    from datetime import datetime  # noqa: PLC0415

    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def add_heal_records(report: Report, lines: Iterable[str]) -> None:
    """Repair-loop holds from decision records: a node is held from its first hold decision to ``returned``."""
    open_hold: dict[str, tuple[float, str]] = {}
    last: dict[str, float] = {}
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except ValueError:
            report.problem("unreadableHealRecord", f"heal record line {number}: not JSON")
            continue
        at = when(record.get("TimeGenerated")) if isinstance(record, dict) else None
        if not isinstance(record, dict) or at is None:
            report.problem("unreadableHealRecord", f"heal record line {number}: no TimeGenerated")
            continue
        decision, node = str(record.get("Decision", "")), str(record.get("Node", ""))
        if node not in report.nodes:
            if decision in HOLD_START | HOLD_END and node:
                report.problem("unknownNode", f"heal record line {number} about {node[:60]}, not a node of the stack")
            continue
        if at < last.get(node, at):
            report.problem("clockBackwards", f"heal record line {number}: {node} goes back {last[node] - at:.0f} s")
            continue
        last[node] = at
        _hold_step(report, open_hold, node, decision, at)
    for node, (start, cause) in open_hold.items():
        add_span(report, report.nodes[node], start, report.period[1], "repairHold", cause)


def _hold_step(report: Report, open_hold: dict[str, tuple[float, str]], node: str, decision: str, when: float) -> None:
    held = open_hold.get(node)
    if decision in HOLD_START:
        cause = decision if held is None else min(held[1], decision, key=HOLD_CAUSE.index)
        open_hold[node] = (held[0] if held else when, cause)
        report.records["repairHold"] += held is None
    elif decision in HOLD_END and held is not None:
        add_span(report, report.nodes[node], held[0], when, "repairHold", held[1])
        del open_hold[node]
