"""``gb300 heal simulate``: the real :class:`~gb300.heal.loop.Remediator` against a simulated fleet and clock.

The world (:class:`gb300.heal.world.World`) reads the scenario's ``truth`` to decide what each action cures; the
loop never sees it. The loop reaches the world only through the channels of :mod:`gb300.heal.ports`: Slurm command
lines (answered by :meth:`~gb300.heal.world.World.slurm`), Azure over HTTP (azure-mgmt-compute's client on
:class:`gb300.heal.fake_arm.FakeArm`), gate results in the gate's own ``boot.result`` format, KVP pool bytes,
nccl-tests output taken from the repository's fixtures and judged by ``examples/nccl-eval.py``, and fabric identity
lines parsed by ``gb300.slurm.topology``.

The clock jumps from one thing to the next (an event, a due recheck, an action finishing), stepping by the loop's
poll interval only while it has work, so a simulated day of 64 racks takes seconds.

Every step runs :func:`gb300.heal.state.run_tick`, the function ``gb300-heal tick`` runs on the head: a fresh loop
opened from the state as the head's file holds it (:class:`gb300.heal.state.MemoryStore`: encoded and decoded as
the head's :func:`~gb300.heal.state.save` and :func:`~gb300.heal.state.load` do), so every scenario exercises the
head's restore path. What it cannot show: the head's own Slurm adapters' memory (:mod:`gb300.heal.head_slurm`'s
feed and NCCL runs, saved beside the loop's state on the head) is the world's here, and the disk (atomic rename,
fsync, the lock) is left out.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gb300.config.remediation import RemediationSettings
from gb300.facts import catalog
from gb300.facts.loader import data
from gb300.heal import fake_arm, summary
from gb300.heal import policy as heal_policy
from gb300.heal import state as heal_state
from gb300.heal.azure_calls import AzureRepairs, RackRef
from gb300.heal.loop import Remediator
from gb300.heal.nccl import nccl_eval
from gb300.heal.ports import HealSlurm, decision_record
from gb300.heal.scenario import RACK_SIZE, Scenario, match
from gb300.heal.world import World
from gb300.slurm.health import health_env_for
from gb300.slurm.hostlist import compress

SUBSCRIPTION = "00000000-0000-0000-0000-00000000cafe"
RESOURCE_GROUP = "sim-gpu-rg"
VM_SIZE = "Standard_ND128isr_GB300_v6"


class _HeadCrash(BaseException):
    # Not an Exception: the loop's `except Exception` must not catch it; the head's process dies.
    """The head dies (scenario ``head``): right after an Azure call returned, before it saves (``crash-after-call``),
    or at the ``after``-th step of a tick (``crash-in-tick``)."""

    def __init__(self, down: float) -> None:
        super().__init__(f"head down for {down:.0f}s")
        self.down = down


def compute_client_for(world: World, answered: Callable[[], None] = lambda: None) -> Any:
    """``subscription -> ComputeManagementClient`` whose HTTP goes to the world (:mod:`gb300.heal.fake_arm`);
    ``answered()`` runs once each call is answered (where the simulated head may die)."""

    def answer(method: str, path: str, body: Any) -> fake_arm.Answer:
        reply = world.arm(method, path, body)
        answered()
        return reply

    return fake_arm.compute_client_for(answer)


@dataclass
class _Store(heal_state.MemoryStore):
    """The head's state file; ``before()`` runs before each save (where the simulated head may die)."""

    before: Callable[[], None] = lambda: None
    previous: str | None = None  # the text before the last save

    def save(self, doc: Mapping[str, Any]) -> None:
        self.before()
        self.previous = self.text
        super().save(doc)


def nccl_env() -> dict[str, str]:
    """health.env for the simulated VM size, read back with nccl-eval's own reader."""
    text = health_env_for(VM_SIZE, soft_failures_to_drain=3, nvme_mount="/mnt/resource_nvme", mounts=())
    with tempfile.NamedTemporaryFile("w", suffix=".env", delete=False) as handle:
        handle.write(text)
    try:
        env: dict[str, str] = nccl_eval().read_env(Path(handle.name))
    finally:
        Path(handle.name).unlink()
    return env


@dataclass
class Result:
    """A finished simulation: the report (:meth:`report`), the loop, the world, and the state the head saved last
    (what ``gb300-heal status`` would read)."""

    scenario: Scenario
    loop: Remediator
    world: World
    records: list[Mapping[str, Any]]
    wall_s: float
    crashes: int = 0
    saved: dict[str, Any] = field(default_factory=dict)
    ticks: list[tuple[float, int]] = field(default_factory=list)  # each tick's time and its steps (a crash's `after`)

    def report(self) -> dict[str, Any]:
        every: dict[str, list[Any]] = {}
        for case in [*self.loop.closed, *self.loop.cases.values()]:
            every.setdefault(case.node, []).append(case)
        touched = set(every) | self.world.reported() | set(self.world.faults)
        truth = {n: s for t in self.scenario.truth for n in match(t.node, self.scenario.nodes) for s in [t.cured_by]}
        timeline, azure = summary.states(self.records), summary.azure(self.world.azure_log)
        nodes: list[dict[str, Any]] = []
        for name in sorted(touched):
            node = self.world.nodes[name]
            cases = every.get(name, [])
            last = cases[-1] if cases else None
            state = "drained" if node.drained else ("unreachable" if self.world.unreachable(name) else "in-service")
            nodes.append(
                {
                    "node": name,
                    "final_state": state,
                    "actions": [a for c in cases for a in c.actions],
                    "case": last.state if last else None,
                    "cases": len(cases),
                    "escalated": any(c.state == "escalated" for c in cases),
                    "truth": truth.get(name),
                    "states": timeline.get(name, []),
                    "azure": azure.get(name, []),
                }
            )
        drained = [str(n["node"]) for n in nodes if "drain" in n["actions"]]
        returned = [c for c in self.loop.closed if c.state == "returned" and c.ended is not None]
        mttr = statistics.median(c.ended - c.first_evidence for c in returned) if returned else None  # type: ignore[operator]
        incidents = sorted({str(r["Rack"]) for r in self.records if r["Decision"] == "rack-incident"})
        node_of = {i.resource_id: h for h, i in self.loop.instances.items()}
        return {
            "summary": summary.headline(self.records, self.world.azure_log, self.loop.halted),
            "racks": self.scenario.racks,
            "duration": self.scenario.duration,
            "nodes": nodes,
            "drains": len(drained),
            "false_drains": sum(1 for n in drained if truth.get(n) in (None, "self")),
            "repaired": len(returned),
            "escalated": sum(1 for n in nodes if n["escalated"]),
            "rack_incidents": incidents,
            "azure_refusals": self.world.refusals,
            "azure_failed_operations": self.world.failed_operations,
            "head_crashes": self.crashes,
            "mttr_seconds": mttr,
            "halted": self.loop.halted,
            "blocks": [{"name": b.name, "nodes": compress(b.hosts), "count": len(b.hosts)} for b in self.loop.blocks],
            "decisions": len(self.records),
            "azure_calls": len(self.world.azure_calls),
            "guest_health_reports": len(self.world.reports),
            "reports": summary.reports(self.world.reports, node_of),
            "wall_seconds": round(self.wall_s, 3),
        }


@dataclass
class _Head:
    """The simulated head: what it builds a loop from every tick, and where it keeps its state."""

    world: World
    scenario: Scenario
    poll_s: float
    racks: list[RackRef]
    records: list[Mapping[str, Any]]
    azure: AzureRepairs
    policy: heal_policy.Policy
    store: _Store
    env: dict[str, str]
    block_size: int
    relist_s: float
    crashes: int = 0
    down_until: float = -1.0
    due: list[Any] = field(default_factory=list)  # the scenario's head crashes still to come
    armed: tuple[int, float] | None = None  # crash-in-tick: (the step it dies at, how long it stays down)
    steps: int = 0  # steps of the tick under way: Azure answers, Slurm writes, saves
    ticks: list[tuple[float, int]] = field(default_factory=list)

    def step(self) -> None:
        """One thing the tick did that reaches the world; the head dies here at an armed ``crash-in-tick``."""
        self.steps += 1
        if self.armed is not None and self.steps >= self.armed[0]:
            down, self.armed = self.armed[1], None
            raise _HeadCrash(down)

    def answered(self) -> None:
        """An Azure call was answered: a step, and where a due ``crash-after-call`` kills the head."""
        self.step()
        if self.due and self.due[0].kind == "crash-after-call" and self.due[0].at <= self.world.now:
            raise _HeadCrash(float(self.due.pop(0).down))

    def slurm(self, argv: Sequence[str]) -> str:
        out = self.world.slurm(argv)
        if list(argv[:2]) in (["scontrol", "update"], ["scontrol", "requeue"]):
            self.step()
        return out

    def fresh(self) -> Remediator:
        world = self.world
        return Remediator(
            policy=self.policy,
            racks=self.racks,
            azure=self.azure,
            slurm=HealSlurm(run=self.slurm),
            probe=world,
            nccl=world,
            feed=world,
            topology_port=world,
            sink=self.records.append,
            cluster="sim",
            nccl_env=self.env,
            block_size=self.block_size,
            poll_s=self.poll_s,
        )

    def tick(self, loop: Remediator, now: float) -> Remediator:
        """One tick of a fresh loop from the saved state, as ``gb300-heal tick``; a crash leaves the state the
        head saved last (before its first Slurm write, its intent before an Azure call), restored by the next tick,
        and its feed reads again what it read since."""
        blocks = loop.blocks  # what the head last wrote to its topology view (a file on the head)
        loop, self.steps = self.fresh(), 0
        if self.due and self.due[0].kind == "crash-in-tick" and self.due[0].at <= now:
            spec = self.due.pop(0)
            self.armed = (spec.after, float(spec.down))

        def opened(fresh: Remediator) -> None:
            fresh.blocks = fresh.blocks or blocks

        try:
            heal_state.run_tick(
                loop, self.store, self.store.load(), self.racks, now=now, relist_s=self.relist_s, opened=opened,
                extra=lambda: {"simFeed": self.world.cursor},
            )  # fmt: skip
            if self.armed is not None:  # fewer steps than `after`: it dies before its last save is written
                self.store.text, down, self.armed = self.store.previous, self.armed[1], None
                raise _HeadCrash(down)
        except _HeadCrash as crash:
            loop = self._crashed(loop, now, crash)
        self.ticks.append((now, self.steps))
        return loop

    def _crashed(self, loop: Remediator, now: float, crash: _HeadCrash) -> Remediator:
        """The head died: it is down ``crash.down`` seconds (the timer's next tick at the earliest); its feed reads
        again what it read since its last save."""
        self.crashes += 1
        self.down_until = now + max(crash.down, self.poll_s)  # back at the timer's next tick at the earliest
        self.records.append(decision_record(now=now, cluster="sim", decision="head-crash", reason=str(crash)))
        saved = self.store.load()
        self.world.rewind(int(saved.get("simFeed", 0)))
        blocks, loop = loop.blocks, self.fresh()
        loop.blocks = blocks
        heal_state.open_loop(loop, saved, self.racks, now, float("inf"))
        return loop


def _head(scenario: Scenario, settings: RemediationSettings, world: World, poll_s: float) -> _Head:
    policy = heal_policy.load(settings)
    head = _Head(
        world=world,
        scenario=scenario,
        poll_s=poll_s,
        racks=[RackRef(f"sim-gpu-r{r:04d}", SUBSCRIPTION, RESOURCE_GROUP) for r in range(1, scenario.racks + 1)],
        records=[],
        azure=AzureRepairs(compute_client_for(world), policy.ghr_api_version),
        policy=policy,
        store=_Store(),
        env=nccl_env(),
        block_size=catalog.load().sku(VM_SIZE).vms_per_nvlink_domain,
        relist_s=float(data("remediation.yaml")["service"]["relistSeconds"]),
        due=sorted(scenario.head, key=lambda h: h.at),
    )
    head.azure = AzureRepairs(compute_client_for(world, head.answered), policy.ghr_api_version)
    head.store.before = head.step
    return head


def run(
    scenario: Scenario,
    settings: RemediationSettings,
    *,
    poll_s: float = 60.0,
    on_tick: Callable[[World, float], None] | None = None,
) -> Result:
    """Run the loop over the scenario's duration; the same code the head runs, on simulated channels.

    Every tick opens a fresh loop from the saved state and saves it back, as ``gb300-heal tick`` does
    (:func:`gb300.heal.state.run_tick`); the loop saves its intent before each Azure call, so a ``head:
    crash-after-call`` restores exactly what the head would read after it. ``on_tick(world, now)`` runs before each
    tick: what others do meanwhile (a person, ``gb300 rollout``).
    """
    started = time.perf_counter()
    world = World(scenario)
    head = _head(scenario, settings, world, poll_s)
    operator = sorted(scenario.operator, key=lambda o: o.at)
    loop = head.fresh()
    now = 0.0
    while now <= scenario.duration:
        world.advance(now)
        while operator and operator[0].at <= now:
            _operate(world, head.store, operator.pop(0), now)
        if on_tick is not None:
            on_tick(world, now)
        if now >= head.down_until:
            loop = head.tick(loop, now)
        candidates = [world.next_change(), loop.next_due(), head.down_until]
        if loop.busy() and not loop.halted:
            candidates.append(now + poll_s)
        upcoming = [t for t in candidates if t is not None and t > now]
        if not upcoming:
            break
        now = min(upcoming)
    wall_s = time.perf_counter() - started
    return Result(scenario, loop, world, head.records, wall_s, head.crashes, head.store.load(), head.ticks)


def _operate(world: World, store: heal_state.MemoryStore, action: Any, now: float) -> None:
    """What a person does (scenario ``operator``): ``gb300-heal resume`` on the saved state, as the head's command."""
    saved = store.load()
    if action.kind == "resume" and saved.get("halted"):
        heal_state.mark_resumed(saved, now=now, by="operator", reason="scenario operator resume")
        store.save(saved)
    elif action.kind == "request":
        for host in match(action.node, list(world.nodes)):
            world.request(host, action.action, now)


__all__ = ["RACK_SIZE", "Result", "World", "compute_client_for", "run"]
