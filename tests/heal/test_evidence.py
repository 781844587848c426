"""Evidence rules, one event at a time: what acts at once, what waits, what is ignored (data/remediation.yaml)."""

from __future__ import annotations

import pytest

from gb300.config.remediation import RemediationSettings
from gb300.heal import Event, Judge, parse_gate_result
from gb300.heal.policy import load

POLICY = load(RemediationSettings())


def judge() -> Judge:
    return Judge(POLICY, rack_of=lambda host: host[:5], rack_size=lambda host: 18)


@pytest.mark.parametrize(
    ("event", "decision"),
    [
        (Event(0, "r0001-00", "xid", "79"), "act"),
        (Event(0, "r0001-00", "xid", "13"), "ignore"),
        (Event(0, "r0001-00", "xid", "45", context="job-teardown", job="j"), "ignore"),
        (Event(0, "r0001-00", "xid", "79", job="j"), None),  # settles first: peers of the same job?
        (Event(0, "r0001-00", "ecc", "row-remap-pending"), "act"),
        (Event(0, "r0001-00", "gpu-missing"), "act"),
        (Event(0, "r0001-00", "check-failed", check="dcgm-diag"), "act"),
        (Event(0, "r0001-00", "check-failed", check="mounts"), None),
        (Event(0, "r0001-00", "imex-unhealthy"), "ignore"),
        (Event(0, "r0001-00", "imex-unhealthy", job="j"), None),
        (Event(0, "r0001-00", "ib-flap"), None),
        (Event(0, "r0001-00", "unreachable"), None),
    ],
    ids=lambda v: v.describe() if isinstance(v, Event) else str(v),
)
def test_single_event(event: Event, decision: str | None) -> None:
    """One report alone: a fault acts, a warning or idle IMEX is ignored, the rest waits for more or a recheck."""
    verdict = judge().observe(event)
    assert (verdict.decision if verdict else None) == decision


def test_ib_flap_rate_rule() -> None:
    """Three flaps within three hours act; three spread over five hours do not."""
    j = judge()
    assert [j.observe(Event(t, "r0001-01", "ib-flap")) for t in (0, 3000)] == [None, None]
    verdict = j.observe(Event(9000, "r0001-01", "ib-flap"))
    assert verdict is not None
    assert verdict.decision == "act"
    spread = judge()
    assert [spread.observe(Event(t, "r0001-02", "ib-flap")) for t in (0, 9000, 18000)] == [None, None, None]


def test_same_xid_on_many_nodes_of_a_job_is_the_jobs() -> None:
    """XID 79 on three nodes of one job settles as the job's fault; on one node it is the node's."""
    j = judge()
    for node in ("r0001-01", "r0001-02", "r0002-03"):
        assert j.observe(Event(100, node, "xid", "79", job="big")) is None
    j.observe(Event(100, "r0003-04", "xid", "79", job="small"))
    verdicts = {p.node: j.settle(p).decision for p in j.due(100 + POLICY.settle_s)}
    assert verdicts == {"r0001-01": "ignore", "r0001-02": "ignore", "r0002-03": "ignore", "r0003-04": "act"}


def test_half_a_rack_unreachable_is_an_incident() -> None:
    """Nine of eighteen nodes unreachable within the window is one rack incident; their rechecks are dropped."""
    j = judge()
    for i in range(9):
        j.observe(Event(10 + i, f"r0002-{i:02d}", "unreachable"))
    assert j.rack_incidents(20) == ["r0002"]
    assert not [p for p in j.pending.values() if p.key == "unreachable"]


@pytest.mark.parametrize(
    ("text", "passed", "checks"),
    [
        ("pass\n", True, []),
        ("fail: gpus: 3 GPUs visible, expected 4; xid: XID 79\n", False, ["gpus", "xid"]),
        ("gb300: ib: mlx5_ib1 Down\n", False, ["ib"]),
        (None, False, ["unreachable"]),
        ("garbage", False, ["gate"]),
    ],
)
def test_gate_result_formats(text: str | None, passed: bool, checks: list[str]) -> None:
    """The gate's boot.result and last.result lines parse to a verdict naming each failed check."""
    result = parse_gate_result(text)
    assert result.passed is passed
    assert [c for c, _ in result.failures] == checks
