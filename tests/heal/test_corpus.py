"""The shipped scenario corpus and generated scenarios, judged against their truth (issue 30's Done when)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gb300.heal import generate
from gb300.heal.policy import EVENT_KINDS
from gb300.heal.scenario import load

from .conftest import SCENARIOS, misjudged, simulate

CORPUS = sorted(SCENARIOS.glob("*.yaml"))
HALTING = {
    "bad-rollout-halt.yaml",
    "halt-during-revalidation.yaml",
    "halt-freezes-repairs.yaml",
    "resume-too-early.yaml",
}
# Scenarios that end with a person by design (asserted in their own tests below): not judged by misjudged().
TO_A_PERSON = {
    "flapping-xid48.yaml",
    "recurs-after-redeploy.yaml",
    "azure-forbidden.yaml",
    "nvlink-rack-down.yaml",
    "nvlink-xid-rack.yaml",
    "no-capacity.yaml",
    "week-long-job.yaml",  # not a person: its job-bound nodes still wait for their job when the day ends
    "new-host-after-redeploy.yaml",
    "scheduled-events.yaml",  # not a person: Azure's platform events, not the loop, act on its faulty nodes
}


def test_corpus_has_twelve_cases_and_every_event_kind() -> None:
    """At least 12 scenarios ship, and together they use every event kind."""
    assert len(CORPUS) >= 12
    kinds = {e.kind for path in CORPUS for e in load(path)[0].events}
    assert kinds == set(EVENT_KINDS)


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_shipped_scenario(path: Path) -> None:
    """Each faulty node is cured by the least disruptive action that cures it; benign nodes are never drained;
    only the fleet-wide failure halts."""
    report = simulate(path).report()
    assert report["halted"] is (path.name in HALTING)
    assert report["false_drains"] == 0
    if not report["halted"] and path.name not in TO_A_PERSON:
        assert misjudged(report) == []


def test_fleet_wide_failure_halts_before_draining() -> None:
    """A bad rollout hitting 60 of 180 nodes at once halts the loop and drains nothing: it waits for a person."""
    result = simulate(SCENARIOS / "bad-rollout-halt.yaml")
    report = result.report()
    assert report["halted"] is True
    assert report["drains"] == 0
    assert [r for r in result.records if r["Decision"] == "halt"]


def test_benign_bursts_drain_nothing() -> None:
    """Teardown XID 45 bursts, a crashed job's 77 nodes, IMEX on idle nodes and a rack power loss drain no node."""
    for name in ("xid45-teardown-burst", "crashed-nvlink-job", "imex", "rack-power-loss"):
        report = simulate(SCENARIOS / f"{name}.yaml").report()
        benign = [n for n in report["nodes"] if n["truth"] in (None, "self")]
        assert benign, name
        assert all("drain" not in n["actions"] for n in benign), name


@pytest.mark.parametrize("pattern", sorted(generate.PATTERNS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_evidence_different_cures(pattern: str, seed: int) -> None:
    """The same evidence on several nodes with randomly drawn cures: each node still gets exactly its cure."""
    raw = generate.same_evidence(pattern, seed)
    report = simulate(raw).report()
    assert not report["halted"]
    assert misjudged(report) == []


def test_generated_cures_differ_for_the_same_evidence() -> None:
    """The generator really gives one evidence pattern several cures (no one-cure-per-evidence table passes)."""
    cures = {t["cured_by"] for seed in range(3) for t in generate.same_evidence("gpu-missing", seed)["truth"]}
    assert len(cures) >= 3


@pytest.mark.slow
def test_fleet_day_of_64_racks() -> None:
    """A simulated day of 64 racks (faults of every kind, jobs, teardown bursts): every node judged right."""
    report = simulate(generate.fleet_day(racks=64, seed=1)).report()
    assert report["repaired"] > 20
    assert misjudged(report) == []
    assert len(report["blocks"]) == 64


def test_decision_records_carry_evidence() -> None:
    """Every drain is recorded for Azure Monitor with its time, node, rack step and the evidence behind it."""
    result = simulate(SCENARIOS / "ib-flap-rate.yaml")
    drains = [r for r in result.records if r["Decision"] == "drain"]
    assert len(drains) == 1
    record = drains[0]
    assert record["Node"] == "r0001-03"
    assert record["Step"] == "drain"
    assert record["Source"] == "gb300-heal"
    assert len(record["Evidence"]) == 3
    assert all("ib-flap" in e for e in record["Evidence"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", record["TimeGenerated"])
