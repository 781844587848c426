"""The remediation loop: evidence in, the fleet rails around the repair ladder (docs/self-healing.md).

:class:`Remediator` is driven by ``tick(now)``: the head calls it on a timer, the simulator on its clock, both
through :func:`gb300.heal.state.run_tick`. It judges evidence (:class:`~gb300.heal.evidence.Judge`), holds racks
whose NVLink domain failed, asks the rails (:class:`~gb300.heal.rails.Rails`) whether to halt and which queued
case may start, and moves each case up the ladder it extends (:class:`~gb300.heal.ladder.Ladder`). A node drained
by anyone but the health gate is left alone. The topology is rebuilt from the nodes' fabric identities after every
drain and return.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gb300.heal.azure_calls import AzureRepairs, Instance, RackRef
from gb300.heal.case import Case, file_report, recurrence
from gb300.heal.evidence import Event, Judge, Verdict, checked_host, parse_gate_result, xid_code
from gb300.heal.ladder import PREFIX, Ladder
from gb300.heal.policy import RUNGS, Policy
from gb300.heal.ports import EventFeed, HealSlurm, NcclRunner, NodeProbe, Sink, TopologyPort, decision_record
from gb300.heal.rails import Rails
from gb300.slurm import topology
from gb300.slurm.client import HEALTH_PREFIX


@dataclass
class Remediator(Ladder):
    """The loop. Build it with the ports, call :meth:`start` once, then :meth:`tick` on every timer."""

    policy: Policy
    racks: Sequence[RackRef]
    azure: AzureRepairs
    slurm: HealSlurm
    probe: NodeProbe
    nccl: NcclRunner
    feed: EventFeed
    topology_port: TopologyPort
    sink: Sink
    cluster: str
    nccl_env: dict[str, str]
    block_size: int = topology.DEFAULT_BLOCK_SIZE
    poll_s: float = 60.0
    cases: dict[str, Case] = field(default_factory=dict)
    closed: list[Case] = field(default_factory=list)
    rails: Rails | None = None
    instances: dict[str, Instance] = field(default_factory=dict)
    blocks: tuple[topology.Block, ...] = ()
    unknown_hosts: bool = False
    shadow: bool = False
    persist: Callable[[], None] | None = None
    _judge: Judge | None = None

    # -------------------------------------------------------------------------------------------------
    # Set-up and the tick

    def __post_init__(self) -> None:
        self.shadow = self.shadow or self.policy.shadow
        self.rails = self.rails or Rails(self.policy)

    def start(self, now: float) -> None:
        """List the racks' VMs in Azure, then rebuild the topology."""
        instances: dict[str, Instance] = {}
        for rack in self.racks:
            for instance in self.azure.instances(rack):
                instances[instance.host] = instance
        self.adopt(instances)
        self._refresh_topology(now)

    def relist(self, known: Mapping[str, Instance], racks: Sequence[RackRef], now: float) -> None:
        """List again only ``racks`` (those with a repair under way) and keep the other racks' VMs as ``known``."""
        names = {r.name for r in racks}
        instances = {h: i for h, i in known.items() if i.rack.name not in names}
        for rack in racks:
            for instance in self.azure.instances(rack):
                instances[instance.host] = instance
        self.adopt(instances)
        self._refresh_topology(now)

    def adopt(self, instances: Mapping[str, Instance]) -> None:
        """Take ``instances`` as the racks' VMs (Azure's listing, or the one the state saved) and judge with them."""
        self.instances = dict(instances)
        sizes: dict[str, int] = {}
        for instance in self.instances.values():
            sizes[instance.rack.name] = sizes.get(instance.rack.name, 0) + 1
        self._judge = Judge(self.policy, self._rack_name, lambda host: sizes.get(self._rack_name(host), 0))

    @property
    def rail(self) -> Rails:
        if self.rails is None:
            raise RuntimeError("Remediator built without rails")
        return self.rails

    @property
    def halted(self) -> bool:
        """Whether the halt rail stopped the loop (until a person resumes it)."""
        return self.rail.halted

    @property
    def judge(self) -> Judge:
        if self._judge is None:
            raise RuntimeError("Remediator.start() must run before the loop ticks")
        return self._judge

    def _observe(self, now: float) -> None:
        """Judge the events that arrived since the last tick; one that cannot be judged is skipped and logged."""
        for event in self.feed.poll(now):
            if event.node not in self.instances:
                self.unknown_hosts = True  # a new VM, or not ours: the next tick lists the racks again
                self._record(now, "ignore", f"{event.node} is not a node of this cluster", node=event.node)
                continue
            try:
                verdict = self.judge.observe(event)
            except Exception as exc:  # noqa: BLE001 - one bad record is skipped and logged, never the whole tick
                self.record_bad(now, event.node, f"{type(exc).__name__}: {exc}")
                continue
            if verdict is not None:
                self._verdict(verdict, now)

    def record_bad(self, now: float, host: str, why: str) -> None:
        """A record the loop could not read: skipped this tick, logged (the tick goes on for every other node)."""
        self._record(now, "skip", f"unreadable record skipped: {why}", node=host)

    def _rack_hosts(self, rack: str) -> list[str]:
        return [h for h, i in self.instances.items() if i.rack.name == rack]

    def _rack_name(self, host: str) -> str:
        instance = self.instances.get(host)
        return instance.rack.name if instance else ""

    def busy(self) -> bool:
        """Whether the next tick has work even with no new event (the clock may skip ahead otherwise)."""
        return bool(self.cases or self.judge.pending or self.judge.incidents)

    def next_due(self) -> float | None:
        """The earliest time waiting evidence is due, if any."""
        return min((p.due for p in self.judge.pending.values()), default=None)

    def tick(self, now: float) -> None:
        self._observe(now)
        for rack in self.judge.rack_incidents(now):
            self._record(now, "rack-incident", "much of the rack is unreachable at once: held for a person", rack=rack)
        self._fabric(now)
        for item in self.judge.due(now):
            gate = parse_gate_result(self.probe.gate_result(item.node))
            self._verdict(self.judge.recheck(item, gate), now)
        self._incidents(now)
        self._check_halt(now)
        for case in [c for c in self.cases.values() if c.intent is not None]:
            self._reconcile(case, now)  # after the halt check: a halted loop sends no call it had only meant to make
        if self.halted:
            self._finish_runs(now)
            return
        if self.rail.rejudge:
            self._rejudge(now)
        self._admit(now)
        for case in list(self.cases.values()):
            if self.halted:
                break  # halted again mid-tick (a resume too early): no further call this tick
            self._advance(case, now)

    # -------------------------------------------------------------------------------------------------
    # Verdicts, rails

    def _verdict(self, verdict: Verdict, now: float) -> None:
        if verdict.decision != "act":
            self._record(now, "ignore", verdict.reason, node=verdict.node, evidence=verdict.evidence)
            return
        case = self.cases.get(verdict.node)
        request = next((str(e.code) for e in verdict.evidence if e.kind == "request"), None)
        if case is not None:
            case.evidence.extend(verdict.evidence)
            if request is not None:
                self._requested(case, request, now)
            return
        if request is None:
            self.rail.fault(now, verdict.node)  # a person's request is no fault evidence for the halt rail
        first = min(e.at for e in verdict.evidence) if verdict.evidence else now
        case = Case(verdict.node, self.instances[verdict.node], "queued", first, verdict.reason, list(verdict.evidence))
        case.since = now  # queued since
        codes = [xid_code(e.code) for e in verdict.evidence if e.kind == "xid"]
        if any(c is not None and self.policy.xid_bucket(c) == "restartMachine" for c in codes):
            case.skip = ["reimage"]  # a new OS disk cannot bring a GPU back onto the bus (RESTART_BM)
        self.cases[verdict.node] = case
        self._record(now, "suspect", verdict.reason, node=verdict.node, evidence=verdict.evidence)
        if request is not None:
            case.request = request
            case.rung = RUNGS.index(request) - 1  # the ladder starts at the rung the person asked for
        else:
            self._remember(case, now)

    def _remember(self, case: Case, now: float) -> None:
        """A node back within the memory window (``memory.windowSeconds``): the second recurrence, or a return after
        a redeploy, goes to a person once the node is drained, not up the ladder again."""
        case.escalate = recurrence(self.closed, case.node, now, self.policy.memory_s)
        if case.escalate:
            self._record(now, "recurrence", case.escalate, node=case.node, evidence=case.evidence)

    def _rejudge(self, now: float) -> None:
        """After a person resumed a halted loop: racks noted while halted are judged again, and queued cases whose
        node's gate passes now are dropped."""
        self.rail.rejudge = False
        for rack in list(self.judge.held):
            nodes = self.slurm.nodes(self._rack_hosts(rack)).values()
            if not any(n.drain_reason.startswith(PREFIX) for n in nodes):
                # Noted while halted, never drained: let go, so a fabric still down is held again, and counted again.
                self.judge.held.pop(rack, None)
                self.judge.fabric.pop(rack, None)
                self._record(now, "rack-recovered", "noted while halted, never drained: judged again", rack=rack)
        for case in [c for c in self.cases.values() if c.state == "queued"]:
            gate = parse_gate_result(self.probe.gate_result(case.node))
            if gate.passed:
                self._dismiss(case, now, "judged again after the resume: the gate passes now")
        self.rail.on_probation(c.node for c in self.cases.values() if c.state == "queued")

    def _may_start(self, case: Case) -> bool:
        return self.rail.may_start(self.cases.values(), case)

    def _probed(self, case: Case, passed: bool, now: float) -> bool:
        why = self.rail.probe(case.node, passed)
        if why is not None:
            self._record(now, "halt", why)
        return self.halted

    def _straggler(self, case: Case, host: str, now: float) -> None:
        """Bisection after ``case``'s repair found ``host`` slow in the rack's NCCL runs though its gate passes: a case
        of its own (fault evidence for the rails), which climbs the ladder as any other; it, not ``case``'s node,
        is what the failed revalidation counts against."""
        if host in self.cases or host not in self.instances:
            return
        event = Event(now, host, "nccl-slow", context=f"bisection after the repair of {case.node}")
        why = f"slow in the rack NCCL runs (found by bisection after the repair of {case.node}); its gate passes"
        slow = Case(host, self.instances[host], "queued", now, why, [event])
        slow.since = now
        self.cases[host] = slow
        self.rail.fault(now, host)
        self._record(now, "suspect", why, node=host, evidence=[event])
        self._remember(slow, now)

    def _fabric(self, now: float) -> None:
        """Racks whose NVLink domain just failed count toward the halt rail first: many at once halt the loop,
        and a halted loop drains none of them and files no report (a person looks at the fabric)."""
        racks = self.judge.fabric_incidents(now)
        for rack in racks if not self.shadow else []:
            self.rail.held(now, rack)
        self._check_halt(now)
        for rack in racks:
            if self.halted:
                why = f"rack {rack}: NVLink domain incident while halted: not drained, no report; a person must look"
                self._record(now, "rack-incident", why, rack=rack, hosts=self._rack_hosts(rack))
            else:
                self._hold_rack(rack, now)

    def _hold_rack(self, rack: str, now: float) -> None:
        """NVLink trouble on most of one rack: the domain, not 18 node faults. The whole rack is drained as one
        block (its nodes share the broken domain), its open cases end without another Azure call, one Guest Health
        Report in the NVLink category names the rack's first reporting node, and a person is asked."""
        hosts = self._rack_hosts(rack)
        for case in [c for c in self.cases.values() if c.instance.rack.name == rack]:
            self._close(case, "held", now, f"rack {rack} held as one NVLink incident: no repair node by node")
        if self.shadow:
            self._record(now, "rack-incident", f"shadow mode: would hold rack {rack}", rack=rack, hosts=hosts)
            self.judge.held.pop(rack, None)  # nothing is held: the rack's later evidence is still judged and recorded
            self.judge.fabric.pop(rack, None)
            return
        free = [h for h in hosts if not (r := self.slurm.reason(h)) or r.startswith((PREFIX, HEALTH_PREFIX))]
        if free:
            self.slurm.drain(free, f"{PREFIX} rack {rack}: NVLink domain incident, held for a person")
        reason = (
            f"NVLink evidence on {len(self.judge.fabric.get(rack, {}))} of {len(hosts)} nodes: the rack's NVLink "
            "domain is held out of service as one block; a person must look (NVLink category report)"
        )
        self._record(now, "rack-incident", reason, rack=rack, hosts=hosts)
        first = min(self.judge.fabric.get(rack, {}).items(), key=lambda item: item[1], default=None)
        if first is not None and self.policy.guest_health_report:
            node = first[0]
            incident = Case(node, self.instances[node], "held", now, reason, [Event(now, node, "nvlink-down")])
            incident.physical_host = self._physical_host(node)
            self._report(incident, now)
        self._refresh_topology(now)

    def _incidents(self, now: float) -> None:
        """A held rack is let go once all its nodes answer the gate again."""
        for rack, since in list(self.judge.incidents.items()):
            if now - since < self.poll_s * 5:
                continue
            if all(self.probe.gate_result(h) is not None for h in self._rack_hosts(rack)):
                self.judge.clear_incident(rack)
                self._record(now, "rack-recovered", "every node of the rack answers again", rack=rack)

    def _check_halt(self, now: float) -> None:
        why = self.rail.check(len(self.instances), len({i.rack.name for i in self.instances.values()}), now)
        if why is not None:
            self._record(now, "halt", why)

    def _finish_runs(self, now: float) -> None:
        """While halted: rack NCCL runs already started (a bisection's too) are still collected, so the runner puts
        back the drains it lifted for the run (a lifted node must never stay schedulable because the loop stopped
        advancing it). The result is not acted on; the run is made again after a person resumes the loop."""
        for case in [c for c in self.cases.values() if c.state == "revalidating"]:
            if case.nccl is not None and self.nccl.collect(case.nccl) is not None:
                case.nccl = None
                why = "halted: the rack run ended, its result waits for a resume"
                self._record(now, "revalidate", why, node=case.node)
            if case.bisect is not None:
                runs = case.bisect["runs"]
                for handle in [h for h in runs if self.nccl.collect(h) is not None]:
                    runs.pop(handle)
                if not runs:
                    case.bisect = None
                    why = "halted: the bisection's runs ended, the rack run is made again after a resume"
                    self._record(now, "revalidate", why, node=case.node)

    def _admit(self, now: float) -> None:
        self.rail.admit(self.cases.values(), lambda case: self._admitted(case, now))

    def _admitted(self, case: Case, now: float) -> bool:
        """A queued case gets a slot: one that waited for it on transient-looking evidence only (a link down, a
        soft check; not a hard fault, not a person's request), or for a platform event (Scheduled Events), is judged
        again first, and dropped when the node's gate passes now (a switch blip that ended while the rack's slots
        were busy drains nothing; a platform Redeploy moved a faulty VM to a good host)."""
        transient = all(self.judge.rule_kind(e) in self.policy.corroborate for e in case.evidence)
        if case.request is None and case.since < now and (transient or case.platform is not None):
            gate = parse_gate_result(self.probe.gate_result(case.node))
            if gate.passed:
                after = f"after Azure's {case.platform} (Scheduled Events)" if case.platform else "at admission"
                self._dismiss(case, now, f"judged again {after}: the gate passes now")
                return False
        return self._drain(case, now)

    # -------------------------------------------------------------------------------------------------
    # Guest Health Report, topology, records

    def _physical_host(self, host: str) -> str | None:
        """The physical host the node runs on now (read before a redeploy moves it), as the node reports it."""
        return checked_host(self.probe.physical_host(host))

    def _report(self, case: Case, now: float) -> None:
        file_report(self.azure, self.policy.ghr_categories, case, lambda d, r: self._record(now, d, r, node=case.node))

    def _out_of_service(self) -> set[str]:
        held = {h for h, i in self.instances.items() if i.rack.name in self.judge.held}
        return (
            {c.node for c in self.cases.values() if c.state != "queued"}
            | {c.node for c in self.closed if c.state in ("escalated",)}
            | held
        )

    def _refresh_topology(self, now: float) -> None:
        nodes, _problems = topology.parse_lines(self.topology_port.fabric_lines())
        out = self._out_of_service()
        built = topology.build([n for n in nodes if n.host not in out], self.block_size)
        if built.blocks != self.blocks:
            self.blocks = built.blocks
            self.topology_port.write(built.render())

    def _record(self, now: float, decision: str, reason: str, **fields: Any) -> None:
        node = fields.get("node")
        if node and not fields.get("rack"):  # a node's decision names its rack too (per-rack queries)
            fields["rack"] = self._rack_name(node)
        record = decision_record(
            now=now, cluster=self.cluster, decision=decision, reason=reason, halted=self.halted, **fields
        )
        self.sink(record)
