"""A node's case on the remediation ladder (:class:`Case`) and the rules the ladder reads besides the evidence: a
person's request in a Slurm reason, Azure's "not now" and its backoff, a recurrence within the memory window, and the
Guest Health Report (docs/self-healing.md). :mod:`gb300.heal.loop` drives the cases.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Literal

from gb300.heal.azure_calls import AzureRepairs, Instance, RackRef
from gb300.heal.evidence import Event, event_doc, event_of, xid_code

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


def error_code(exc: BaseException) -> str | None:
    """ARM's error code from the body of an Azure SDK error (``{"error": {"code": ...}}``), if it has one."""
    code = getattr(getattr(exc, "error", None), "code", None)
    return str(code) if code else None


def is_later(status: int | None) -> bool:
    """Whether an Azure refusal will change by itself (retry the same call), or fails the rung (403, 404, 400)."""
    return status is None or status in LATER or status >= 500


def backoff_s(poll_s: float, refusals: int) -> float:
    """How long to wait before the same call again after ``refusals`` "not now" answers without ``Retry-After``:
    doubling from the poll interval, at most :data:`BACKOFF_MAX_S`."""
    return min(poll_s * 2.0 ** min(refusals, 12), BACKOFF_MAX_S)


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
    asked: str | None = None  # a person's request during a rack run: applied once the run is collected
    skip: list[str] = field(default_factory=list)  # rungs the evidence's catalog bucket says cannot cure it
    no_capacity_since: float | None = None  # Azure first answered "no capacity" for the current call
    capacity_told: bool = False  # a person was told Azure has had no capacity for it
    refused: list[str] = field(default_factory=list)  # rungs Azure refused for good (an error that will not change)
    outcome_at: float | None = None  # when the accepted operation's outcome is read next (the node not back yet)
    bisect: dict[str, Any] | None = None  # finding the slow node of a failed rack run (gb300.heal.bisect)
    platform: str | None = None  # the Scheduled Event (Reboot, Redeploy...) the case waited for: judged again after it


def recurrence(closed: Sequence[Case], node: str, now: float, window: float) -> str | None:
    """Why a new case of ``node`` goes to a person at once (``memory.windowSeconds``): the second recurrence within
    the window, or a return after a redeploy; None when it climbs the ladder as usual."""
    prior = [
        c
        for c in closed
        if c.node == node and c.state == "returned" and c.ended is not None and now - c.ended <= window
    ]
    if len(prior) >= 2:
        return f"case {len(prior) + 1} of this node within {window / 86400:g} days: a person must look"
    if any("replace" in c.actions for c in prior):
        return "the fault came back after a redeploy: reported against the new host, a person must look"
    return None


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


def file_report(
    azure: AzureRepairs, categories: Mapping[str, str], case: Case, record: Callable[[str, str], None]
) -> None:
    """File a Guest Health Report for the host the case's node ran on (``case.physical_host``) and read Azure's
    insights on it; ``record(decision, reason)`` logs each step. A refusal is recorded; the repair goes on."""
    if not case.physical_host:
        record("guest-health-report", "skipped: the node published no physical host (its KVP pool 3)")
        return
    category = ghr_category(categories, case.evidence)
    started = datetime.fromtimestamp(case.first_evidence, UTC).isoformat().replace("+00:00", "Z")
    try:
        name = azure.guest_health_report(
            case.instance, category=category, description=case.reason, physical_host=case.physical_host, started=started
        )
    except Exception as exc:  # noqa: BLE001 - a refused report is recorded; the repair goes on
        record("azure-error", f"guest health report: {exc}")
        return
    case.actions.append("guest-health-report")
    record("guest-health-report", f"{category} for {case.physical_host} ({name})")
    try:
        insights = azure.insights(case.instance, name)
    except Exception as exc:  # noqa: BLE001 - insights are information for a person; the repair goes on
        record("azure-later", f"insights of {name}: {exc}")
        return
    if insights:
        record("report-insights", "; ".join(insights))


def _defaults() -> dict[str, Any]:
    out = {}
    for spec in fields(Case):
        if spec.default is not MISSING:
            out[spec.name] = spec.default
        elif spec.default_factory is not MISSING:
            out[spec.name] = spec.default_factory()
    return out


_DEFAULTS = _defaults()


def case_doc(case: Case) -> dict[str, Any]:
    """A case as the head's state file keeps it (JSON; its VM by host, rack and ids; a field still at its default
    is left out, as :func:`case_of` puts it back: the state is read and written every tick)."""
    doc = {
        name: value for name in Case.__dataclass_fields__ if (value := getattr(case, name)) != _DEFAULTS.get(name, ...)
    }
    doc["evidence"] = [event_doc(e) for e in case.evidence]
    doc |= {key: list(doc[key]) for key in ("actions", "nccl_hosts") if key in doc}
    if case.intent is not None:
        doc["intent"] = dict(case.intent)
    doc["instance"] = case.instance.host
    doc |= {"rack": case.instance.rack.name, "instance_id": case.instance.instance_id}
    doc["resource_id"] = case.instance.resource_id
    return doc


def case_of(raw: Mapping[str, Any], instances: Mapping[str, Instance], racks: Mapping[str, RackRef]) -> Case:
    """A case :func:`case_doc` saved; its VM from ``instances`` where Azure still lists it."""
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


__all__ = [
    "BACKOFF_MAX_S",
    "LATER",
    "REQUESTS",
    "Case",
    "State",
    "backoff_s",
    "case_doc",
    "case_of",
    "error_code",
    "file_report",
    "ghr_category",
    "is_later",
    "recurrence",
    "refusal",
    "requested_action",
]
