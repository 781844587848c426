"""The heal loop's simulator (gb300.heal.world) against real Slurm: the same short scenario (a gate drain, a drain of
the loop's own, both resumed) run through the simulated world and through a real cluster, read by the head's own
Slurm reader (gb300.heal.head_slurm: the feed's events, the probe's gate verdicts, the drained/down words)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gb300.facts import slurm_releases
from gb300.heal.head_slurm import SlurmFeed, SlurmProbe, SlurmView
from gb300.heal.loop import PREFIX
from gb300.heal.ports import HealSlurm
from gb300.heal.scenario import parse
from gb300.heal.world import World
from gb300.slurm.client import DOWN_STATES, HEALTH_PREFIX, Runner
from gb300.slurm.hostlist import compress
from tests.support.real_slurm.cluster import Cluster

GATE_REASON = f"{HEALTH_PREFIX} gpus: 3 GPUs visible, expected 4"
LOOP_REASON = f"{PREFIX} real-Slurm comparison"

Reading = list[tuple[object, ...]]


@dataclass
class Head:
    """The head's Slurm reader over one world (the simulator's or the real cluster's), hosts known by position."""

    hosts: list[str]
    slurm: HealSlurm
    view: SlurmView
    feed: SlurmFeed
    probe: SlurmProbe

    @classmethod
    def over(cls, hosts: list[str], run: Runner, sleep: Callable[[float], None] = time.sleep) -> Head:
        """The reader as the head builds it (gb300.heal.head): re-reading while a node re-registers after a resume,
        as heal.json's ``slurmReread`` says (gb300.heal.deploy), with ``sleep`` between reads."""
        reread = (3, slurm_releases.not_responding_seconds())
        view = SlurmView(HealSlurm(run=run), run, reread=reread, sleep=sleep)
        return cls(hosts, HealSlurm(run=run), view, SlurmFeed(view), SlurmProbe(view))

    def read(self, now: float) -> Reading:
        """What the head reads, per host position: the feed's events, the probe's verdict, drained, down."""
        self.view.forget()
        events = self.feed.poll(now)
        out: Reading = []
        for index, host in enumerate(self.hosts):
            states = self.view.states(host)
            mine = sorted((e.kind, e.code, e.check) for e in events if e.node == host)
            out.append((index, mine, self.probe.gate_result(host), "DRAIN" in states, bool(states & DOWN_STATES)))
        return out


def _simulated(count: int) -> Head:
    """The head's reader over a one-rack simulated world; the head reads every node (no host argument), the world
    answers for the hosts it is asked about, so the runner names the compared ones, and waiting moves its clock."""
    scenario, _ = parse({"racks": 1, "duration": 600})
    world = World(scenario)
    world.advance(0.0)
    hosts = sorted(world.nodes)[:count]

    def run(argv: Sequence[str]) -> str:
        args = list(argv)
        if args == ["scontrol", "--json", "show", "node"]:
            args.append(compress(hosts))
        return str(world.slurm(args))

    def sleep(seconds: float) -> None:
        world.advance(world.now + seconds)  # the simulated clock moves while the head waits

    return Head.over(hosts, run, sleep)


def _scenario(head: Head, settle: Callable[[], None]) -> list[Reading]:
    """Read; the gate drains host 0 and the loop drains host 1; read; resume both; settle; read."""
    first, second = head.hosts[:2]
    readings = [head.read(1.0)]
    head.slurm.drain([first], GATE_REASON)
    head.slurm.drain([second], LOOP_REASON)
    readings.append(head.read(2.0))
    head.slurm.resume([first, second])
    settle()
    readings.append(head.read(3.0))
    return readings


def _real(cluster: Cluster) -> Head:
    """The head's reader over the real cluster: its commands run on the head, as the heal service runs them."""

    def run(argv: Sequence[str]) -> str:
        return cluster.head.run(list(argv)).stdout

    return Head.over([h.name for h in cluster.nodes[:2]], run)


def test_the_head_reads_real_slurm_as_it_reads_the_simulator(real_cluster: Cluster) -> None:
    """Through a gate drain, a drain of the loop's own and their resume, the head's reader sees the same events,
    gate verdicts and drained/down words from real Slurm (once the nodes answer again) as from the simulator."""
    simulated = _scenario(_simulated(2), lambda: None)
    real = _real(real_cluster)
    names = real.hosts

    def settle() -> None:
        real_cluster.wait("resumed nodes answer", lambda: _settled(real_cluster, names), 30)

    assert _scenario(real, settle) == simulated


def _settled(cluster: Cluster, names: list[str]) -> bool:
    nodes = cluster.slurm().nodes(names)
    return all(not (n.states & (DOWN_STATES | {"DRAIN"})) for n in nodes.values())


def test_the_head_reads_a_node_just_resumed_as_the_simulator_does(real_cluster: Cluster) -> None:
    """Read again and again in the three seconds after a resume (as a tick may fall anywhere in them), real Slurm
    shows the head what the simulator shows: the node neither down nor drained."""
    simulated = _simulated(2)
    real = _real(real_cluster)
    for head in (simulated, real):
        head.slurm.drain(head.hosts[:1], LOOP_REASON)
        head.read(1.0)
        head.slurm.resume(head.hosts[:1])
    expected = simulated.read(2.0)[0][3:]
    deadline = time.monotonic() + 3
    seen = []
    while time.monotonic() < deadline:
        seen.append(real.read(2.0)[0][3:])
        time.sleep(0.05)
    assert set(seen) == {expected}
