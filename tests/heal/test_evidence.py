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
        (Event(0, "r0001-00", "xid", "79", job="j"), "act"),  # the same-job rule is for teardown artifacts only
        (Event(0, "r0001-00", "xid", "45", job="j"), "ignore"),  # mid-job: the application's (catalog)
        (Event(0, "r0001-00", "xid", "121"), "ignore"),  # corrected C2C: no action (catalog)
        (Event(0, "r0001-00", "xid", "5" * 5000), "ignore"),  # not an XID: never reaches int()
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


def test_hard_xids_under_one_job_are_each_the_nodes() -> None:
    """XID 79 (off the bus) on three nodes of one job: three node faults, acted on at once; the same-job rule is
    only for what NVIDIA's catalog calls a teardown artifact (XID 45), which is never a drain on its own."""
    j = judge()
    verdicts = [j.observe(Event(100, node, "xid", "79", job="big")) for node in ("r0001-01", "r0001-02", "r0002-03")]
    assert [v.decision if v else None for v in verdicts] == ["act", "act", "act"]
    assert not j.pending


def test_catalog_buckets_are_nvidias() -> None:
    """Each XID's bucket is NVIDIA's catalog's: 79 restarts the machine, 48 and 95 need a GPU reset (a reboot),
    121 and 13 need nothing from the node."""
    assert POLICY.xid_bucket(79) == "restartMachine"
    assert POLICY.xid_bucket(95) == "resetGpu"
    assert POLICY.xid_bucket(121) == "noAction"
    assert POLICY.xid_bucket(13) == "restartApp"
    assert POLICY.xid_bucket(45) == "teardownArtifact"


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
