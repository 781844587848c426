"""A simulated day of a 64-rack fleet through the remediation loop (``gb300 heal``), timed: the target is a minute.

Run alone with ``.venv/bin/python bench/heal_bench.py [--racks N] [--seed S] [--repeat R] [--json FILE]``;
``make bench`` runs it after the plan benchmark. The day (``gb300.heal.generate.fleet_day``) has faults of every
evidence pattern with random cures, jobs on groups of four racks and their teardown XID 45 bursts. Reported: wall
time per run (median), simulated events and Azure calls, and whether the loop judged every node right
(the same check the tests make), so a fast run that does the wrong thing does not pass.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

TARGET_WALL_S = 60.0
RUNGS = ("reboot", "reimage", "replace")


def misjudged(report: dict[str, object]) -> int:
    """Nodes not repaired by their least disruptive cure, drained though benign, or left in service though broken."""
    wrong = 0
    for node in report["nodes"]:  # type: ignore[attr-defined]
        truth, actions = node["truth"], node["actions"]
        rungs = [a for a in actions if a in RUNGS]
        if truth in RUNGS:
            wrong += not (node["final_state"] == "in-service" and rungs and rungs[-1] == truth)
        elif truth == "none":
            wrong += node["case"] != "escalated"
        else:
            wrong += "drain" in actions
    return wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--racks", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    from gb300.heal import generate, scenario, sim  # noqa: PLC0415 - after argument errors

    raw = generate.fleet_day(racks=args.racks, seed=args.seed)
    walls = []
    report: dict[str, object] = {}
    for _ in range(args.repeat):
        started = time.perf_counter()
        report = sim.run(*scenario.parse(raw)).report()
        walls.append(time.perf_counter() - started)
    wall = statistics.median(walls)
    wrong = misjudged(report)
    summary = {
        "racks": args.racks,
        "nodes": args.racks * 18,
        "simulatedSeconds": raw["duration"],
        "events": len(raw["events"]),
        "faults": len(raw["truth"]),
        "wallSeconds": round(wall, 3),
        "runs": [round(w, 3) for w in walls],
        "targetWallSeconds": TARGET_WALL_S,
        "drains": report["drains"],
        "falseDrains": report["false_drains"],
        "repaired": report["repaired"],
        "mttrSeconds": report["mttr_seconds"],
        "azureCalls": report["azure_calls"],
        "decisions": report["decisions"],
        "misjudged": wrong,
        "pass": wall < TARGET_WALL_S and wrong == 0,
    }
    print(
        f"heal: a simulated day of {args.racks} racks ({summary['nodes']} nodes, {summary['events']} event lines, "
        f"{summary['faults']} faults): {wall:.2f} s (median of {args.repeat}; target < {TARGET_WALL_S:.0f} s); "
        f"drains {summary['drains']}, false drains {summary['falseDrains']}, repaired {summary['repaired']}, "
        f"misjudged {wrong}, Azure calls {summary['azureCalls']}: {'PASS' if summary['pass'] else 'FAIL'}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0 if summary["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
