"""Generated scenarios: the same evidence with different cures, so no table tuned to the shipped corpus passes.

:func:`same_evidence` places one evidence pattern per node on random idle nodes and gives each a cure drawn at
random (seeded); :func:`fleet_day` builds a day of a large fleet (faults of every kind, benign bursts, jobs) for
the benchmark; :func:`crash_every_tick` kills the head at every step of every tick of a scenario in turn. All
return scenario mappings that :func:`gb300.heal.scenario.parse` reads.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from gb300.heal.scenario import RACK_SIZE, node_name

# Evidence patterns: (events relative to t0, cures the same evidence may have). A single report of a kind that
# needs corroboration may be transient ("self"); evidence that meets a rule on its own (hard evidence, a count
# reached) is a fault by the rule, so its cures start at reboot.
PATTERNS: dict[str, tuple[list[dict[str, Any]], tuple[str, ...]]] = {
    # XID 79 (RESTART_BM in NVIDIA's catalog): a reimage cannot cure it, so the loop skips that rung.
    "xid-79": ([{"dt": 0, "kind": "xid", "code": 79}], ("reboot", "replace", "none")),
    "xid-48": ([{"dt": 0, "kind": "xid", "code": 48}], ("reboot", "reimage", "replace")),
    "ecc-pending": ([{"dt": 0, "kind": "ecc", "code": "row-remap-pending"}], ("reboot", "reimage", "replace")),
    "ecc-uncorrectable": ([{"dt": 0, "kind": "ecc", "code": "uncorrectable"}], ("reboot", "reimage", "replace")),
    "gpu-missing": ([{"dt": 0, "kind": "gpu-missing"}], ("reboot", "reimage", "replace", "none")),
    "ib-link-down": ([{"dt": 0, "kind": "ib-link-down"}], ("self", "reboot", "reimage", "replace")),
    "ib-flap-3": (
        [{"dt": 0, "kind": "ib-flap"}, {"dt": 2400, "kind": "ib-flap"}, {"dt": 6000, "kind": "ib-flap"}],
        ("reboot", "reimage", "replace"),
    ),
    "nvlink-down": ([{"dt": 0, "kind": "nvlink-down"}], ("self", "reboot", "reimage", "replace")),
    "imex-job": ([{"dt": 0, "kind": "imex-unhealthy"}], ("reboot", "reimage", "replace")),
    "thermal": ([{"dt": 0, "kind": "thermal-throttle"}], ("self", "reboot", "reimage", "replace")),
    "unreachable": ([{"dt": 0, "kind": "unreachable"}], ("self", "reboot", "reimage", "replace")),
    "gate-hard": ([{"dt": 0, "kind": "check-failed", "check": "dcgm-diag"}], ("reboot", "reimage", "replace")),
    "gate-soft": ([{"dt": 0, "kind": "check-failed", "check": "mounts"}], ("self", "reboot", "reimage")),
}


def same_evidence(pattern: str, seed: int, *, racks: int = 4, nodes: int = 6) -> dict[str, Any]:
    """One pattern on ``nodes`` distinct nodes (at most one per rack per hour), each with a random cure."""
    rng = random.Random(f"{pattern}-{seed}")  # noqa: S311 - reproducible scenarios, not secrets
    events_for, cures = PATTERNS[pattern]
    chosen = rng.sample([node_name(r, i) for r in range(1, racks + 1) for i in range(RACK_SIZE)], nodes)
    events: list[dict[str, Any]] = []
    truth: list[dict[str, Any]] = []
    jobs: list[dict[str, Any]] = []
    for n, node in enumerate(chosen):
        t0 = 600 + n * 3600
        for template in events_for:
            event = {k: v for k, v in template.items() if k != "dt"}
            events.append({"at": t0 + template["dt"], "node": node, **event})
        if pattern == "imex-job":  # IMEX counts only under a job: three reports while one runs
            jobs.append({"name": f"job-{n}", "nodes": node, "start": t0 - 60, "end": t0 + 1200})
            events += [{"at": t0 + dt, "node": node, "kind": "imex-unhealthy"} for dt in (300, 600)]
        cure = rng.choice(cures)
        truth.append({"node": node, "cured_by": cure})
        if cure == "self" and pattern == "unreachable":
            truth[-1]["until"] = t0 + 300
    return {"racks": racks, "duration": 600 + nodes * 3600 + 14400, "jobs": jobs, "events": events, "truth": truth}


def crash_every_tick(
    raw: Mapping[str, Any], ticks: Sequence[tuple[float, int]], *, down: float = 0
) -> list[dict[str, Any]]:
    """``raw`` once per crash point of its run: for every tick (its time and its steps, as
    :attr:`gb300.heal.sim.Result.ticks` lists them for a run without crashes), the head dies at each step of that
    tick in turn (``crash-in-tick``: after an Azure answer, after a Slurm write, before a save), back ``down`` s
    later."""
    return [
        {**raw, "head": [{"at": at, "kind": "crash-in-tick", "after": after, "down": down}]}
        for at, steps in ticks
        for after in range(1, steps + 1)
    ]


def fleet_day(racks: int = 64, seed: int = 1, faults: int = 40) -> dict[str, Any]:
    """A simulated day of ``racks`` racks: random faults of every pattern, jobs and their teardown bursts."""
    rng = random.Random(seed)  # noqa: S311 - reproducible scenarios, not secrets
    events: list[dict[str, Any]] = []
    truth: list[dict[str, Any]] = []
    jobs: list[dict[str, Any]] = []
    for j in range(racks // 4):
        first = 4 * j + 1
        start = rng.randrange(0, 20000)
        end = start + rng.randrange(7200, 40000)
        name = f"train-{j}"
        pattern = ",".join(f"r{r:04d}-*" for r in range(first, first + 4))
        jobs.append({"name": name, "nodes": pattern, "start": start, "end": end})
        events.append({"at": end, "node": pattern, "kind": "xid", "code": 45, "context": "job-teardown"})
    used: set[str] = set()
    names = list(PATTERNS)
    for _ in range(faults):
        node = node_name(rng.randrange(1, racks + 1), rng.randrange(RACK_SIZE))
        if node in used:
            continue
        used.add(node)
        pattern = rng.choice([p for p in names if p not in ("imex-job", "unreachable")])
        templates, cures = PATTERNS[pattern]
        t0 = rng.randrange(600, 60000)
        for template in templates:
            event = {k: v for k, v in template.items() if k != "dt"}
            events.append({"at": t0 + template["dt"], "node": node, **event})
        truth.append({"node": node, "cured_by": rng.choice(cures)})
    return {"racks": racks, "duration": 86400, "jobs": jobs, "events": events, "truth": truth}
