"""Drains by the loop, by gb300 rollout, by Scheduled Events or by a person never undo one another."""

from __future__ import annotations

from collections.abc import Callable

from gb300.heal import PREFIX, scenario, sim
from gb300.ops.rollout import DRAIN_PREFIX

from .conftest import SCENARIOS


def _run(on_tick: Callable[[sim.World, float], None]) -> sim.Result:
    return sim.run(*scenario.load(SCENARIOS / "gpu-missing.yaml"), on_tick=on_tick)


def test_node_drained_by_the_rollout_is_left_alone() -> None:
    """A node the rollout drained before the loop got to it is not drained again, repaired nor resumed."""

    def rollout_first(world: sim.World, now: float) -> None:
        if now == 0:
            world.slurm(["scontrol", "update", "nodename=r0002-16", "state=drain", f"reason={DRAIN_PREFIX} reimage"])

    result = _run(rollout_first)
    node = result.world.nodes["r0002-16"]
    assert node.drained
    assert node.reason.startswith(DRAIN_PREFIX)
    held = [r for r in result.records if r["Decision"] == "held" and r["Node"] == "r0002-16"]
    assert held
    assert "someone else" in held[0]["Reason"]
    assert not [c for c in result.world.azure_calls if "/virtualMachines/16/" in c]


def test_loop_does_not_resume_a_node_someone_drained_meanwhile() -> None:
    """When a person drains a node during its repair, the loop repairs it but leaves it drained with their reason."""

    def person_drains(world: sim.World, now: float) -> None:
        node = world.nodes["r0001-04"]
        if node.drained and node.reason.startswith(PREFIX) and world.nodes["r0001-04"].boot_time > 0:
            world.slurm(["scontrol", "update", "nodename=r0001-04", "state=drain", "reason=admin: keep out"])

    result = _run(person_drains)
    node = result.world.nodes["r0001-04"]
    assert node.drained
    assert node.reason == "admin: keep out"
    assert "return" not in next(c for c in result.loop.closed if c.node == "r0001-04").actions


def test_loop_drains_carry_its_own_prefix() -> None:
    """Every drain the loop sends carries the gb300-heal: prefix, which neither the gate nor the rollout resumes."""
    seen: list[str] = []

    def watch(world: sim.World, now: float) -> None:
        seen.extend(n.reason for n in world.nodes.values() if n.drained)

    _run(watch)
    assert seen
    assert all(reason.startswith(PREFIX) for reason in seen)
    assert not PREFIX.startswith("gb300:")  # the gate resumes only reasons starting with "gb300:"
