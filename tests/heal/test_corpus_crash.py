"""The scenario corpus: the head killed at every step of every tick of a scenario, restarting from its saved state."""

from __future__ import annotations

from typing import Any

from gb300.config import stack_yaml
from gb300.heal import generate, scenario, sim
from gb300.heal.ladder import PREFIX

from .conftest import SCENARIOS, misjudged

POLL_S = 300.0  # a coarser tick than the head's 60 s: every tick of the run is crashed in turn, each a whole run
REPAIRS = ("restart", "reimage", "redeploy")


def _run(raw: dict[str, Any]) -> sim.Result:
    return sim.run(*scenario.parse(raw), poll_s=POLL_S)


def _repairs(result: sim.Result) -> dict[str, list[str]]:
    """Per node, the repair calls Azure accepted, in order."""
    out: dict[str, list[str]] = {}
    for entry in result.world.azure_log:
        if entry["call"] in REPAIRS and entry["answer"] == 202:
            out.setdefault(entry["node"], []).append(entry["call"])
    return out


def _orphans(result: sim.Result) -> list[str]:
    """Nodes drained by the loop that its saved state has no case, held rack or escalation for."""
    saved = result.saved
    owned = {c["node"] for c in saved.get("cases", [])} | {
        c["node"] for c in saved.get("closed", []) if c["state"] == "escalated"
    }
    held = set((saved.get("judge") or {}).get("held", {}))
    return [
        name
        for name, node in result.world.nodes.items()
        if node.drained
        and node.reason.startswith(PREFIX)
        and name not in owned
        and f"sim-gpu-r{node.rack:04d}" not in held
    ]


def test_a_head_crash_at_any_tick_repeats_no_repair_and_loses_none() -> None:
    """Killed at each step of each tick in turn (after an Azure answer, after a Slurm write, before a save), the
    head restarts from its saved state: every node gets the same repairs, once each, and the same reports as in
    the run without a crash, ends in the same state (in service or drained), and no node is left drained by the
    loop without a case."""
    raw = stack_yaml.load(SCENARIOS / "head-crash-any-tick.yaml")
    base = _run(raw)
    report = base.report()
    assert misjudged(report) == []
    assert _repairs(base)["r0001-07"] == list(REPAIRS)
    ends = {n["node"]: n["final_state"] for n in report["nodes"]}
    crashed = generate.crash_every_tick(raw, base.ticks)
    assert len(crashed) > len(base.ticks)  # some ticks have several steps: each is a crash point
    for variant in crashed:
        result = _run(variant)
        where = variant["head"][0]
        assert result.crashes == 1, where
        assert _repairs(result) == _repairs(base), where
        assert result.report()["reports"] == report["reports"], where
        assert {n["node"]: n["final_state"] for n in result.report()["nodes"]} == ends, where
        assert _orphans(result) == [], where
