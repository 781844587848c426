"""``gb300 goodput`` over a simulated 30-day history of a 64-rack cluster, timed: the targets are 30 s and 1 GiB.

Run alone with ``.venv/bin/python bench/goodput_bench.py [--racks N] [--jobs J] [--keep DIR]``; ``make bench`` runs
it after the heal benchmark. The history (``tests/support/goodput_history.py``) is written first (not timed): about
``--jobs`` two-node jobs in ``sacct --json`` form, the repair loop's decision records and the node list. Then
``gb300 goodput`` runs in a child process, and the bench reports its wall time, its peak memory (the child's
``ru_maxrss``), the file sizes, and whether the split adds up to the GPU-hours paid and matches the generator's
bookkeeping (a fast run that gives a wrong split does not pass).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_WALL_S = 30.0
TARGET_RSS_MIB = 1024.0
REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=64)
    parser.add_argument("--jobs", type=int, default=1_000_000, help="about this many jobs in the month")
    parser.add_argument("--keep", type=Path, help="write the history here and keep it")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from tests.support import goodput_history  # noqa: PLC0415 - the checkout's test support, on sys.path now

    where = args.keep or Path(tempfile.mkdtemp(prefix="goodput-bench-"))
    where.mkdir(parents=True, exist_ok=True)
    pairs = args.racks * goodput_history.NODES_PER_RACK // 2
    # A pair is in a job 60% of its steps; a gap averages 1,800 s: choose the mean job so the month holds ~jobs.
    steps = args.jobs / 0.6 / pairs
    mean_job = max(60.0, (goodput_history.DAYS * 86400 / steps - 0.4 * 1800) / 0.6)
    began = time.perf_counter()
    truth = goodput_history.write(where, racks=args.racks, mean_job_s=mean_job)
    generated = time.perf_counter() - began
    out = where / "report.json"
    command = [sys.executable, "-m", "gb300.cli", "goodput", "--nodes", str(where / "nodes.json")]
    command += ["--sacct", str(where / "sacct.json"), "--heal", str(where / "heal.jsonl"), "--json", str(out)]
    command += ["--since", "2026-11-01T00:00:00Z", "--until", "2026-12-01T00:00:00Z"]
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - began
    rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
        return 1
    doc = json.loads(out.read_text(encoding="utf-8"))
    parts = sum(p["gpuHours"] for p in doc["parts"].values())
    right = abs(parts - doc["gpuHoursPaid"]) < 0.01 * len(doc["parts"]) and all(
        abs(doc["parts"][k]["gpuHours"] - v) < 0.05 for k, v in truth.parts.items()
    )
    size = (where / "sacct.json").stat().st_size
    print(
        f"goodput bench: {args.racks} racks, {truth.jobs:,} jobs ({size / 2**20:,.0f} MiB of sacct --json, "
        f"generated in {generated:.1f} s): {wall:.1f} s (target {TARGET_WALL_S:g}), peak {rss_mib:,.0f} MiB "
        f"(target {TARGET_RSS_MIB:g}); split adds up and matches the generator: {right}; problems: "
        f"{ {k: v['count'] for k, v in doc['problems'].items()} }"
    )
    return 0 if right and wall < TARGET_WALL_S and rss_mib < TARGET_RSS_MIB else 1


if __name__ == "__main__":
    sys.exit(main())
