"""Shared helpers for the self-healing tests: run a scenario, judge its report against its truth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gb300.heal import scenario, sim

SCENARIOS = Path(__file__).parent / "scenarios"
RUNGS = ("reboot", "reimage", "replace")


def simulate(raw: dict[str, Any] | Path) -> sim.Result:
    """Run a scenario (a mapping or a file) through the real loop on the simulated fleet."""
    parsed = scenario.load(raw) if isinstance(raw, Path) else scenario.parse(raw)
    return sim.run(*parsed)


def misjudged(report: dict[str, Any]) -> list[str]:
    """Nodes the loop got wrong against the truth: not repaired by the least disruptive cure, drained needlessly,
    or a node nothing cures left in service."""
    wrong = []
    for node in report["nodes"]:
        truth, actions = node["truth"], node["actions"]
        rungs = [a for a in actions if a in RUNGS]
        if truth in RUNGS:
            if node["final_state"] != "in-service" or not rungs or rungs[-1] != truth or "return" not in actions:
                wrong.append(f"{node['node']}: truth {truth}, got {actions} ({node['final_state']})")
        elif truth == "none":
            if node["case"] != "escalated" or node["final_state"] != "drained":
                wrong.append(f"{node['node']}: nothing cures it, got {actions} ({node['final_state']})")
        elif "drain" in actions:
            wrong.append(f"{node['node']}: benign ({truth or 'no truth'}), drained: {actions}")
    return wrong


def calls(result: sim.Result, action: str) -> list[str]:
    """The ARM requests of one kind the simulated Azure received (restart, reimage, redeploy, instanceView)."""
    return [c for c in result.world.azure_calls if c.rsplit("/", 1)[-1] == action]
