"""The remediation loop: evidence -> drain -> reboot -> recheck -> reimage -> recheck -> replace (+ Guest Health
Report) -> recheck -> revalidate (rack NCCL) -> return, inside the rails (docs/self-healing.md).

:class:`Remediator` is driven by ``tick(now)``: the head calls it on a timer, the simulator on its clock. Each node
under repair is a :class:`Case`; the rails bound how many are past ``queued`` (per rack, racks in the fleet) and
halt everything when too much of the fleet shows fault evidence within the window. The loop drains with the
reason prefix :data:`PREFIX` and resumes a node only while that is still its reason, so drains by ``gb300
rollout``, by Scheduled Events or by a person are never undone; a node drained by anyone but the health gate is
left alone. The topology is rebuilt from the nodes' fabric identities after every drain and return.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gb300.heal.azure_calls import AzureRepairs, Instance, RackRef
from gb300.heal.case import Case, State, backoff_s, file_report, is_later, recurrence, refusal, requested_action
from gb300.heal.evidence import Event, Judge, Verdict, checked_host, parse_gate_result, xid_code
from gb300.heal.nccl import rack_verdict
from gb300.heal.policy import RUNGS, Policy
from gb300.heal.ports import EventFeed, HealSlurm, NcclRunner, NodeProbe, Sink, TopologyPort, decision_record
from gb300.slurm import topology
from gb300.slurm.client import DOWN_STATES, HEALTH_PREFIX

PREFIX = "gb300-heal:"
"""Reason prefix of the loop's drains (the gate resumes only ``gb300:``, the rollout only its own)."""
OVERDUE = (
    "jobs still running after the drain timeout: still waiting (set gb300:remediation.requeueJobs to requeue them)"
)


@dataclass
class Remediator:
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
    halted: bool = False
    instances: dict[str, Instance] = field(default_factory=dict)
    blocks: tuple[topology.Block, ...] = ()
    rejudge: bool = False
    unknown_hosts: bool = False
    shadow: bool = False
    persist: Callable[[], None] | None = None
    _faults: list[tuple[float, str]] = field(default_factory=list)
    _judge: Judge | None = None
    _rack_size: dict[str, int] = field(default_factory=dict)

    # -------------------------------------------------------------------------------------------------
    # Set-up and the tick

    def __post_init__(self) -> None:
        self.shadow = self.shadow or self.policy.shadow

    def start(self, now: float) -> None:
        for rack in self.racks:
            for instance in self.azure.instances(rack):
                self.instances[instance.host] = instance
            self._rack_size[rack.name] = sum(1 for i in self.instances.values() if i.rack.name == rack.name)
        self._judge = Judge(self.policy, self._rack_name, lambda host: self._rack_size.get(self._rack_name(host), 0))
        self._refresh_topology(now)

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
        for case in [c for c in self.cases.values() if c.intent is not None]:
            self._reconcile(case, now)
        self._observe(now)
        for rack in self.judge.rack_incidents(now):
            self._record(now, "rack-incident", "much of the rack is unreachable at once: held for a person", rack=rack)
        for rack in self.judge.fabric_incidents(now):
            self._hold_rack(rack, now)
        for item in self.judge.due(now):
            if item.mode == "settle":
                self._verdict(self.judge.settle(item), now)
            else:
                gate = parse_gate_result(self.probe.gate_result(item.node))
                self._verdict(self.judge.recheck(item, gate), now)
        self._incidents(now)
        self._check_halt(now)
        if self.halted:
            self._finish_runs(now)
            return
        if self.rejudge:
            self._rejudge(now)
        self._admit(now)
        for case in list(self.cases.values()):
            self._advance(case, now)

    # -------------------------------------------------------------------------------------------------
    # Verdicts, rails

    def _verdict(self, verdict: Verdict, now: float) -> None:
        if verdict.decision != "act":
            self._record(now, "ignore", verdict.reason, node=verdict.node, evidence=verdict.evidence)
            return
        case = self.cases.get(verdict.node)
        if case is not None:
            case.evidence.extend(verdict.evidence)
            return
        request = next((str(e.code) for e in verdict.evidence if e.kind == "request"), None)
        if request is None:
            self._faults.append((now, verdict.node))  # a person's request is no fault evidence for the halt rail
        first = min(e.at for e in verdict.evidence) if verdict.evidence else now
        case = Case(verdict.node, self.instances[verdict.node], "queued", first, verdict.reason, list(verdict.evidence))
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
        """After a person resumed a halted loop: queued cases whose node's gate passes now are dropped."""
        self.rejudge = False
        for case in [c for c in self.cases.values() if c.state == "queued"]:
            gate = parse_gate_result(self.probe.gate_result(case.node))
            if gate.passed:
                self._close(case, "dismissed", now, "judged again after the resume: the gate passes now")

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
        why = None if self.halted else self.policy.halt_reason(self._faults, len(self.instances), now)
        if why is not None:
            self.halted = True
            self._record(now, "halt", why)

    def _finish_runs(self, now: float) -> None:
        """While halted: rack NCCL runs already started are still collected, so the runner puts back the drains it
        lifted for the run (a lifted node must never stay schedulable because the loop stopped advancing it). The
        result is not acted on; the run is made again after a person resumes the loop."""
        for case in [c for c in self.cases.values() if c.state == "revalidating"]:
            if case.nccl is not None and self.nccl.collect(case.nccl) is not None:
                case.nccl = None
                why = "halted: the rack run ended, its result waits for a resume"
                self._record(now, "revalidate", why, node=case.node)

    def _admit(self, now: float) -> None:
        active = [c for c in self.cases.values() if c.state in ("draining", "acting", "revalidating")]
        per_rack: dict[str, int] = {}
        for case in active:
            per_rack[case.instance.rack.name] = per_rack.get(case.instance.rack.name, 0) + 1
        for case in sorted((c for c in self.cases.values() if c.state == "queued"), key=lambda c: c.first_evidence):
            rack = case.instance.rack.name
            if per_rack.get(rack, 0) >= self.policy.max_nodes_per_rack:
                continue
            if rack not in per_rack and len(per_rack) >= self.policy.max_racks:
                continue
            if self._drain(case, now):
                per_rack[rack] = per_rack.get(rack, 0) + 1

    # -------------------------------------------------------------------------------------------------
    # The ladder

    def _drain(self, case: Case, now: float) -> bool:
        reason = self.slurm.reason(case.node)
        asked = case.request is not None and requested_action(reason) == case.request
        if reason and not reason.startswith((PREFIX, HEALTH_PREFIX)) and not asked:
            self._close(case, "held", now, f"drained by someone else ({reason!r}): left alone")
            return False
        if self.shadow:
            self._close(case, "dismissed", now, f"shadow mode: would drain, then {RUNGS[case.rung + 1]}")
            return False
        self.slurm.drain([case.node], f"{PREFIX} {case.reason}"[:250])
        case.actions.append("drain")
        case.state, case.since = "draining", now
        self._record(now, "drain", case.reason, node=case.node, step="drain", evidence=case.evidence)
        if self.policy.requeue_jobs:
            jobs = self.slurm.jobs([case.node])
            self.slurm.requeue(jobs)
            if jobs:
                self._record(now, "requeue", f"jobs {', '.join(jobs)} requeued", node=case.node, step="drain")
        self._refresh_topology(now)
        return True

    def _advance(self, case: Case, now: float) -> None:
        if case.retry_at is not None:
            if now >= case.retry_at:
                case.retry_at = None
                self._act(case, now)
            return
        if case.state == "draining":
            if not self.slurm.jobs([case.node]):
                self._climb(case, now)
            elif now - case.since > self.policy.drain_timeout_s and not case.overdue:
                case.overdue = True
                self._record(now, "drain-overdue", OVERDUE, node=case.node, step="drain")
        elif case.state == "acting":
            self._recheck(case, now)
        elif case.state == "revalidating":
            self._revalidate(case, now)

    def _climb(self, case: Case, now: float) -> None:
        if case.escalate and case.rung < 0:
            if "redeploy" in case.escalate and self.policy.guest_health_report:
                case.physical_host = self._physical_host(case.node)
                self._report(case, now)
            self._close(case, "escalated", now, case.escalate)
            return
        case.rung += 1
        while case.rung < len(RUNGS) and RUNGS[case.rung] in case.skip:
            case.rung += 1
        case.attempts = 0
        if case.rung >= len(RUNGS):
            if case.failed_rechecks == 0:
                # Only Azure's refusals stopped the ladder: nothing shows the node is bad; it stays drained.
                self._close(case, "held", now, "Azure refused every repair (see azure-error): a person must look")
            else:
                self._close(case, "escalated", now, "every rung tried and the node still fails: a person must look")
            return
        self._act(case, now)

    def _save_intent(self, case: Case, call: str, now: float) -> None:
        """Intent before action: saved with the state before the call, so a head that dies after the call
        reconciles with Azure and Slurm (:meth:`_reconcile`) instead of calling again."""
        case.intent = {"call": call, "at": now}
        if self.persist is not None:
            self.persist()

    def _act(self, case: Case, now: float) -> None:
        rung = RUNGS[case.rung]
        if rung == "replace" and self.policy.guest_health_report:
            case.physical_host = self._physical_host(case.node)
        if self.shadow:
            self._record(now, rung, f"shadow mode: would {rung} {case.instance.rack.name}", node=case.node, step=rung)
            return
        self._save_intent(case, rung, now)
        try:
            self.azure.repair(rung, case.instance)
        except Exception as exc:  # noqa: BLE001 - Azure's refusal is recorded with its message and judged below
            case.intent = None
            self._refused(case, rung, exc, now)
            return
        case.intent = None
        self._acted(case, rung, now)

    def _acted(self, case: Case, rung: str, now: float) -> None:
        case.actions.append(rung)
        case.attempts += 1
        case.refusals = 0
        case.state, case.since = "acting", now
        what = f"{rung} {case.instance.rack.name}/{case.instance.instance_id}"
        self._record(now, rung, what, node=case.node, step=rung)
        if rung == "replace" and self.policy.guest_health_report:
            if case.failed_rechecks:
                self._report(case, now)
            else:
                self._record(now, "guest-health-report", "skipped: no recheck failed on this host", node=case.node)

    def _refused(self, case: Case, rung: str, exc: Exception, now: float) -> None:
        status, after = refusal(exc)
        if is_later(status):
            case.refusals += 1
            delay = after if after is not None else backoff_s(self.poll_s, case.refusals)
            case.retry_at = now + max(delay, self.poll_s)
            why = f"{rung}: Azure answered {status or 'nothing'}; the same call again in {delay:.0f}s"
            self._record(now, "azure-later", why, node=case.node, step=rung)
            return
        self._record(now, "azure-error", f"{rung}: {exc}", node=case.node, step=rung)
        self._failed_attempt(case, now)

    def _reconcile(self, case: Case, now: float) -> None:
        """A case whose intent was saved but whose call never returned to a saved state (the head died): ask
        Slurm (did the node boot since?) and Azure (the VM's provisioning state and its time) instead of calling
        again."""
        intent = case.intent or {}
        call, at = str(intent.get("call", "")), float(intent.get("at", now))
        node = self.slurm.nodes([case.node]).get(case.node)
        booted = node is not None and node.boot_time >= at
        try:
            busy, last = self.azure.operation_state(case.instance)
        except Exception as exc:  # noqa: BLE001 - no answer yet: ask again next tick, never call blind
            self._record(now, "azure-later", f"reconcile {call}: {exc}", node=case.node, step=call)
            return
        case.intent = None
        if booted or busy or (last is not None and last >= at):
            seen = "the node booted since" if booted else "Azure shows the operation under way or done"
            self._record(now, "reconcile", f"{call} was sent before the head restarted: {seen}", node=case.node)
            self._acted(case, call, at)
        else:
            why = f"{call}: Azure shows no operation since the intent: sent now"
            self._record(now, "reconcile", why, node=case.node)
            self._act(case, now)

    def _failed_attempt(self, case: Case, now: float) -> None:
        case.attempts += 1  # a refused call counts as a try: 1 + retries tries in all
        if case.attempts <= self.policy.rungs[RUNGS[case.rung]].retries:
            case.state, case.since = "acting", now
            self._act(case, now)
        else:
            self._climb(case, now)

    def _recheck(self, case: Case, now: float) -> None:
        node = self.slurm.nodes([case.node]).get(case.node)
        back = node is not None and node.boot_time >= case.since and not (node.states & DOWN_STATES)
        rung = self.policy.rungs[RUNGS[case.rung]]
        if not back:
            if now - case.since > rung.timeout_s:
                self._record(now, "timeout", f"{rung.name}: not back after {rung.timeout_s:.0f}s", node=case.node)
                case.failed_rechecks += 1
                if case.attempts <= rung.retries:
                    self._act(case, now)
                else:
                    self._climb(case, now)
            return
        gate = parse_gate_result(self.probe.gate_result(case.node))
        self._record(now, "recheck", gate.describe(), node=case.node, step=rung.name)
        if gate.passed:
            case.state, case.since, case.nccl = "revalidating", now, None
            self._revalidate(case, now)
        else:
            case.failed_rechecks += 1
            self._climb(case, now)

    def _revalidate(self, case: Case, now: float) -> None:
        if case.nccl is None:
            busy = {c.node for c in self.cases.values() if c is not case} | (self.judge.suspects(now) - {case.node})
            busy |= {c.node for c in self.closed if c.state == "escalated"}
            case.nccl_hosts = [h for h in self._rack_hosts(case.instance.rack.name) if h not in busy]
            case.nccl = self.nccl.submit(case.nccl_hosts)
            case.since = now
            if case.actions[-1:] != ["revalidate"]:
                case.actions.append("revalidate")
            return
        text = self.nccl.collect(case.nccl)
        if text is None:
            if now - case.since > self.policy.revalidate_timeout_s:
                self._record(now, "revalidate", "the rack NCCL run did not finish", node=case.node)
                self._climb(case, now)
            return
        level, busbw = rack_verdict(text, self.nccl_env, case.instance.rack.name)
        self._record(now, "revalidate", f"rack NCCL {level}: {busbw:.1f} GB/s", node=case.node)
        if level == "OK":
            self._return(case, now)
            return
        newly = (self.judge.suspects(now) | set(self.cases)) & set(case.nccl_hosts) - {case.node}
        if newly and case.reruns < 2:
            # A peer showed evidence during the run: the result says nothing about this node. Run again without it.
            case.reruns += 1
            case.nccl = None
            why = f"peers under suspicion during the run: {sorted(newly)}"
            self._record(now, "revalidate-again", why, node=case.node)
            self._revalidate(case, now)
        else:
            self._climb(case, now)

    def _return(self, case: Case, now: float) -> None:
        reason = self.slurm.reason(case.node)
        if reason.startswith(PREFIX):
            self.slurm.resume([case.node])
            case.actions.append("return")
            self._close(case, "returned", now, "repaired and revalidated: back in service")
        else:
            self._close(case, "held", now, f"repaired, but drained by someone else since ({reason!r}): left drained")

    def _close(self, case: Case, state: State, now: float, reason: str) -> None:
        case.state, case.ended = state, now
        self.cases.pop(case.node, None)
        self.closed.append(case)
        self._record(now, state, reason, node=case.node, evidence=case.evidence if state == "escalated" else ())
        if state == "returned":
            self._refresh_topology(now)

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
