"""Usage and fair share between two accounts on real slurmctld, slurmdbd and MariaDB (Debian trixie 24.11, sid
26.05): ``gb300 usage`` reads the real ``sacct --json`` of both releases (saved, and run by gb300 itself), and after
one account has used the cluster a pending job of the other account starts first."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.real_slurm.cluster import Cluster
from tests.support.real_slurm.fixtures import cluster_fixture
from tests.support.real_slurm.root import SUITES

pytestmark = pytest.mark.slow

STEP = "/usr/local/lib/gb300/steps/gb300-slurm-accounts.sh"
GB300 = Path(os.environ.get("VIRTUAL_ENV") or Path(__file__).resolve().parents[3] / ".venv") / "bin" / "gb300"
USERS = {"alice": "team_a", "carol": "team_b"}
SLURM: dict[str, Any] = {
    "accounts": [
        {"name": "team_a", "users": ["alice"], "fairshare": 1},
        {"name": "team_b", "users": ["carol"], "fairshare": 1},
    ],
    # Test-only settings, not the product's (data/slurm_priority.yaml keeps a week's half-life and Slurm's 5-minute
    # period): the priority thread adds finished jobs' usage and recomputes fair share every minute (its least).
    "settings": {"PriorityCalcPeriod": "1", "PriorityDecayHalfLife": "1-0"},
}
ALICE_SECONDS = 20  # team_a's job: every GPU of both nodes for this long
CAROL_SECONDS = 3  # team_b's job: two GPUs asked, the whole (exclusive) node allocated


def _sbatch(cluster: Cluster, user: str, *args: str) -> str:
    argv = ["sbatch", "--parsable", "--output=/dev/null", "--chdir=/", f"--account={USERS[user]}", *args]
    return cluster.head.run(["runuser", "-u", user, "--", *argv]).stdout.strip()


def _state(cluster: Cluster, job: str) -> str:
    return cluster.head.run(["squeue", "-h", "-j", job, "-o", "%T"], check=False).stdout.strip()


def _finished(cluster: Cluster, jobs: list[str]) -> bool:
    out = cluster.head.run(["sacct", "-nP", "-X", "-j", ",".join(jobs), "-o", "state"], check=False).stdout
    return len(out.split()) == len(jobs) and all(s == "COMPLETED" for s in out.split())


@pytest.fixture(scope="module", params=list(SUITES), ids=[f"{s}-{v}" for s, v in SUITES.items()])
def used_cluster(request: pytest.FixtureRequest) -> Iterator[tuple[Cluster, float]]:
    """The dev stack with two accounts of equal share (accounting on), alice and carol on every host, after alice
    (team_a) held every GPU for a while and carol (team_b) one node for a moment; with when the jobs were sent."""
    for cluster in cluster_fixture(request, overrides={"slurm": SLURM}, accounting=True):
        for host in [cluster.head, *cluster.nodes]:
            for uid, user in enumerate(USERS, 5101):
                host.run(["useradd", "--uid", str(uid), "--no-create-home", "--shell", "/bin/bash", user])
        cluster.head.run(["bash", STEP], timeout=300)
        since = time.time() - 60
        pool = cluster.files.pool
        gpus = cluster.nodes[0].gpus
        alice = _sbatch(
            cluster, "alice", f"--partition={pool}", "-N2", f"--gres=gpu:{gpus}", f"--wrap=sleep {ALICE_SECONDS}"
        )
        carol = _sbatch(cluster, "carol", f"--partition={pool}", "-N1", "--gres=gpu:2", f"--wrap=sleep {CAROL_SECONDS}")
        jobs = [alice, carol]
        cluster.wait("both jobs finished, in slurmdbd", lambda c=cluster, j=jobs: _finished(c, j), 120)
        yield cluster, since


def _sacct_text(cluster: Cluster, since: float) -> dict[str, float]:
    """GPU-hours per (account, user) from sacct's parsable text (elapsed seconds x gres/gpu of AllocTRES): the same
    records through another of sacct's outputs."""
    start = datetime.fromtimestamp(since, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    argv = ["sacct", "-nP", "-X", "--allusers", "--duplicates", f"--starttime={start}"]
    out = cluster.head.run(["env", "TZ=UTC", *argv, "-o", "account,user,elapsedraw,alloctres"]).stdout
    hours: dict[str, float] = defaultdict(float)
    for line in out.splitlines():
        account, user, elapsed, tres = line.split("|")
        gpus = next((int(t.split("=")[1]) for t in tres.split(",") if t.startswith("gres/gpu=")), 0)
        hours[f"{account}/{user}"] += gpus * int(elapsed) / 3600
    return hours


def _usage(argv: list[str], env: dict[str, str] | None = None) -> dict[str, float]:
    done = subprocess.run(
        [str(GB300), "usage", *argv, "--json", "-"], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["problems"] == {}, doc["problems"]
    return {f"{a['account']}/{u['user']}": u["gpuHours"] for a in doc["accounts"] for u in a["users"]}


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_usage_reads_a_saved_sacct_json_of_this_release(used_cluster: tuple[Cluster, float], tmp_path: Path) -> None:
    """``sacct --json`` saved on the head gives each account's and user's GPU-hours as sacct's own text reports
    them, and team_a's exceed team_b's."""
    cluster, since = used_cluster
    saved = cluster.head.run(["sacct", "--json", "--allusers", "--duplicates", "--starttime=now-3600"]).stdout
    (tmp_path / "sacct.json").write_text(saved, encoding="utf-8")
    got = _usage(["--sacct", str(tmp_path / "sacct.json"), "--since", _iso(since)])
    expected = _sacct_text(cluster, since)
    assert got == pytest.approx({k: round(v, 3) for k, v in expected.items()}, abs=0.002)
    assert set(got) == {"team_a/alice", "team_b/carol"}
    assert got["team_a/alice"] > got["team_b/carol"] > 0


def test_usage_runs_sacct_itself_on_the_head(used_cluster: tuple[Cluster, float], tmp_path: Path) -> None:
    """Run where ``sacct`` is the head's (a wrapper entering the head), gb300 usage's own sacct command line is
    accepted by this release and gives the same GPU-hours as the saved file."""
    cluster, since = used_cluster
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    enter = " ".join(shlex.quote(word) for word in cluster.head.enter())
    (bin_dir / "sacct").write_text(f'#!/bin/sh\nexec {enter} TZ=UTC sacct "$@"\n', encoding="utf-8")
    (bin_dir / "sacct").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TZ": "UTC"}
    got = _usage(["--since", _iso(since)], env)
    expected = _sacct_text(cluster, since)
    assert got == pytest.approx({k: round(v, 3) for k, v in expected.items()}, abs=0.002)


def _fairshare(cluster: Cluster) -> dict[str, float]:
    """Each user association's fair-share factor, by account (sshare -a)."""
    out = cluster.head.run(["sshare", "-nPa", "-o", "account,user,fairshare"]).stdout
    return {a.strip(): float(f) for a, u, f in (line.split("|") for line in out.splitlines()) if u in USERS and f}


def _under_served(factors: dict[str, float]) -> bool:
    return factors.get("team_a", 1.0) < factors.get("team_b", 0.0)


def test_fair_share_starts_the_under_served_accounts_job_first(used_cluster: tuple[Cluster, float]) -> None:
    """Once the priority thread has counted team_a's use, a team_b job sent after a team_a job, both waiting for the
    whole pool, has the higher priority (squeue's %Q) and starts first when the pool frees."""
    cluster, _ = used_cluster
    cluster.wait(
        "team_a's fair share falls below team_b's",
        lambda: _under_served(_fairshare(cluster)),
        150,
    )
    pool, gpus = cluster.files.pool, cluster.nodes[0].gpus
    whole = (f"--partition={pool}", "-N2", f"--gres=gpu:{gpus}", "--wrap=sleep 30")
    blocker = _sbatch(cluster, "alice", *whole[:-1], "--wrap=sleep 600")
    first = second = ""
    try:
        cluster.wait("the blocker holds the pool", lambda: _state(cluster, blocker) == "RUNNING")
        first = _sbatch(cluster, "alice", *whole)
        second = _sbatch(cluster, "carol", *whole)
        out = cluster.head.run(["squeue", "-h", "-j", f"{first},{second}", "-o", "%i|%Q"]).stdout
        priority = {job.strip(): int(value) for job, value in (line.split("|") for line in out.splitlines())}
        assert priority[second] > priority[first], out
        cluster.head.run(["scancel", blocker])
        cluster.wait("one of the two jobs runs", lambda: "RUNNING" in (_state(cluster, first), _state(cluster, second)))
        assert _state(cluster, second) == "RUNNING"
        assert _state(cluster, first) == "PENDING"
    finally:
        cluster.head.run(["scancel", *(j for j in (blocker, first, second) if j)], check=False)
