"""The reference stack (64 racks) through the real Pulumi engine and the azure-native double, beside ``gb300 plan``.

Run alone with ``.venv/bin/python bench/engine_bench.py [--stack reference] [--json FILE]``; ``make bench`` runs it.
It needs the engine built from source (``scripts/build-engine``, through ``scripts/ensure-test-tools``) and
Azurite, as the tests in ``tests/engine/`` do, and sets the stack up as they do (``tests/support/engine_stack.py``):
a scratch copy of the checkout, ``pulumi stack init``, the stack file's settings through ``pulumi config set-all``.

Measured, in this order, once each (wall time): ``gb300 plan`` of the same stack file (a fresh interpreter, as a
user runs it); ``pulumi preview --json --policy-pack policies`` of the empty stack; ``pulumi up --yes --policy-pack
policies --suppress-outputs`` (the engine's own preview, then the update, every checkpoint written as it goes);
``pulumi stack export`` of the result: its bytes (the checkpoint), and the state each rack takes: the compact JSON
of every resource under a ``gb300:compute:Rack`` (the rack, its scale set and its logs association: inputs,
outputs and everything the engine keeps beside them), over the number of racks. Issue 48's budget for state per
rack is 10 KB (10,240 bytes): the verdict is printed from the real checkpoint. The double answers in milliseconds,
so the times are the engine's, the program's, the policy pack's and the double's own work, not Azure's.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
STATE_PER_RACK_BUDGET = 10_240
RACK_TYPE = "gb300:compute:Rack"


def _timed(run: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    out = run()
    return out, time.perf_counter() - started


def _plan(stack: str) -> float:
    """Wall seconds of ``gb300 plan --stack-file`` in a fresh interpreter."""
    stack_file = REPO / "stacks" / f"Pulumi.{stack}.yaml"
    gb300 = Path(sys.executable).with_name("gb300")
    proc, wall = _timed(
        lambda: subprocess.run(
            [str(gb300), "plan", "--stack-file", str(stack_file), "--quiet"],
            capture_output=True,
            text=True,
            check=False,
        )
    )
    if proc.returncode not in (0, 1):  # 1: findings, still a plan
        raise SystemExit(f"gb300 plan failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return float(wall)


def rack_state(exported: dict[str, Any]) -> dict[str, Any]:
    """Bytes of compact JSON of every resource under a rack component (the component included), by type."""
    by_type: collections.Counter[str] = collections.Counter()
    racks = 0
    for resource in exported["deployment"]["resources"]:
        if RACK_TYPE not in resource["urn"]:
            continue
        racks += resource["type"] == RACK_TYPE
        by_type[resource["type"]] += len(json.dumps(resource, separators=(",", ":")).encode())
    total = sum(by_type.values())
    return {"racks": racks, "bytes": total, "perRack": total / max(racks, 1), "byType": dict(by_type)}


def _pulumi(made: Any, *args: str) -> tuple[str, float]:
    proc, wall = _timed(lambda: made.pulumi(*args, timeout=3600))
    if proc.returncode != 0:
        raise SystemExit(f"pulumi {' '.join(args)} failed:\n{made.output(proc)}")
    return str(proc.stdout), float(wall)


def measure(stack: str) -> dict[str, Any]:
    sys.path.insert(0, str(REPO))
    from tests.support import engine_stack  # noqa: PLC0415 - the checkout's test support, on sys.path now

    report: dict[str, Any] = {"stack": stack, "planWall": _plan(stack)}
    with tempfile.TemporaryDirectory(prefix="engine-bench-") as tmp:
        made = engine_stack.open_stack(Path(tmp), stack)
        try:
            report["resources"] = len(made.plan.resources)
            _, report["previewWall"] = _pulumi(made, "preview", "--json", "--policy-pack", "policies")
            _, report["upWall"] = _pulumi(made, "up", "--yes", "--policy-pack", "policies", "--suppress-outputs")
            exported, _ = _pulumi(made, "stack", "export")
        finally:
            made.close()
    report["checkpointBytes"] = len(exported.encode())
    report["rackState"] = rack_state(json.loads(exported))
    per_rack = report["rackState"]["perRack"]
    report["verdicts"] = {
        "state-per-rack": {
            "value": per_rack,
            "target": f"state per rack in the real checkpoint <= {STATE_PER_RACK_BUDGET:,} bytes (issue 48)",
            "met": per_rack <= STATE_PER_RACK_BUDGET,
        }
    }
    return report


def render(report: dict[str, Any]) -> str:
    rs = report["rackState"]
    lines = [
        f"{report['stack']} stack through the real engine and the azure-native double "
        f"({rs['racks']} racks, {report['resources']} resources registered)",
        "",
        f"  {'gb300 plan (wall)':<42} {report['planWall']:10.1f} s",
        f"  {'pulumi preview --policy-pack (wall)':<42} {report['previewWall']:10.1f} s",
        f"  {'pulumi up --policy-pack (wall)':<42} {report['upWall']:10.1f} s",
        f"  {'checkpoint (pulumi stack export)':<42} {report['checkpointBytes']:10,} B",
        f"  {'state per rack (compact JSON)':<42} {rs['perRack']:10,.0f} B",
    ]
    lines += [f"    {t:<64} {b / max(rs['racks'], 1):10,.0f} B" for t, b in sorted(rs["byType"].items())]
    lines += ["", "targets"]
    for name, v in report["verdicts"].items():
        lines.append(f"  {'MET ' if v['met'] else 'MISS'} {name:<26} {v['value']:10,.2f}  ({v['target']})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--stack", default="reference", help="a shipped stack (default: reference, 64 racks)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results here")
    args = parser.parse_args(argv)
    report = measure(args.stack)
    print(render(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0 if all(v["met"] for v in report["verdicts"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
