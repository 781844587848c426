"""One table of the health gate's checks (gb300.heal.gate_checks): the head reads drain reasons with it, the
simulator writes its gate failures with it, and every check it names is a check of the gate."""

from __future__ import annotations

import pytest

from gb300.facts.loader import data
from gb300.heal import gate_checks
from gb300.heal.head_slurm import gate_events
from gb300.heal.scenario import parse
from gb300.heal.world import World

SHOWN = [c for c in gate_checks.CHECKS if c.shows is not None]
CODES = {"xid": 79, "ecc": "uncorrectable"}


def test_every_check_the_table_names_is_a_check_of_the_gate() -> None:
    """A renamed gate check would leave the table reading a name no drain reason carries."""
    checks = set(data("health.yaml")["defaults"]["checks"])
    assert {c.check for c in gate_checks.CHECKS} <= checks


def test_a_check_the_table_does_not_name_is_judged_by_its_name() -> None:
    [event] = gate_events("n1", "gb300: mounts: /shared not mounted", 10.0)
    assert (event.kind, event.check, event.code) == ("check-failed", "mounts", None)


@pytest.mark.parametrize("row", SHOWN, ids=lambda c: c.check)
def test_what_the_simulator_shows_the_head_reads_back(row: gate_checks.GateCheck) -> None:
    """The gate failure the simulated world writes for a fault is read by the head's own reader as the evidence the
    table names for that check (the XID's code included)."""
    scenario, _ = parse(
        {
            "racks": 1,
            "duration": 600,
            "events": [{"at": 0, "node": "r0001-00", "kind": row.shows, "code": CODES.get(str(row.shows))}],
            "truth": [{"node": "r0001-00", "cured_by": "reboot"}],
        }
    )
    world = World(scenario)
    world.advance(1.0)
    result = world.gate_result("r0001-00")
    assert result is not None
    assert result.startswith(f"fail: {row.check}: ")
    [event] = gate_events("r0001-00", "gb300: " + result.removeprefix("fail: "), 1.0)
    expected = (row.kind, row.code, None if row.kind != "check-failed" else row.check)
    if row.kind == "xid":
        expected = ("xid", "79", None)
    assert (event.kind, event.code, event.check) == expected
