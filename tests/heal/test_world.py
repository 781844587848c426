"""The simulated fleet's Slurm (gb300.heal.world) answers as the real release does (data/slurm_releases.yaml):
what the head reads around a resume."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from gb300 import paths
from gb300.facts import slurm_releases
from gb300.heal.head_slurm import SlurmFeed, SlurmView
from gb300.heal.ports import HealSlurm
from gb300.heal.scenario import parse
from gb300.heal.world import World

NODE = "r0001-00"


def _world(release: str) -> World:
    scenario, _ = parse({"racks": 1, "duration": 600})
    world = World(scenario, release=release)
    world.advance(100.0)
    return world


@pytest.mark.parametrize("release", ["24.11", "25.11", "26.05"])
def test_a_resume_leaves_the_reason_where_the_release_does(release: str) -> None:
    """After drain and resume the record keeps its old reason exactly where the data file says the release does,
    and the head's reader sees no drain either way."""
    world = _world(release)
    slurm = HealSlurm(run=world.slurm)
    slurm.drain([NODE], "gb300-heal: XID 79")
    assert slurm.reason(NODE) == "gb300-heal: XID 79"
    world.advance(200.0)
    slurm.resume([NODE])
    record = slurm.nodes([NODE])[NODE]
    assert (record.reason == "gb300-heal: XID 79") == slurm_releases.shows("reasonKeptAfterResume", release)
    assert not record.drained
    assert slurm.reason(NODE) == ""


@pytest.mark.parametrize("release", ["24.11", "26.05"])
def test_just_after_a_resume_the_node_registers_again_for_the_recorded_moment(release: str) -> None:
    """Right after a resume the node reads NOT_RESPONDING with boot time 0; the recorded number of seconds later it
    answers again; the head's feed, re-reading while time passes, reports nothing."""
    world = _world(release)
    slurm = HealSlurm(run=world.slurm)
    slurm.drain([NODE], "gb300-heal: XID 79")
    slurm.resume([NODE])
    assert slurm.nodes([NODE])[NODE].reregistering
    view = SlurmView(
        slurm,
        world.slurm,
        reread=(3, slurm_releases.not_responding_seconds()),
        sleep=lambda s: world.advance(world.now + s),
    )
    assert [e for e in SlurmFeed(view).poll(world.now) if e.node == NODE] == []
    assert not slurm.nodes([NODE])[NODE].reregistering


def test_a_scheduled_event_drains_as_the_nodes_own_script_does() -> None:
    """The simulated node drains for an announced Scheduled Event with the reason gb300-scheduled-events writes
    (its scontrol line, read from the script), keeps a drain it already had, and resumes its own drain afterwards;
    the head's feed reads neither as evidence."""
    script = (paths.REPO_ROOT / "cloud-init" / "slurm" / "gb300-scheduled-events").read_text(encoding="utf-8")
    template = re.search(r'state=drain reason="([^"]+)"', script)
    assert template is not None
    shape = re.escape(template.group(1).replace("$PREFIX", "gb300-maintenance:"))
    for name, pattern in (("type", r"Reboot"), ("id", r"[0-9A-F-]{36}"), ("not_before", r".+ GMT")):
        shape = shape.replace(re.escape(f"${name}"), pattern)
    raw = {"racks": 1, "duration": 7200, "scheduled": [{"at": 60, "node": "r0001-0[01]", "type": "Reboot"}]}
    world = World(parse(raw)[0])
    HealSlurm(run=world.slurm).drain(["r0001-01"], "a person: cable check")
    world.advance(60.0)
    view = SlurmView(HealSlurm(run=world.slurm), world.slurm)
    assert re.fullmatch(shape, view.reason(NODE))
    assert view.reason("r0001-01") == "a person: cable check"
    starts = world.scheduled[0].starts
    assert datetime.fromtimestamp(starts, UTC).strftime("%d %b %Y %H:%M:%S GMT") in view.reason(NODE)
    assert SlurmFeed(view).poll(60.0) == []
    for now in (starts, starts + world.times["restart"]):
        world.advance(now)
    view.forget()
    assert "DRAIN" not in view.states(NODE)
    assert view.reason("r0001-01") == "a person: cable check"
