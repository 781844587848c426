"""``gb300 usage``: GPU-hours per account and user in a period from ``sacct --json`` (a saved file, standard input, or
sacct run here), priced where the stack's price is known and named where not; bad input counted and named."""

from __future__ import annotations

import io
import json
import random
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli
from gb300.paths import REPO_ROOT
from tests.support.files import FIXTURES

T0 = 1_793_491_200  # 2026-11-01T00:00:00Z
T1 = T0 + 30 * 86400  # 2026-12-01T00:00:00Z
PERIOD = ["--since", "2026-11-01T00:00:00Z", "--until", "2026-12-01T00:00:00Z"]
DEV = REPO_ROOT / "stacks" / "Pulumi.dev.yaml"
SIZE = "Standard_ND128isr_GB300_v6"


def _job(  # noqa: PLR0917 - one sacct record
    job_id: int, account: str, user: str, start: float, end: float, gpus: int | Any, partition: str = "train"
) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "account": account,
        "user": user,
        "partition": partition,
        "nodes": "dev-train-000000",
        "state": {"current": ["RUNNING" if end == 0 else "COMPLETED"], "reason": "None"},
        "time": {"start": int(start), "end": int(end), "elapsed": 0 if end == 0 else int(end - start)},
        "tres": {"allocated": [{"type": "cpu", "name": "", "id": 1, "count": 8}]}
        | ({"allocated": [{"type": "gres", "name": "gpu", "id": 1001, "count": gpus}]} if gpus is not None else {}),
    }


def _write(path: Path, jobs: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"meta": {}, "jobs": jobs, "errors": [], "warnings": []}), encoding="utf-8")
    return path


def _run(
    capsys: pytest.CaptureFixture[str], sacct: Path | str, *extra: str, period: list[str] = PERIOD
) -> tuple[int, str, dict[str, Any]]:
    code = cli.main(["usage", "--sacct", str(sacct), *period, "--json", "-", *extra])
    captured = capsys.readouterr()
    return code, captured.err, json.loads(captured.out) if code == 0 else {}


def _month(seed: int) -> tuple[list[dict[str, Any]], dict[tuple[str, str], float]]:
    """Random jobs of three accounts, some across the period's edges, with the GPU-hours each (account, user) used
    inside the period by the generator's own count."""
    rng = random.Random(seed)  # noqa: S311 - test data, not secrets
    jobs, truth = [], defaultdict(float)
    users = {"team_a": ["alice", "bob"], "team_b": ["carol"], "ops": ["dave", "alice"]}
    for job_id in range(1, 400):
        account = rng.choice(sorted(users))
        user = rng.choice(users[account])
        start = rng.uniform(T0 - 86400, T1 + 3600)
        length = rng.uniform(60, 2 * 86400)
        gpus = rng.choice([4, 8, 72])
        jobs.append(_job(job_id, account, user, start, start + length, gpus))
        inside = min(int(start + length), T1) - max(int(start), T0)  # the record keeps whole seconds
        truth[(account, user)] += gpus * max(0, inside) / 3600
    return jobs, truth


def test_gpu_hours_add_up_per_account_and_user(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each user's GPU-hours in the period (jobs across the edges clipped) match the generator's count, each account
    is the sum of its users, and the total the sum of the accounts."""
    jobs, truth = _month(7)
    code, err, doc = _run(capsys, _write(tmp_path / "sacct.json", jobs))
    assert code == 0, err
    got = {(a["account"], u["user"]): u["gpuHours"] for a in doc["accounts"] for u in a["users"]}
    assert got == pytest.approx({k: round(v, 3) for k, v in truth.items() if v > 0}, abs=0.01)
    for account in doc["accounts"]:
        assert account["gpuHours"] == pytest.approx(sum(u["gpuHours"] for u in account["users"]), abs=0.01)
    assert doc["total"]["gpuHours"] == pytest.approx(sum(a["gpuHours"] for a in doc["accounts"]), abs=0.01)
    assert [a["gpuHours"] for a in doc["accounts"]] == sorted((a["gpuHours"] for a in doc["accounts"]), reverse=True)
    assert doc["problems"] == {}


def test_the_text_names_each_account_and_its_users(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --json the report is one line for the total, one per account and one per user under it."""
    sacct = _write(tmp_path / "sacct.json", [_job(1, "team_a", "alice", T0, T0 + 7200, 8)])
    assert cli.main(["usage", "--sacct", str(sacct), *PERIOD]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("usage 2026-11-01T00:00:00Z to 2026-12-01T00:00:00Z: 16.000 GPU-hours in 1 jobs")
    assert lines[1].startswith("  account team_a: 16.000 GPU-hours, price unknown")
    assert lines[2].startswith("    user alice: 16.000 GPU-hours in 1 jobs")
    assert any("price unknown: partition train: no stack given (--stack)" in line for line in lines)


def test_a_known_price_prices_each_gpu_hour(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With the stack and a price file for its GPU size, cost is GPU-hours times the VM price over the size's GPUs,
    and a job in a partition that is no pool of the stack is priced unknown and named."""
    hourly = 123.45
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        f"currency: USD\nmeters:\n  vm/{SIZE}:\n    price: {{value: {hourly}, status: verified, "
        "source: our agreement}\n",
        encoding="utf-8",
    )
    jobs = [_job(1, "team_a", "alice", T0, T0 + 3600, 8), _job(2, "team_b", "carol", T0, T0 + 3600, 4, "debug")]
    code, err, doc = _run(capsys, _write(tmp_path / "s.json", jobs), "--stack-file", str(DEV), "--prices", str(prices))
    assert code == 0, err
    rows = {a["account"]: a for a in doc["accounts"]}
    assert rows["team_a"]["cost"] == pytest.approx(8 * hourly / 4, abs=0.01)
    assert rows["team_b"]["cost"] is None
    assert rows["team_b"]["unpricedGpuHours"] == 4
    assert doc["unknownPrices"] == ["partition debug: partition 'debug' is no GPU pool of the stack"]


def test_the_shipped_table_names_an_unknown_gpu_price(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With the shipped table, which has no GB300 price, the pool's price is unknown with the table's reason, and
    the cost is null, never 0."""
    sacct = _write(tmp_path / "s.json", [_job(1, "team_a", "alice", T0, T0 + 3600, 8)])
    code, err, doc = _run(capsys, sacct, "--stack-file", str(DEV))
    assert code == 0, err
    assert doc["total"]["cost"] is None
    assert doc["unknownPrices"][0].startswith(f"partition train: vm/{SIZE}: ")


def test_running_pending_and_cpu_only_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A job still running counts to the period's end, a job that never started counts nothing, and a job without
    GPUs is counted apart, not as GPU-hours."""
    jobs = [
        _job(1, "team_a", "alice", T1 - 3600, 0, 4),
        _job(2, "team_a", "bob", 0, 0, 4),
        _job(3, "team_b", "carol", T0, T0 + 3600, None),
    ]
    code, err, doc = _run(capsys, _write(tmp_path / "s.json", jobs))
    assert code == 0, err
    assert doc["total"]["gpuHours"] == 4
    assert [u["user"] for a in doc["accounts"] for u in a["users"]] == ["alice"]
    assert doc["jobsWithoutGpus"] == 1
    assert doc["problems"] == {}


def _text(*jobs: dict[str, Any]) -> str:
    return ",".join(json.dumps(j) for j in jobs)


@pytest.mark.parametrize(
    ("sacct", "kind", "named"),
    [
        (
            '{"jobs":[' + _text(_job(1, "a", "u", T0, T0 + 3600, 4), _job(2, "a", "u", T0, T0 + 60, 4))[:-40],
            "badSacct",
            "the file ends inside job 2",
        ),
        ('{"jobs":[' + _text(_job(1, "a", "u", T0 + 3600, T0, 4)) + "]}", "negativeDuration", "job 1: ends 3600 s"),
        ('{"jobs":[' + _text(_job(1, "a", "u", T0, T0 + 60, -4)) + "]}", "unreadableJob", "job 1: its gres/gpu"),
        ('{"jobs":[' + _text(_job(1, "a", "u", T0, T0 + 60, "4")) + "]}", "unreadableJob", "job 1: its gres/gpu"),
        ('{"jobs":[{"job_id": 7, "time": {"start": "soon"}}]}', "unreadableJob", "job 7: no start time"),
        ('{"jobs":[1, ' + _text(_job(1, "a", "u", T0, T0 + 3600, 4)) + "]}", "badSacct", "element 1 of jobs"),
        ('{"jobs":[' + "[" * 100_000, "badSacct", "nested too deeply"),
    ],
)
def test_bad_records_are_counted_and_named(
    sacct: str, kind: str, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A truncated or hostile file, a job ending before it starts and an unreadable GPU count are counted under their
    kind and named; the readable jobs still count, and no GPU-hour is negative."""
    (tmp_path / "sacct.json").write_text(sacct, encoding="utf-8")
    code, err, doc = _run(capsys, tmp_path / "sacct.json")
    assert code == 0, err
    assert doc["problems"][kind]["count"] >= 1
    assert any(named in what for what in doc["problems"][kind]["first"]), doc["problems"]
    assert min([doc["total"]["gpuHours"], *(a["gpuHours"] for a in doc["accounts"])]) >= 0


def test_a_truncated_file_counts_the_jobs_before_the_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The jobs before a file's cut are counted, and the text names the cut."""
    whole = _text(_job(1, "a", "u", T0, T0 + 3600, 4), _job(2, "a", "u", T0, T0 + 3600, 4))
    (tmp_path / "s.json").write_text('{"jobs":[' + whole[: len(whole) - 20], encoding="utf-8")
    assert cli.main(["usage", "--sacct", str(tmp_path / "s.json"), *PERIOD]) == 0
    out = capsys.readouterr().out
    assert "4.000 GPU-hours in 1 jobs" in out
    assert "problem badSacct x1: the file ends inside job 2" in out


@pytest.mark.parametrize(
    ("content", "named"),
    [
        ('{"meta": {}}', 'no "jobs" array'),
        ("\x00\x01 not json at all", 'no "jobs" array'),
        ('{"jobs": {"a": 1}}', '"jobs" is not an array'),
        (None, "cannot be read"),
    ],
)
def test_unreadable_input_exits_2_on_one_line(
    content: str | None, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Input that is no sacct --json at all (or no file) exits 2 with one line naming it, and prints no report."""
    path = tmp_path / "sacct.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    code = cli.main(["usage", "--sacct", str(path), *PERIOD])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    [line] = captured.err.strip().splitlines()
    assert str(path) in line
    assert named in line


@pytest.mark.parametrize(
    ("period", "named"),
    [
        (["--since", "2026-12-01T00:00:00Z", "--until", "2026-11-01T00:00:00Z"], "must come after --since"),
        (["--since", "last tuesday"], "--since 'last tuesday': must be an ISO 8601 time"),
    ],
)
def test_a_bad_period_exits_2(
    period: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A period that ends before it starts, or a time that is not ISO 8601, exits 2 naming it."""
    code = cli.main(["usage", "--sacct", str(_write(tmp_path / "s.json", [])), *period])
    assert code == 2
    assert named in capsys.readouterr().err


def test_standard_input_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--sacct -`` reads sacct's output piped from the head (``ssh head sacct --json ... | gb300 usage``)."""
    text = json.dumps({"jobs": [_job(1, "team_a", "alice", T0, T0 + 1800, 4)]})
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    code, err, doc = _run(capsys, "-")
    assert code == 0, err
    assert doc["accounts"][0]["gpuHours"] == 2


STANDIN_SACCT = """#!/bin/sh
# stand-in sacct: records its arguments, prints a saved answer (it cannot show slurmdbd; the real-Slurm tests do)
printf '%s\\n' "$@" >"$(dirname "$0")/argv"
cat "$(dirname "$0")/answer.json"
exit "$(cat "$(dirname "$0")/status")"
"""


def _standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: int) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sacct").write_text(STANDIN_SACCT, encoding="utf-8")
    (bin_dir / "sacct").chmod(0o755)
    _write(bin_dir / "answer.json", [_job(1, "team_a", "alice", T0, T0 + 3600, 4)])
    (bin_dir / "status").write_text(str(status), encoding="utf-8")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("TZ", "UTC")
    return bin_dir


def test_without_a_file_sacct_runs_here_for_the_period(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --sacct, usage runs sacct on this machine for every user, every run of a job and the period, and
    reports what it printed."""
    bin_dir = _standin(tmp_path, monkeypatch, 0)
    code = cli.main(["usage", *PERIOD, "--json", "-"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(captured.out)["total"]["gpuHours"] == 4
    argv = (bin_dir / "argv").read_text(encoding="utf-8").split()
    assert {"--json", "--allusers", "--duplicates"} <= set(argv)
    assert "--starttime=2026-11-01T00:00:00" in argv
    assert "--endtime=2026-12-01T00:00:00" in argv


def test_a_failing_or_missing_sacct_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """sacct exiting non-zero exits 2 naming it; no sacct on this machine exits 2 saying where to run or what to
    save."""
    _standin(tmp_path, monkeypatch, 1)
    assert cli.main(["usage", *PERIOD]) == 2
    assert "exited 1" in capsys.readouterr().err
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert cli.main(["usage", *PERIOD]) == 2
    assert "no sacct on this machine" in capsys.readouterr().err


def test_help_describes_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    """``gb300 usage --help`` says what is counted, how it is priced, where the jobs come from and the exit codes."""
    with pytest.raises(SystemExit):
        cli.main(["usage", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("GPU-hours each Slurm account", "tres.allocated", "price unknown", "--sacct", "Exit 0", "2:"):
        assert words in text


@pytest.mark.parametrize("release", ["24.11", "26.05"])
def test_real_sacct_output_of_both_releases(release: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """sacct --json recorded from real Slurm 24.11 and 26.05 (tests/fixtures/slurm/README.md) gives each account
    its jobs' allocated GPUs times their run time, with no problem."""
    recorded = FIXTURES / "slurm" / f"sacct-json.{release}.json"
    jobs = json.loads(recorded.read_text(encoding="utf-8"))["jobs"]
    expected: dict[str, float] = defaultdict(float)
    for job in jobs:
        [gpus] = [t["count"] for t in job["tres"]["allocated"] if t["type"] == "gres" and t["name"] == "gpu"]
        expected[job["account"]] += gpus * (job["time"]["end"] - job["time"]["start"]) / 3600
    since = min(job["time"]["start"] for job in jobs) - 60
    period = ["--since", datetime.fromtimestamp(since, UTC).isoformat(), "--until", "2030-01-01T00:00:00Z"]
    code, err, doc = _run(capsys, recorded, period=period)
    assert code == 0, err
    assert {a["account"]: a["gpuHours"] for a in doc["accounts"]} == pytest.approx(expected, abs=0.001)
    assert set(expected) == {"team_a", "team_b"}
    assert doc["problems"] == {}
