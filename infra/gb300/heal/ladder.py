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

from gb300.heal import bisect
from gb300.heal.answers import GONE, Answers
from gb300.heal.azure_calls import AzureRepairs, Instance, RackRef
from gb300.heal.case import (
    Case,
    State,
    case_doc,
    case_of,
    error_code,
    requested_action,
)
from gb300.heal.evidence import Judge, parse_gate_result
from gb300.heal.nccl import rack_verdict
from gb300.heal.policy import RUNGS, Policy
from gb300.heal.ports import HealSlurm, NcclRunner, NodeProbe
from gb300.slurm.client import DOWN_STATES, HEALTH_PREFIX, MAINTENANCE_PREFIX

PREFIX = "gb300-heal:"
"""Reason prefix of the loop's drains (the gate resumes only ``gb300:``, the rollout only its own)."""
OVERDUE = (
    "jobs still running after the drain timeout: still waiting (set gb300:remediation.requeueJobs to requeue them)"
)


KEEP_CLOSED = 200
"""Closed cases kept besides the escalated ones (which stay out of service until a person acts)."""


class Ladder(Answers):
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

    @property
    def halted(self) -> bool:
        """Whether the halt rail stopped the loop: no VM action starts, nothing in flight is followed by a rung."""
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

    def _straggler(self, case: Case, host: str, now: float) -> None:
        """Bisection after ``case``'s repair found ``host``, a peer, slow: a case of its own (the loop's evidence)."""
        raise NotImplementedError

    def _drain(self, case: Case, now: float) -> bool:
        reason = self.slurm.reason(case.node)
        asked = case.request is not None and requested_action(reason) == case.request
        if reason.startswith(MAINTENANCE_PREFIX):
            self._platform(case, reason, now)
            return False
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

    def _platform(self, case: Case, reason: str, now: float) -> None:
        """The node's gb300-scheduled-events drained it: Azure is about to act on the VM (IMDS Scheduled Events), and
        the loop does not act over the platform. A Preempt or Terminate deletes the VM: not a hardware fault, no
        repair, no report. A Freeze, Reboot or Redeploy is waited for (the case stays queued) and the node judged
        again once the event is over (:meth:`gb300.heal.loop.Remediator._admitted`): a Redeploy may have cured it."""
        kind = (reason.removeprefix(MAINTENANCE_PREFIX).split() or ["?"])[0]
        if kind in ("Preempt", "Terminate"):
            why = f"Azure {kind.lower()}s the VM (Scheduled Events): not a hardware fault; no repair, no report"
            self._close(case, "dismissed", now, why)
        elif case.platform != kind:
            case.platform = kind
            why = f"Azure scheduled a {kind} of the VM (Scheduled Events): no repair over it; judged again after it"
            self._record(now, "platform", why, node=case.node)

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
            self._top(case, now)
            return
        self._act(case, now)

    def _top(self, case: Case, now: float) -> None:
        """No rung left: escalated when the node still fails (its host reported if no report was filed yet, as for a
        slow node a person named that no VM action cured), else held with the reason that is true."""
        if case.failed_rechecks:
            if self.policy.guest_health_report and "guest-health-report" not in case.actions:
                case.physical_host = self._physical_host(case.node)
                self._report(case, now)
            self._close(case, "escalated", now, "every rung tried and the node still fails: a person must look")
        elif case.refused:
            # Only Azure's refusals stopped the ladder: nothing shows the node is bad; it stays drained.
            why = f"Azure refused {', '.join(dict.fromkeys(case.refused))} (see azure-error): a person must look"
            self._close(case, "held", now, why)
        else:
            self._close(case, "held", now, "no rung left to try and no recheck failed: a person must look")

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
        # A report filed while Azure could not move the VM is not filed again.
        if rung == "replace" and self.policy.guest_health_report and "guest-health-report" not in case.actions:
            if case.failed_rechecks:
                self._report(case, now)
            else:
                self._record(now, "guest-health-report", "skipped: no recheck failed on this host", node=case.node)

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
            if error_code(exc) == GONE:
                case.intent = None
                self._gone(case, call, now)
                return
            self._record(now, "azure-later", f"reconcile {call}: {exc}", node=case.node, step=call)
            return
        case.intent = None
        if booted or busy or (last is not None and last >= at):
            seen = "the node booted since" if booted else "Azure shows the operation under way or done"
            self._record(now, "reconcile", f"{call} was sent before the head restarted: {seen}", node=case.node)
            self._acted(case, call, at)
        elif self.halted:
            case.retry_at = now  # sent when a person resumes the loop, not while it is halted
            why = f"{call}: Azure shows no operation since the intent; halted: not sent, waits for a resume"
            self._record(now, "reconcile", why, node=case.node)
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
            if self._outcome_failed(case, now):
                return
            if now - case.since > rung.timeout_s:
                self._record(now, "timeout", f"{rung.name}: not back after {rung.timeout_s:.0f}s", node=case.node)
                case.failed_rechecks += 1
                if self._probed(case, False, now):
                    return
                if case.attempts <= rung.retries:
                    self._act(case, now)
                else:
                    self._climb(case, now)
            return
        case.no_capacity_since, case.capacity_told, case.outcome_at = None, False, None
        gate = parse_gate_result(self.probe.gate_result(case.node))
        self._record(now, "recheck", gate.describe(), node=case.node, step=rung.name)
        if gate.passed:
            case.state, case.since, case.nccl = "revalidating", now, None
            self._revalidate(case, now)
        else:
            self._failed_recheck(case, now)

    def _failed_recheck(self, case: Case, now: float) -> None:
        """The node failed a recheck (its gate, or the rack run with the node found slow): the next rung, unless the
        failure halted the loop (a resume too early: nothing follows)."""
        case.failed_rechecks += 1
        if not self._probed(case, False, now):
            self._climb(case, now)

    def _revalidate(self, case: Case, now: float) -> None:
        if case.bisect is not None:
            self._bisect(case, now)
            return
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
        elif len(case.nccl_hosts) > bisect.PAIR_AT:
            # No suspect peer: which node drags the rack down is found by halves (a slow peer passes every check).
            case.bisect = bisect.start(case.nccl_hosts)
            why = f"rack NCCL {level} with no suspect peer: bisecting its {len(case.nccl_hosts)} nodes by halves"
            self._record(now, "bisect", why, node=case.node)
            self._bisect_round(case, now)
        else:
            # Too few nodes to bisect: a failed recheck of this node, as a failed gate is.
            self._failed_recheck(case, now)

    def _bisect_round(self, case: Case, now: float) -> None:
        """Submit the next round of the bisection (both halves of each failing group, or the pairs) at once."""
        state = case.bisect or {}
        for run in bisect.plan(state):
            state["runs"][self.nccl.submit(run["hosts"])] = run
        case.since = now
        if bisect.done(state):
            self._bisected(case, now)

    def _bisect(self, case: Case, now: float) -> None:
        """Collect the round's runs (each once); when all are in, settle them and start the next round."""
        state = case.bisect or {}
        verdicts = state.setdefault("verdicts", {})
        for handle in [h for h in state["runs"] if h not in verdicts]:
            text = self.nccl.collect(handle)
            if text is not None:
                verdicts[handle] = rack_verdict(text, self.nccl_env, case.instance.rack.name)[0] == "OK"
        if len(verdicts) < len(state["runs"]):
            if now - case.since > self.policy.revalidate_timeout_s:
                case.bisect = None
                self._close(case, "held", now, "the bisection's NCCL runs did not finish: a person must look")
            return
        bisect.settle(state, state.pop("verdicts"))
        if state["groups"]:
            self._bisect_round(case, now)
        else:
            self._bisected(case, now)

    def _bisected(self, case: Case, now: float) -> None:
        """The slow nodes are known: this node fails its recheck if it is one; slow peers get cases of their own and
        this node's rack run is made again without them; none found: held for a person, never a neighbour blamed."""
        state, case.bisect = case.bisect or {}, None
        self._record(now, "bisect", bisect.describe(state), node=case.node)
        peers = [h for h in state["bad"] if h != case.node]
        for host in peers:
            self._straggler(case, host, now)
        if case.node in state["bad"]:
            self._failed_recheck(case, now)
        elif peers:
            case.nccl = None
            self._record(now, "revalidate-again", f"without the slow node(s) {', '.join(peers)}", node=case.node)
            self._revalidate(case, now)
        else:
            why = "the rack NCCL run fails but bisection isolated no slow node: left drained, a person must look"
            self._close(case, "held", now, why)

    def _return(self, case: Case, now: float) -> None:
        reason = self.slurm.reason(case.node)
        if reason.startswith(PREFIX) or not reason:
            if reason:
                self.slurm.resume([case.node])  # not drained: resumed before the head restarted, or by a person
            self._probed(case, True, now)
            case.actions.append("return")
            self._close(case, "returned", now, "repaired and revalidated: back in service")
        else:
            self._close(case, "held", now, f"repaired, but drained by someone else since ({reason!r}): left drained")

    def _dismiss(self, case: Case, now: float, reason: str) -> None:
        """A queued case needs no repair after all; a drain of the loop's own on its node (sent just before the head
        died, so the saved case never left the queue) is lifted."""
        if not self.shadow and self.slurm.reason(case.node).startswith(PREFIX):
            self.slurm.resume([case.node])
        self._close(case, "dismissed", now, reason)

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
        return {"cases": [case_doc(c) for c in self.cases.values()], "closed": [case_doc(c) for c in kept]}

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
        self.cases = {c["node"]: case_of(c, self.instances, by_name) for c in doc.get("cases", [])}
        self.closed = [case_of(c, self.instances, by_name) for c in doc.get("closed", [])]
