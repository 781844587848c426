"""``gb300 goodput``: a generated month's GPU-hours paid split into parts that add up, each traced to its source
records; bad input (truncated or hostile sacct, unknown nodes, clocks going backwards, overlaps) counted and named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli
from tests.support import goodput_history

PERIOD = ["--since", "2026-11-01T00:00:00Z", "--until", "2026-12-01T00:00:00Z"]


def _run(tmp: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, dict[str, Any]]:
    out = tmp / "report.json"
    args = ["goodput", "--sacct", str(tmp / "sacct.json"), "--nodes", str(tmp / "nodes.json"), *PERIOD]
    code = cli.main([*args, "--heal", str(tmp / "heal.jsonl"), "--json", str(out), *extra])
    printed = capsys.readouterr().out
    return code, printed, json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}


@pytest.fixture(scope="module")
def month(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, goodput_history.Truth]:
    """Four racks over 30 days, jobs of about three hours: a few thousand jobs and a few dozen repairs."""
    where = tmp_path_factory.mktemp("month")
    return where, goodput_history.write(where, racks=4, mean_job_s=3 * 3600)


def test_the_split_adds_up_to_the_gpu_hours_paid(
    month: tuple[Path, goodput_history.Truth], capsys: pytest.CaptureFixture[str]
) -> None:
    """The parts add up to the GPU-hours paid, each part matches the generator's own bookkeeping and the number
    of source records behind it, and the text leads with goodput."""
    where, truth = month
    code, printed, doc = _run(where, capsys)
    assert code == 0, printed
    parts = {name: part["gpuHours"] for name, part in doc["parts"].items()}
    assert sum(parts.values()) == pytest.approx(doc["gpuHoursPaid"], abs=0.01)
    assert doc["gpuHoursPaid"] == pytest.approx(truth.paid, abs=0.01)
    for name, hours in truth.parts.items():
        assert parts[name] == pytest.approx(hours, abs=0.01), name
    for name, count in truth.records.items():
        assert doc["parts"][name]["sourceRecords"] == count, name
    for cause, hours in truth.causes.items():
        assert doc["repairHoldByCause"][cause] == pytest.approx(hours, abs=0.01)
    assert min(parts.values()) >= 0
    assert parts["repairHold"] > 0
    assert parts["unregistered"] > 0
    assert doc["problems"] == {}
    assert printed.startswith(f"goodput {doc['goodput']:.1%}: of {doc['gpuHoursPaid']:,.1f} GPU-hours paid")


def test_unknown_gpu_prices_are_named_not_zero(
    month: tuple[Path, goodput_history.Truth], capsys: pytest.CaptureFixture[str]
) -> None:
    """With the shipped table (no GB300 price) every account's cost is unknown and the report says why."""
    where, _ = month
    _, printed, doc = _run(where, capsys)
    assert doc["cost"]["unknownPrices"][0].startswith("vm/Standard_ND128isr_GB300_v6: not on https://")
    assert doc["cost"]["byAccount"]
    assert all(row["cost"] is None for row in doc["cost"]["byAccount"])
    assert "price unknown: vm/Standard_ND128isr_GB300_v6" in printed
    assert " 0.00 USD" not in printed


def _nodes(tmp: Path, *names: str) -> None:
    rows = [
        {
            "name": n,
            "gpus": 4,
            "vmSize": "Standard_D16ds_v5",
            "paidFrom": "2026-11-01T00:00:00Z",
            "registered": "2026-11-01T00:00:00Z",
        }
        for n in names
    ]
    (tmp / "nodes.json").write_text(json.dumps({"nodes": rows}), encoding="utf-8")


def _job(job_id: int, nodes: str, start: int, end: int, state: str = "COMPLETED") -> str:
    return json.dumps(
        {
            "job_id": job_id,
            "account": "a",
            "nodes": nodes,
            "state": {"current": [state]},
            "time": {"start": start, "end": end},
        }
    )


T0 = 1_793_491_200  # 2026-11-01T00:00:00Z


@pytest.mark.parametrize(
    ("sacct", "kind", "named"),
    [
        (
            '{"jobs":[' + _job(1, "a1", T0, T0 + 3600) + "," + _job(2, "a1", T0 + 9, T0 + 7200)[:30],
            "badSacct",
            "the file ends inside job 2",
        ),
        ('{"jobs":[' + _job(1, "zz9", T0, T0 + 3600) + "]}", "unknownNode", "job 1 on zz9, not a node of the stack"),
        ('{"jobs":[' + _job(1, "a1", T0 + 3600, T0) + "]}", "clockBackwards", "job 1: ends 3600 s before it starts"),
        (
            '{"jobs":[' + _job(1, "a1", T0, T0 + 7200) + "," + _job(2, "a1", T0 + 60, T0 + 3600) + "]}",
            "overlappingRecords",
            "a1: job 1 and job 2 at once",
        ),
        ('{"jobs":[' + _job(1, "a[0-99999999999]", T0, T0 + 60) + "]}", "unreadableJob", "cannot be read"),
        ('{"jobs":' + "[" * 100_000, "badSacct", "nested too deeply"),
        ('{"meta":{}}', "badSacct", 'no "jobs" array'),
    ],
)
def test_bad_input_is_counted_and_named(
    sacct: str, kind: str, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A truncated or hostile sacct file, a job on a node the stack does not have, a clock going backwards and two
    jobs on one node at once are each counted under their kind and named; no traceback, no negative hour."""
    _nodes(tmp_path, "a1", "a2")
    (tmp_path / "sacct.json").write_text(sacct, encoding="utf-8")
    (tmp_path / "heal.jsonl").write_text("", encoding="utf-8")
    code, printed, doc = _run(tmp_path, capsys)
    assert code == 0
    assert doc["problems"][kind]["count"] >= 1
    assert any(named in what for what in doc["problems"][kind]["first"]), doc["problems"]
    assert f"problem {kind} x" in printed
    assert min(p["gpuHours"] for p in doc["parts"].values()) >= 0
    assert sum(p["gpuHours"] for p in doc["parts"].values()) == pytest.approx(doc["gpuHoursPaid"], abs=0.01)


def test_heal_records_going_back_in_time_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A decision record older than the one before it for the same node is skipped and named, and a hold still
    open at the period's end is counted up to the end."""
    _nodes(tmp_path, "a1")
    (tmp_path / "sacct.json").write_text('{"jobs":[]}', encoding="utf-8")
    rows = [("2026-11-02T00:00:00Z", "drain"), ("2026-11-01T12:00:00Z", "returned"), ("x", "reboot")]
    lines = [json.dumps({"TimeGenerated": t, "Node": "a1", "Decision": d}) for t, d in rows] + ["{not json"]
    (tmp_path / "heal.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _, _, doc = _run(tmp_path, capsys)
    assert doc["problems"]["clockBackwards"]["first"] == ["heal record line 2: a1 goes back 43200 s"]
    assert doc["problems"]["unreadableHealRecord"]["count"] == 2
    assert doc["parts"]["repairHold"]["gpuHours"] == pytest.approx(29 * 24 * 4)


def test_a_bad_period_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--until before --since exits 2 with one line naming both."""
    _nodes(tmp_path, "a1")
    code = cli.main(
        [
            "goodput",
            "--sacct",
            "x",
            "--nodes",
            str(tmp_path / "nodes.json"),
            "--since",
            "2026-12-01T00:00:00Z",
            "--until",
            "2026-11-01T00:00:00Z",
        ]
    )
    assert code == 2
    assert "--until 2026-11-01T00:00:00Z must come after --since" in capsys.readouterr().err
