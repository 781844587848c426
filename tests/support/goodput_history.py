"""A generated month of a cluster for ``gb300 goodput``: the node list, ``sacct --json`` and the repair loop's
decision records, with the split the generator knows to be true (its own bookkeeping, not gb300's sweep).

Nodes come in pairs that run two-node jobs (``r01-n[01-02]``, so the hostlist is read); each pair's timeline is a
sequence of jobs and idle gaps from its registration on, and a node's repair-loop holds and health-gate drains sit
in the gaps (never under a job), so each GPU-second has one true part. Some racks start paid before they register
(a rack added mid-month). The job states mix completions, node failures, requeues, failures and cancellations; a
pair's last job may still run at the period's end. The shape of a job is the part of data_parser v0.0.42's
``sacct --json`` job gb300 reads, plus the fields around it (``tests/slurm/real/test_accounting.py`` checks the
real one), so the benchmark reads records of realistic size.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

START = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
DAYS = 30
NODES_PER_RACK = 18
GPUS = 4
SIZE = "Standard_ND128isr_GB300_v6"
STATES = (("COMPLETED", 80), ("NODE_FAIL", 5), ("REQUEUED", 3), ("FAILED", 7), ("CANCELLED", 5))
PART = {"COMPLETED": "completed", "NODE_FAIL": "nodeFault", "REQUEUED": "nodeFault", "RUNNING": "running"}
CAUSES = ("reboot", "reimage", "replace")


@dataclass
class Truth:
    """The generator's own bookkeeping: GPU-hours per part, holds per cause, and records per part."""

    paid: float = 0.0
    parts: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    causes: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    records: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    jobs: int = 0


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def _job(  # noqa: PLR0917 - one sacct record
    job_id: int, hosts: str, start: float, end: float, state: str, account: str
) -> dict[str, Any]:
    running = state == "RUNNING"
    return {
        "account": account,
        "allocation_nodes": 2,
        "cluster": "gb300",
        "job_id": job_id,
        "name": f"train-{job_id}",
        "nodes": hosts,
        "partition": "train",
        "user": f"{account}-user",
        "state": {"current": [state], "reason": "None"},
        "exit_code": {"status": ["SUCCESS" if state == "COMPLETED" else "ERROR"], "return_code": {"number": 0}},
        "time": {
            "elapsed": 0 if running else int(end - start),
            "eligible": int(start) - 60,
            "end": 0 if running else int(end),
            "start": int(start),
            "submission": int(start) - 120,
            "limit": {"set": True, "infinite": False, "number": 1440},
        },
        "tres": {"allocated": [{"type": "gres", "name": "gpu", "id": 1001, "count": 2 * GPUS}]},
    }


def _gap(  # noqa: PLR0917 - one gap of one node
    rng: random.Random, node: str, t: float, length: float, truth: Truth, heal: list[tuple[float, str, str]]
) -> dict[str, Any] | None:
    """Sometimes a repair-loop hold (decision records) or a gate drain (node list) inside an idle gap of one node."""
    roll = rng.random()
    if roll < 0.02 and length > 600:
        cause = rng.choice(CAUSES)
        heal += [(t + 60, node, "suspect"), (t + 120, node, "drain"), (t + 180, node, cause)]
        heal.append((t + length - 60, node, "returned"))
        truth.parts["repairHold"] += (length - 180) * GPUS / 3600
        truth.causes[cause] += (length - 180) * GPUS / 3600
        truth.records["repairHold"] += 1
    elif roll < 0.03 and length > 600:
        truth.parts["gateDrain"] += (length - 300) * GPUS / 3600
        truth.records["gateDrain"] += 1
        return {"start": _iso(t + 150), "end": _iso(t + length - 150), "reason": "gb300-gate: nccl"}
    return None


@dataclass
class Month:
    """What one generation writes: the truth, the heal records (time, node, decision) and the node rows."""

    truth: Truth = field(default_factory=Truth)
    heal: list[tuple[float, str, str]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    next_id: int = 1000
    mean_job: float = 3600.0


def _pair(  # noqa: PLR0917 - one pair's timeline
    rng: random.Random, month: Month, names: tuple[str, str], hosts: str, start: float, out: TextIO
) -> None:
    """One pair of nodes: jobs and gaps from ``start`` (registration) to the period's end."""
    end, t, truth = START + DAYS * 86400, start, month.truth
    rows = {n: {"name": n, "gpus": GPUS, "vmSize": SIZE, "gateDrains": []} for n in names}
    mean_job = month.mean_job
    while t < end:
        if rng.random() < 0.6:
            length = float(max(60, int(rng.expovariate(1 / mean_job))))
            state = rng.choices([s for s, _ in STATES], [w for _, w in STATES])[0]
            if t + length >= end:
                state, length = "RUNNING", end - t
            part = PART.get(state, "endedOtherwise")
            job = _job(month.next_id, hosts, t, t + length, state, f"team-{month.next_id % 7}")
            out.write(("," if truth.jobs else "") + json.dumps(job, separators=(",", ":")))
            month.next_id += 1
            truth.jobs += 1
            truth.parts[part] += length * 2 * GPUS / 3600
            truth.records[part] += 1
        else:
            length = min(float(max(60, int(rng.expovariate(1 / 1800)))), end - t)
            for name in names:
                drain = _gap(rng, name, t, length, truth, month.heal)
                rows[name]["gateDrains"] += [drain] if drain else []  # type: ignore[operator]
        t += length
    month.nodes += rows.values()


def write(directory: Path, *, racks: int, mean_job_s: float, seed: int = 52) -> Truth:
    """Write ``nodes.json``, ``sacct.json`` and ``heal.jsonl`` for ``racks`` racks over 30 days; the truth."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible month, not secrets
    month = Month(mean_job=mean_job_s)
    end = START + DAYS * 86400
    with (directory / "sacct.json").open("w", encoding="utf-8") as out:
        out.write('{"meta":{"plugin":{"data_parser":"data_parser/v0.0.42"}},"jobs":[')
        for rack in range(1, racks + 1):
            paid = START if rack % 8 else START + 3 * 86400  # every eighth rack is added three days in
            registered = paid + rng.randrange(6 * 3600)
            for n in range(1, NODES_PER_RACK + 1, 2):
                names = (f"r{rack:02d}-n{n:02d}", f"r{rack:02d}-n{n + 1:02d}")
                hosts = f"r{rack:02d}-n[{n:02d}-{n + 1:02d}]"
                first = len(month.nodes)
                _pair(rng, month, names, hosts, registered, out)
                for row in month.nodes[first:]:
                    row |= {"paidFrom": _iso(paid), "registered": _iso(registered)}
            month.truth.parts["unregistered"] += (registered - paid) * NODES_PER_RACK * GPUS / 3600
            month.truth.paid += (end - paid) * NODES_PER_RACK * GPUS / 3600
        out.write('],"errors":[],"warnings":[]}')
    (directory / "nodes.json").write_text(json.dumps({"nodes": month.nodes}), encoding="utf-8")
    with (directory / "heal.jsonl").open("w", encoding="utf-8") as out:
        for when, node, decision in sorted(month.heal):
            record = {"TimeGenerated": _iso(when), "Cluster": "gb300", "Source": "gb300-heal", "Decision": decision}
            out.write(json.dumps(record | {"Node": node, "Rack": node[:3], "Reason": decision}) + "\n")
    month.truth.parts["idle"] = month.truth.paid - sum(v for k, v in month.truth.parts.items() if k != "idle")
    return month.truth
