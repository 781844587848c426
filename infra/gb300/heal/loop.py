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

import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import ModuleType
from typing import Any, Literal

from gb300 import paths
from gb300.errors import DataError
from gb300.heal.azure_calls import AzureRepairs, Instance, RackRef
from gb300.heal.evidence import Event, Judge, Verdict, checked_host, parse_gate_result, xid_code
from gb300.heal.policy import RUNGS, Policy
from gb300.heal.ports import EventFeed, HealSlurm, NcclRunner, NodeProbe, Sink, TopologyPort, decision_record
from gb300.slurm import topology
from gb300.slurm.client import HEALTH_PREFIX

PREFIX = "gb300-heal:"
"""Reason prefix of the loop's drains (the gate resumes only ``gb300:``, the rollout only its own)."""
_DOWN = {"DOWN", "NOT_RESPONDING", "NO_RESPOND", "POWERED_DOWN", "FAIL", "UNKNOWN"}

State = Literal["queued", "draining", "acting", "revalidating", "returned", "escalated", "held", "dismissed"]
LATER = frozenset({408, 409, 429})
"""ARM answers that mean "not now" (throttled, another operation holds the VM) as 5xx do: the same call again later.
ARM documents 429 with ``Retry-After`` and 409 for a resource busy with another operation; azure-core's
RetryPolicy (azure/core/pipeline/policies/_retry.py ``is_retry``) never retries a 409 and, for a POST, a 429
only with ``Retry-After``, so the loop owns the retry: its clients run with ``retry_total=0``."""
BACKOFF_MAX_S = 3600.0


REQUESTS: Mapping[str, str] = {"Action:Reboot": "reboot", "Action:Replace": "replace"}
"""A person's request in a node's Slurm reason, as SageMaker HyperPod reads it (``scontrol update
nodename=<node> state=drain reason="Action:Replace"``): the loop repairs the node from that rung."""


def requested_action(reason: str) -> str | None:
    """The rung a person asked for in a Slurm reason (``Action:Reboot`` or ``Action:Replace``), if any."""
    for word in reason.split():
        if word in REQUESTS:
            return REQUESTS[word]
    return None


def refusal(exc: BaseException) -> tuple[int | None, float | None]:
    """The HTTP status of an Azure SDK error (None: no answer, a connection error) and its ``Retry-After`` seconds."""
    response = getattr(exc, "response", None)
    status = getattr(exc, "status_code", None) or getattr(response, "status_code", None)
    headers = getattr(response, "headers", None) or {}
    raw = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        after = float(raw) if raw is not None else None
    except ValueError:
        after = None  # an HTTP date: the backoff decides
    return (int(status) if status else None), after


def is_later(status: int | None) -> bool:
    """Whether an Azure refusal will change by itself (retry the same call), or fails the rung (403, 404, 400)."""
    return status is None or status in LATER or status >= 500


def nccl_eval() -> ModuleType:
    """The rack evaluator shipped in examples/nccl-eval.py (its parser and thresholds judge revalidation)."""
    name = "gb300_nccl_eval"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, paths.REPO_ROOT / "examples" / "nccl-eval.py")
        if spec is None or spec.loader is None:
            raise DataError(f"{paths.REPO_ROOT / 'examples' / 'nccl-eval.py'}: cannot be loaded")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@dataclass
class Case:
    """One node's way up the ladder."""

    node: str
    instance: Instance
    state: State
    first_evidence: float
    reason: str
    evidence: list[Event]
    actions: list[str] = field(default_factory=list)
    since: float = 0.0
    rung: int = -1
    attempts: int = 0
    nccl: str | None = None
    physical_host: str | None = None
    ended: float | None = None
    overdue: bool = False
    nccl_hosts: list[str] = field(default_factory=list)
    reruns: int = 0
    intent: dict[str, Any] | None = None  # the Azure call about to be made (saved before it is made)
    retry_at: float | None = None  # Azure said "not now": the same call again at this time
    refusals: int = 0  # "not now" answers for the current call (the backoff's exponent)
    failed_rechecks: int = 0  # rechecks the node failed after an action (evidence that it, not Azure, is bad)
    escalate: str | None = None  # why a person is asked at once once the node is drained (a recurrence)
    request: str | None = None  # a person's Action:Reboot / Action:Replace
    skip: list[str] = field(default_factory=list)  # rungs the evidence's catalog bucket says cannot cure it


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
        window = self.policy.memory_s
        prior = [
            c
            for c in self.closed
            if c.node == case.node and c.state == "returned" and c.ended is not None and now - c.ended <= window
        ]
        if len(prior) >= 2:
            case.escalate = f"case {len(prior) + 1} of this node within {window / 86400:g} days: a person must look"
        elif any("replace" in c.actions for c in prior):
            case.escalate = "the fault came back after a redeploy: reported against the new host, a person must look"
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
        hosts = [h for h, i in self.instances.items() if i.rack.name == rack]
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
            hosts = [h for h, i in self.instances.items() if i.rack.name == rack]
            if all(self.probe.gate_result(h) is not None for h in hosts):
                self.judge.clear_incident(rack)
                self._record(now, "rack-recovered", "every node of the rack answers again", rack=rack)

    def _check_halt(self, now: float) -> None:
        window = [n for t, n in self._faults if now - t <= self.policy.halt_window_s]
        fleet = len(self.instances)
        limit = max(self.policy.halt_share * fleet, self.policy.halt_min_nodes)
        if not self.halted and fleet and len(set(window)) > limit:
            self.halted = True
            self._record(
                now,
                "halt",
                f"{len(set(window))} of {fleet} nodes showed fault evidence within {self.policy.halt_window_s:.0f}s "
                f"(more than {self.policy.halt_share:.0%} and {self.policy.halt_min_nodes}): repairs stopped, "
                "waiting for "
                "a person",
            )

    def _finish_runs(self, now: float) -> None:
        """While halted: rack NCCL runs already started are still collected, so the runner puts back the drains it
        lifted for the run (a lifted node must never stay schedulable because the loop stopped advancing it). The
        result is not acted on; the run is made again after a person resumes the loop."""
        for case in [c for c in self.cases.values() if c.state == "revalidating"]:
            if case.nccl is not None and self.nccl.collect(case.nccl) is not None:
                case.nccl = None
                self._record(
                    now, "revalidate", "halted: the rack run ended, its result waits for a resume", node=case.node
                )

    def _under_repair(self) -> list[Case]:
        return [c for c in self.cases.values() if c.state in ("draining", "acting", "revalidating")]

    def _admit(self, now: float) -> None:
        active = self._under_repair()
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
                self._record(
                    now,
                    "drain-overdue",
                    "jobs still running after the drain timeout: still waiting "
                    "(set gb300:remediation.requeueJobs to requeue them)",
                    node=case.node,
                    step="drain",
                )
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
        self._record(
            now, rung, f"{rung} {case.instance.rack.name}/{case.instance.instance_id}", node=case.node, step=rung
        )
        if rung == "replace" and self.policy.guest_health_report:
            if case.failed_rechecks:
                self._report(case, now)
            else:
                self._record(now, "guest-health-report", "skipped: no recheck failed on this host", node=case.node)

    def _refused(self, case: Case, rung: str, exc: Exception, now: float) -> None:
        status, after = refusal(exc)
        if is_later(status):
            case.refusals += 1
            delay = after if after is not None else min(self.poll_s * 2 ** min(case.refusals, 12), BACKOFF_MAX_S)
            case.retry_at = now + max(delay, self.poll_s)
            self._record(
                now,
                "azure-later",
                f"{rung}: Azure answered {status or 'nothing'}; the same call again in {delay:.0f}s",
                node=case.node,
                step=rung,
            )
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
            self._record(
                now, "reconcile", f"{call}: Azure shows no operation since the intent: sent now", node=case.node
            )
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
        back = node is not None and node.boot_time >= case.since and not (node.states & _DOWN)
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
            busy = {c.node for c in self.cases.values() if c is not case} | {
                c.node for c in self.closed if c.state == "escalated"
            }
            busy |= self.judge.suspects(now) - {case.node}
            rack = case.instance.rack.name
            case.nccl_hosts = [h for h, i in self.instances.items() if i.rack.name == rack and h not in busy]
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
        module = nccl_eval()
        size = self.nccl_env.get("GB300_NCCL_RACK_BYTES")
        busbw = module.bus_bandwidth(text, int(size) if size else None)
        verdict = module.judge("rack", case.instance.rack.name, busbw, self.nccl_env, ())
        self._record(now, "revalidate", f"rack NCCL {verdict.level}: {busbw:.1f} GB/s", node=case.node)
        if verdict.level == "OK":
            self._return(case, now)
            return
        newly = (self.judge.suspects(now) | set(self.cases)) & set(case.nccl_hosts) - {case.node}
        if newly and case.reruns < 2:
            # A peer showed evidence during the run: the result says nothing about this node. Run again without it.
            case.reruns += 1
            case.nccl = None
            self._record(
                now, "revalidate-again", f"peers under suspicion during the run: {sorted(newly)}", node=case.node
            )
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
        if not case.physical_host:
            reason = "skipped: the node published no physical host (its KVP pool 3)"
            self._record(now, "guest-health-report", reason, node=case.node)
            return
        category = ghr_category(self.policy.ghr_categories, case.evidence)
        started = datetime.fromtimestamp(case.first_evidence, UTC).isoformat().replace("+00:00", "Z")
        try:
            name = self.azure.guest_health_report(
                case.instance,
                category=category,
                description=case.reason,
                physical_host=case.physical_host,
                started=started,
            )
        except Exception as exc:  # noqa: BLE001 - a refused report is recorded; the repair goes on
            self._record(now, "azure-error", f"guest health report: {exc}", node=case.node)
            return
        case.actions.append("guest-health-report")
        self._record(now, "guest-health-report", f"{category} for {case.physical_host} ({name})", node=case.node)
        try:
            insights = self.azure.insights(case.instance, name)
        except Exception as exc:  # noqa: BLE001 - insights are information for a person; the repair goes on
            self._record(now, "azure-later", f"insights of {name}: {exc}", node=case.node)
            return
        if insights:
            self._record(now, "report-insights", "; ".join(insights), node=case.node)

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
        self.sink(
            decision_record(
                now=now, cluster=self.cluster, decision=decision, reason=reason, halted=self.halted, **fields
            )
        )


def ghr_category(categories: Mapping[str, str], evidence: Sequence[Event]) -> str:
    """The Guest Health Report category for the case's first evidence (data/remediation.yaml, Azure's list)."""
    first = evidence[0] if evidence else None
    keys: list[str] = []
    if first is not None:
        family = {
            "gpu-missing": "gpu",
            "ecc": "ecc",
            "ib-link-down": "ib",
            "ib-flap": "ib-flap",
            "nvlink-down": "nvlink",
            "thermal-throttle": "thermal",
        }
        if first.kind == "xid":
            keys = [f"xid{xid_code(first.code)}", "xid"]
        elif first.kind == "check-failed":
            keys = [str(first.check or "")]
        else:
            keys = [family.get(first.kind, "")]
    return next((categories[k] for k in keys if k in categories), categories["default"])


def escalated(cases: Sequence[Case]) -> list[Case]:
    return [c for c in cases if c.state == "escalated"]


Clock = Callable[[], float]
