"""The repair ladder of one node: drain -> reboot -> recheck -> reimage -> recheck -> replace (+ Guest Health
Report) -> recheck -> revalidate (rack NCCL) -> return (docs/self-healing.md#the-ladder).

:class:`Ladder` holds the nodes under repair (:class:`~gb300.heal.case.Case`, open and closed) and moves each up its
rungs; it saves and restores them itself (:meth:`Ladder.cases_doc`, :meth:`Ladder.restore_cases`). Which case may
start is the fleet rails' decision (:mod:`gb300.heal.rails`); the evidence, the rack rules and the records are the
loop's (:class:`gb300.heal.loop.Remediator`, which is a ladder with the fleet around it). The loop drains with the
reason prefix :data:`PREFIX` and resumes a node only while that is still its reason, so drains by ``gb300
rollout``, by Scheduled Events or by a person are never undone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gb300.heal.azure_calls import AzureRepairs, Instance, RackRef
from gb300.heal.case import Case, State, backoff_s, error_code, is_later, refusal, requested_action
from gb300.heal.evidence import Judge, event_doc, event_of, parse_gate_result
from gb300.heal.nccl import rack_verdict
from gb300.heal.policy import RUNGS, Policy
from gb300.heal.ports import HealSlurm, NcclRunner, NodeProbe
from gb300.slurm.client import DOWN_STATES, HEALTH_PREFIX

PREFIX = "gb300-heal:"
"""Reason prefix of the loop's drains (the gate resumes only ``gb300:``, the rollout only its own)."""
OVERDUE = (
    "jobs still running after the drain timeout: still waiting (set gb300:remediation.requeueJobs to requeue them)"
)


KEEP_CLOSED = 200
"""Closed cases kept besides the escalated ones (which stay out of service until a person acts)."""


class Ladder:
    """The ladder's cases and rungs. The loop that extends it provides the ports and the hooks below."""

    policy: Policy
    azure: AzureRepairs
    slurm: HealSlurm
    probe: NodeProbe
    nccl: NcclRunner
    nccl_env: dict[str, str]
    poll_s: float
    shadow: bool
    persist: Callable[[], None] | None
    cases: dict[str, Case]
    closed: list[Case]
    instances: dict[str, Instance]

    @property
    def judge(self) -> Judge:
        raise NotImplementedError

    def _record(self, now: float, decision: str, reason: str, **fields: Any) -> None:
        raise NotImplementedError

    def _refresh_topology(self, now: float) -> None:
        raise NotImplementedError

    def _report(self, case: Case, now: float) -> None:
        raise NotImplementedError

    def _physical_host(self, host: str) -> str | None:
        raise NotImplementedError

    def _rack_hosts(self, rack: str) -> list[str]:
        raise NotImplementedError

    def _probed(self, case: Case, passed: bool, now: float) -> bool:
        """A rung of the case ended (its recheck failed, or it returned); whether the loop halted on it."""
        raise NotImplementedError

    def _may_start(self, case: Case) -> bool:
        """Whether a drained node whose jobs ended may start its repair now (the fleet's rack slots)."""
        raise NotImplementedError

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
                if self._may_start(case):
                    self._climb(case, now)
            elif now - case.since > self.policy.drain_timeout_s and not case.overdue:
                case.overdue = True
                self._record(now, "drain-overdue", OVERDUE, node=case.node, step="drain")
        elif case.state == "acting":
            self._recheck(case, now)
        elif case.state == "revalidating":
            self._revalidate(case, now)

    def _requested(self, case: Case, request: str, now: float) -> None:
        """A person's ``Action:`` on a node the loop already has: the request takes the node over at the rung it
        names (queued: the ladder starts there; under repair: the loop's drain is taken back, so the node returns
        after its repair, and the ladder jumps there); a request the loop cannot honour says so in a record."""
        wanted = RUNGS.index(request)
        case.request = request
        if case.state == "queued":
            case.rung = max(case.rung, wanted - 1)
            self._record(now, "request", f"a person asked for {request}: the ladder starts there", node=case.node)
            return
        if not self.shadow:
            self.slurm.drain([case.node], f"{PREFIX} {request} asked by a person during the repair")
        if wanted <= case.rung:
            why = f"a person asked for {request}, but {RUNGS[case.rung]} is already under way: the ladder goes on"
            self._record(now, "request", why, node=case.node)
        elif case.state == "revalidating" and case.nccl is not None:
            case.asked = request  # the rack run under way lifted drains: it is collected first (_revalidate)
            self._record(now, "request", f"a person asked for {request}: after the rack run", node=case.node)
        else:
            self._jump(case, request, now)

    def _jump(self, case: Case, request: str, now: float) -> None:
        """Climb straight to the rung a person asked for (draining: once the node's jobs ended)."""
        case.rung, case.asked, case.retry_at = RUNGS.index(request) - 1, None, None
        self._record(now, "request", f"a person asked for {request}: the ladder jumps there", node=case.node)
        if case.state != "draining":
            self._climb(case, now)

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
        case.no_capacity_since, case.capacity_told = None, False
        # A report filed while Azure could not move the VM is not filed again.
        if rung == "replace" and self.policy.guest_health_report and "guest-health-report" not in case.actions:
            if case.failed_rechecks:
                self._report(case, now)
            else:
                self._record(now, "guest-health-report", "skipped: no recheck failed on this host", node=case.node)

    def _refused(self, case: Case, rung: str, exc: Exception, now: float) -> None:
        status, after = refusal(exc)
        code = error_code(exc)
        if code in self.policy.no_capacity:
            self._no_capacity(case, rung, code or "", now)
            return
        if code in self.policy.not_offered:
            self._record(now, "azure-error", f"{rung}: Azure cannot do it ({code}): {exc}", node=case.node, step=rung)
            self._report_unmoved(case, rung, now)
            if rung == RUNGS[-1] and case.failed_rechecks:
                why = f"needs a new host and Azure cannot move it ({code}): its host is reported; a person must look"
                self._close(case, "escalated", now, why)
            else:
                self._failed_attempt(case, now)
            return
        if is_later(status):
            case.refusals += 1
            delay = after if after is not None else backoff_s(self.poll_s, case.refusals)
            case.retry_at = now + max(delay, self.poll_s)
            why = f"{rung}: Azure answered {status or 'nothing'}; the same call again in {delay:.0f}s"
            self._record(now, "azure-later", why, node=case.node, step=rung)
            return
        self._record(now, "azure-error", f"{rung}: {exc}", node=case.node, step=rung)
        self._failed_attempt(case, now)

    def _no_capacity(self, case: Case, rung: str, code: str, now: float) -> None:
        """Azure has no room for the VM now (``capacity.noCapacity``): the same call again, backing off to hourly;
        after ``capacity.alertSeconds`` a person is told once, and a node that failed a recheck is reported."""
        case.refusals += 1
        case.no_capacity_since = case.no_capacity_since if case.no_capacity_since is not None else now
        delay = backoff_s(self.poll_s, case.refusals)
        case.retry_at = now + delay
        waited = now - case.no_capacity_since
        why = f"{rung}: Azure has no capacity ({code}) for {waited / 3600:.1f} h; the same call again in {delay:.0f}s"
        self._record(now, "azure-later", why, node=case.node, step=rung)
        if waited >= self.policy.capacity_alert_s and not case.capacity_told:
            case.capacity_told = True
            why = f"{rung}: Azure has had no capacity ({code}) for {waited / 3600:.1f} h: a person must look"
            self._record(now, "capacity", why, node=case.node, step=rung)
            self._report_unmoved(case, rung, now)

    def _report_unmoved(self, case: Case, rung: str, now: float) -> None:
        """A node that failed a recheck and needs a new host that Azure cannot give now: its host is reported."""
        filed = "guest-health-report" in case.actions
        if rung == "replace" and self.policy.guest_health_report and case.failed_rechecks and not filed:
            self._report(case, now)

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
            if not self._probed(case, False, now):
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
        if case.asked is not None:
            self._jump(case, case.asked, now)
            return
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
            # The rack failed with this node and no suspect peer in it: a failed recheck of this node, as a failed gate
            # is (the Guest Health Report at replace, and the close's reason, count it).
            case.failed_rechecks += 1
            self._climb(case, now)

    def _return(self, case: Case, now: float) -> None:
        reason = self.slurm.reason(case.node)
        if reason.startswith(PREFIX):
            self.slurm.resume([case.node])
            self._probed(case, True, now)
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
    # The ladder's state between ticks (the head's state file: gb300.heal.state)

    def cases_doc(self) -> dict[str, Any]:
        """The open cases and the closed ones worth keeping, as JSON."""
        kept = self._kept()
        return {"cases": [_saved_case(c) for c in self.cases.values()], "closed": [_saved_case(c) for c in kept]}

    def _kept(self) -> list[Case]:
        """The closed cases worth saving: every escalated one, every other inside the memory window (a recurrence
        is judged against them), and at least the last :data:`KEEP_CLOSED`."""
        escalated = [c for c in self.closed if c.state == "escalated"]
        others = [c for c in self.closed if c.state != "escalated"]
        newest = max((c.ended or 0.0 for c in others), default=0.0)
        others = [
            c
            for i, c in enumerate(others)
            if newest - (c.ended or 0.0) <= self.policy.memory_s or i >= len(others) - KEEP_CLOSED
        ]
        return [*escalated, *others]

    def restore_cases(self, doc: Mapping[str, Any], racks: Sequence[RackRef]) -> None:
        """Put the cases :meth:`cases_doc` saved back (their VMs from :attr:`instances` where still listed)."""
        by_name = {r.name: r for r in racks}
        self.cases = {c["node"]: _restore_case(c, self.instances, by_name) for c in doc.get("cases", [])}
        self.closed = [_restore_case(c, self.instances, by_name) for c in doc.get("closed", [])]


def _saved_case(case: Case) -> dict[str, Any]:
    doc = {name: getattr(case, name) for name in Case.__dataclass_fields__}
    doc["evidence"] = [event_doc(e) for e in case.evidence]
    doc["actions"], doc["nccl_hosts"] = list(case.actions), list(case.nccl_hosts)
    doc["intent"] = dict(case.intent) if case.intent is not None else None
    doc["instance"] = case.instance.host
    doc |= {"rack": case.instance.rack.name, "instance_id": case.instance.instance_id}
    doc["resource_id"] = case.instance.resource_id
    return doc


def _restore_case(raw: Mapping[str, Any], instances: Mapping[str, Instance], racks: Mapping[str, RackRef]) -> Case:
    doc = dict(raw)
    host = str(doc["instance"])
    instance = instances.get(host)
    if instance is None:  # no longer listed by Azure: keep what the loop knew (its rack is still the stack's)
        rack = racks.get(str(doc.get("rack", "")), next(iter(racks.values())))
        instance = Instance(host, rack, str(doc.get("instance_id", "")), str(doc.get("resource_id", "")))
    doc.pop("rack", None)
    doc.pop("instance_id", None)
    doc.pop("resource_id", None)
    doc["instance"] = instance
    doc["evidence"] = [event_of(e) for e in doc["evidence"]]
    return Case(**doc)
