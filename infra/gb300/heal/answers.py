"""What the repair ladder does with Azure's answers (docs/self-healing.md#when-azure-says-not-now): a refusal at
once (its HTTP status, ``Retry-After`` and ARM's error code), and an operation Azure accepted (202) that failed later
(the VM's instance view: ``ProvisioningState/failed/<code>``). Codes are judged before statuses: no capacity is
retried, backing off to hourly, and a person told after ``capacity.alertSeconds``; a move that cannot happen reports
the host of a node that needs one. :class:`Answers` is a part of :class:`gb300.heal.ladder.Ladder`.
"""

from __future__ import annotations

from typing import Any

from gb300.heal.azure_calls import AzureRepairs
from gb300.heal.case import Case, State, backoff_s, error_code, is_later, refusal
from gb300.heal.policy import RUNGS, Policy

GONE = "ResourceNotFound"
"""ARM's error code for a VM that no longer exists."""


class Answers:
    """Azure's answers to the ladder's calls; the ladder that extends it provides the ports and the hooks below."""

    policy: Policy
    azure: AzureRepairs
    poll_s: float

    def _record(self, now: float, decision: str, reason: str, **fields: Any) -> None:
        raise NotImplementedError

    def _report(self, case: Case, now: float) -> None:
        raise NotImplementedError

    def _close(self, case: Case, state: State, now: float, reason: str) -> None:
        raise NotImplementedError

    def _dismiss(self, case: Case, now: float, reason: str) -> None:
        """Close the case with no repair; the loop's own drain on the node is lifted."""
        raise NotImplementedError

    def _gone(self, case: Case, rung: str, now: float) -> None:
        """Azure answers ResourceNotFound for the VM: preempted, terminated (Scheduled Events) or deleted. Not a
        hardware fault: no repair, no report; the loop's drain is lifted from the Slurm record left behind."""
        self._dismiss(
            case, now, f"{rung}: the VM no longer exists (preempted, terminated or deleted): no repair, no report"
        )

    def _failed_attempt(self, case: Case, now: float) -> None:
        """The rung's try failed: its retries, then the next rung."""
        raise NotImplementedError

    def _refused(self, case: Case, rung: str, exc: Exception, now: float) -> None:
        status, after = refusal(exc)
        self._denied(case, rung, (status, after, error_code(exc)), str(exc), now)

    def _denied(
        self, case: Case, rung: str, answer: tuple[int | None, float | None, str | None], said: str, now: float
    ) -> None:
        """Azure said no to ``rung``: at once (``answer``: its HTTP status, ``Retry-After`` and error code), or later,
        an operation it accepted that failed (status None; ``said`` names it). Judged by the error code first."""
        status, after, code = answer
        if code == GONE:
            self._gone(case, rung, now)
            return
        if code in self.policy.no_capacity:
            self._no_capacity(case, rung, code or "", now)
            return
        if code in self.policy.not_offered:
            self._record(now, "azure-error", f"{rung}: Azure cannot do it ({code}): {said}", node=case.node, step=rung)
            case.refused.append(rung)
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
        self._record(now, "azure-error", f"{rung}: {said}", node=case.node, step=rung)
        case.refused.append(rung)
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

    def _outcome_failed(self, case: Case, now: float) -> bool:
        """While the node is not back: every ``capacity.outcomeSeconds`` the VM's instance view says whether the
        operation Azure accepted (202) failed since (``ProvisioningState/failed/<code>``); a failure is judged by
        its code as a refusal is. Whether it failed."""
        due = case.outcome_at if case.outcome_at is not None else case.since + self.policy.outcome_s
        if now < due:
            return False
        case.outcome_at = now + self.policy.outcome_s
        try:
            state, code, _ = self.azure.provisioning(case.instance)
        except Exception as exc:  # noqa: BLE001 - no answer: the node may still come back; asked again later
            if error_code(exc) == GONE:
                self._gone(case, RUNGS[case.rung], now)
                return True
            self._record(now, "azure-later", f"the outcome of {RUNGS[case.rung]}: {exc}", node=case.node)
            return False
        if state != "failed":
            return False
        rung, case.outcome_at = RUNGS[case.rung], None
        said = f"Azure accepted it (202), then the operation failed ({code or 'no error code'})"
        self._record(now, "azure-failed", f"{rung}: {said}", node=case.node, step=rung)
        if code in self.policy.no_capacity or code in self.policy.not_offered:
            self._denied(case, rung, (None, None, code), said, now)
        else:
            case.refused.append(rung)
            self._failed_attempt(case, now)
        return True
