"""``gb300 goodput`` on arbitrary input: whatever the sacct file, the decision records and the node list hold
(cut short, hostile, unknown nodes, clocks going backwards, overlapping records), the report is written, no part is
negative, the parts add up to the GPU-hours paid and that total is the node list's paid time in the period."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gb300 import cli

T0 = 1_793_491_200  # 2026-11-01T00:00:00Z
DAY = 86_400
PERIOD = (T0, T0 + 3 * DAY)
NAMES = ["a1", "a2", "a3"]
PROPERTY = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

times = st.integers(min_value=T0 - DAY, max_value=T0 + 4 * DAY)
states = st.sampled_from(["COMPLETED", "NODE_FAIL", "REQUEUED", "FAILED", "RUNNING", "CANCELLED", "BOOT_FAIL"])
hosts = st.sampled_from([*NAMES, "a[1-2]", "a[1-3]", "zz9", "", "a[0-99999999999]", "a[3-1]"])
node_rows = st.fixed_dictionaries(
    {
        "name": st.sampled_from(NAMES),
        "gpus": st.integers(min_value=0, max_value=4),
        "paidFrom": times,
        "paidTo": st.one_of(st.none(), times),
        "registered": st.one_of(st.none(), times),
        "gateDrains": st.lists(st.fixed_dictionaries({"start": times, "end": st.one_of(st.none(), times)}), max_size=2),
    }
)
jobs = st.fixed_dictionaries(
    {
        "job_id": st.integers(min_value=1, max_value=10**6),
        "account": st.sampled_from(["a", "b", None]),
        "nodes": hosts,
        "state": st.fixed_dictionaries({"current": st.lists(states, min_size=1, max_size=2)}),
        "time": st.fixed_dictionaries({"start": st.one_of(times, st.just(0)), "end": st.one_of(times, st.just(0))}),
    }
)
decisions = st.sampled_from(["drain", "reboot", "replace", "returned", "ignore", "held", "observe"])
heal_lines = st.lists(
    st.one_of(
        st.builds(
            lambda t, n, d: json.dumps({"TimeGenerated": f"{t}", "Node": n, "Decision": d}),
            st.sampled_from(["2026-11-01T06:00:00Z", "2026-11-02T00:00:00Z", "2026-10-31T00:00:00Z", "x"]),
            st.sampled_from([*NAMES, "zz9"]),
            decisions,
        ),
        st.text(max_size=20),
    ),
    max_size=8,
)


def _paid(rows: list[dict[str, Any]]) -> float:
    """The GPU-hours paid the node list says, worked out here from its rows (the first readable row of a name
    counts; a row whose paid interval ends before it starts is dropped)."""
    total, seen = 0.0, set()
    for row in rows:
        start, end = row["paidFrom"], PERIOD[1] if row["paidTo"] is None else row["paidTo"]
        if end >= start and row["name"] not in seen:
            seen.add(row["name"])
            total += max(0, min(end, PERIOD[1]) - max(start, PERIOD[0])) * row["gpus"] / 3600
    return total


@PROPERTY
@given(
    rows=st.lists(node_rows, max_size=4),
    job_list=st.lists(jobs, max_size=12),
    cut=st.one_of(st.none(), st.integers(min_value=0, max_value=4000)),
    heal=heal_lines,
)
def test_any_input_gives_parts_that_add_up_and_none_negative(  # noqa: PLR0917 - hypothesis passes them by name
    rows: list[dict[str, Any]],
    job_list: list[dict[str, Any]],
    cut: int | None,
    heal: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Random node lists, jobs (some cut short mid-file) and decision records: exit 0, a report, every part at
    least zero, the parts summing to the GPU-hours paid, which equal the node list's paid hours in the period."""
    sacct = json.dumps({"jobs": job_list})
    (tmp_path / "sacct.json").write_text(sacct if cut is None else sacct[:cut], encoding="utf-8")
    (tmp_path / "nodes.json").write_text(json.dumps({"nodes": rows}), encoding="utf-8")
    (tmp_path / "heal.jsonl").write_text("\n".join(heal), encoding="utf-8")
    out = tmp_path / "report.json"
    out.unlink(missing_ok=True)
    code = cli.main(
        [
            "goodput",
            *("--sacct", str(tmp_path / "sacct.json"), "--nodes", str(tmp_path / "nodes.json")),
            *("--heal", str(tmp_path / "heal.jsonl"), "--json", str(out)),
            *("--since", "2026-11-01T00:00:00Z", "--until", "2026-11-04T00:00:00Z"),
        ]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "Traceback" not in printed.err
    doc = json.loads(out.read_text(encoding="utf-8"))
    parts = [part["gpuHours"] for part in doc["parts"].values()]
    assert min(parts) >= 0
    assert sum(parts) == pytest.approx(doc["gpuHoursPaid"], abs=0.01)
    assert doc["gpuHoursPaid"] == pytest.approx(_paid(rows), abs=0.01)
    assert all(hours >= 0 for hours in doc["repairHoldByCause"].values())
    if cut is not None and cut < len(sacct):
        assert "badSacct" in doc["problems"]
