"""The loop's thresholds, windows, rung budgets and rails: ``data/remediation.yaml`` plus ``gb300:remediation``.

One object, :class:`Policy`, built once by :func:`load`; the evidence rules and the ladder read nothing else. Which
health-gate checks are hard (one failure is a fault) comes from the gate's own table (``data/health.yaml``).

The head's service does not read the data files or the stack: the plan renders the policy to JSON
(:func:`to_json`) into the head's payload and the service reads it back (:func:`from_json`), so this module
imports the config models and the data loader only inside :func:`load` (the head has neither pydantic nor PyYAML).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from gb300.errors import DataError

if TYPE_CHECKING:
    from gb300.config.remediation import RemediationSettings

EVENT_KINDS: tuple[str, ...] = (
    "xid",
    "ecc",
    "gpu-missing",
    "ib-link-down",
    "ib-flap",
    "nvlink-down",
    "imex-unhealthy",
    "thermal-throttle",
    "unreachable",
    "check-failed",
)
"""What nodes and Azure report (the scenario format's ``kind``; docs/self-healing.md)."""

RUNGS: tuple[str, ...] = ("reboot", "reimage", "replace")
"""Repair actions in order of disruption; a node climbs them one at a time."""


@dataclass(frozen=True)
class Corroboration:
    """Transient-looking evidence: act at ``count`` reports within ``window_s``, or when a recheck still fails."""

    count: int
    window_s: float
    recheck_after_s: float | None
    while_job_runs: bool


@dataclass(frozen=True)
class Rung:
    """One step of the ladder: how long the node may take to come back, and how often it is tried again."""

    name: str
    timeout_s: float
    retries: int


@dataclass(frozen=True)
class Policy:
    """Everything the evidence rules, the ladder and the rails compare against."""

    xid_warning: frozenset[int]
    teardown_xids: frozenset[int]
    teardown_window_s: float
    same_job_nodes: int
    same_job_window_s: float
    ecc_fault: frozenset[str]
    corroborate: Mapping[str, Corroboration]
    rack_incident_share: float
    rack_incident_window_s: float
    hard_checks: frozenset[str]
    drain_timeout_s: float
    rungs: Mapping[str, Rung]
    revalidate_timeout_s: float
    max_nodes_per_rack: int
    max_racks: int
    halt_share: float
    halt_window_s: float
    halt_min_nodes: int
    resume_failures: int
    requeue_jobs: bool
    guest_health_report: bool
    ghr_api_version: str
    no_capacity: frozenset[str]
    not_offered: frozenset[str]
    capacity_alert_s: float
    outcome_s: float
    ghr_categories: Mapping[str, str]
    memory_s: float
    xid_buckets: Mapping[str, str]
    shadow: bool

    def halt_reason(self, reports: Sequence[tuple[float, str]], fleet: int, now: float) -> str | None:
        """Why the loop halts (the halt rail), given when each node showed fault evidence, or None: more distinct
        nodes than ``halt_share`` of the fleet and ``halt_min_nodes`` within ``halt_window_s``."""
        nodes = {n for t, n in reports if now - t <= self.halt_window_s}
        if not fleet or len(nodes) <= max(self.halt_share * fleet, self.halt_min_nodes):
            return None
        return (
            f"{len(nodes)} of {fleet} nodes showed fault evidence within {self.halt_window_s:.0f}s "
            f"(more than {self.halt_share:.0%} and {self.halt_min_nodes}): repairs stopped, waiting for a person"
        )

    def xid_bucket(self, code: int) -> str:
        """NVIDIA's catalog bucket of an XID (``evidence.xid.catalog``); ``contactSupport`` when not listed."""
        return self.xid_buckets.get(str(code), "contactSupport")


def _int_set(raw: Any, where: str) -> frozenset[int]:
    if not isinstance(raw, list):
        raise DataError(f"remediation.yaml {where} must be a list (got {raw!r})")
    return frozenset(int(v) for v in raw)


def _azure(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The policy's fields from ``azure``: the Guest Health Report's API version and categories, ARM's codes of a
    refused move (``capacity``), and when a person is told Azure has no capacity."""
    ghr, capacity = raw["guestHealthReport"], raw["capacity"]
    return {
        "ghr_api_version": str(ghr["apiVersion"]),
        "ghr_categories": {str(k): str(v) for k, v in ghr["categories"].items()},
        "no_capacity": frozenset(str(c) for c in capacity["noCapacity"]),
        "not_offered": frozenset(str(c) for c in capacity["notOffered"]),
        "capacity_alert_s": float(capacity["alertSeconds"]),
        "outcome_s": float(capacity["outcomeSeconds"]),
    }


def hard_checks() -> frozenset[str]:
    """Health-gate checks whose single failure is a fault (``class: hard`` in data/health.yaml)."""
    from gb300.facts.loader import data  # noqa: PLC0415 - the plan reads data files; the head reads JSON

    checks = data("health.yaml")["defaults"]["checks"]
    return frozenset(name for name, entry in checks.items() if entry["class"] == "hard")


def load(settings: RemediationSettings) -> Policy:
    """The policy for a stack's ``gb300:remediation`` (defaults when the stack sets nothing)."""
    from gb300.facts.loader import data  # noqa: PLC0415 - the plan reads data files; the head reads JSON
    from gb300.slurm.health import never_drain_xids  # noqa: PLC0415 - the gate's list, read at plan time too

    raw = data("remediation.yaml")
    evidence = raw["evidence"]
    xid = evidence["xid"]
    corroborate = {
        kind: Corroboration(
            count=int(entry["count"]),
            window_s=float(entry["windowSeconds"]),
            recheck_after_s=float(entry["recheckAfterSeconds"]) if "recheckAfterSeconds" in entry else None,
            while_job_runs=bool(entry.get("whileJobRuns", False)),
        )
        for kind, entry in evidence["corroborate"].items()
    }
    unknown = sorted(set(corroborate) - set(EVENT_KINDS))
    if unknown:
        raise DataError(f"remediation.yaml evidence.corroborate: unknown event kinds {unknown}")
    ladder = raw["ladder"]
    rungs = {
        name: Rung(name, float(ladder[name]["timeoutSeconds"]), int(ladder[name].get("retries", 0))) for name in RUNGS
    }
    listed = [c for b, codes in xid["catalog"].items() if b not in ("status", "source") for c in codes]
    if len(listed) != len(set(listed)):
        raise DataError("remediation.yaml evidence.xid.catalog: an XID is listed in more than one bucket")
    return Policy(
        # The gate's own never-drain list (data/health.yaml xidWarning and the catalog's neverDrain buckets).
        xid_warning=frozenset(never_drain_xids()),
        teardown_xids=_int_set(xid["teardownBenign"]["value"], "evidence.xid.teardownBenign"),
        teardown_window_s=float(xid["teardownBenign"]["withinSecondsOfJobEnd"]),
        same_job_nodes=int(xid["sameJobNodes"]["value"]),
        same_job_window_s=float(xid["sameJobNodes"]["windowSeconds"]),
        ecc_fault=frozenset(str(v) for v in evidence["ecc"]["fault"]["value"]),
        corroborate=corroborate,
        rack_incident_share=float(evidence["rackIncident"]["share"]),
        rack_incident_window_s=float(evidence["rackIncident"]["windowSeconds"]),
        hard_checks=hard_checks(),
        drain_timeout_s=float(ladder["drain"]["timeoutSeconds"]),
        rungs=rungs,
        revalidate_timeout_s=float(ladder["revalidate"]["timeoutSeconds"]),
        max_nodes_per_rack=settings.max_nodes_per_rack,
        max_racks=settings.max_racks,
        halt_share=settings.halt_share,
        halt_window_s=float(settings.halt_window_seconds),
        halt_min_nodes=settings.halt_min_nodes,
        resume_failures=int(raw["rails"]["resumeRecheckFailures"]),
        requeue_jobs=settings.requeue_jobs,
        guest_health_report=settings.guest_health_report,
        **_azure(raw["azure"]),
        memory_s=float(raw["memory"]["windowSeconds"]),
        shadow=settings.shadow,
        xid_buckets={
            str(code): bucket
            for bucket, codes in xid["catalog"].items()
            if bucket not in ("status", "source")
            for code in _int_set(codes, f"evidence.xid.catalog.{bucket}")
        },
    )


def to_json(policy: Policy) -> dict[str, Any]:
    """The policy as plain JSON (sets as sorted lists), for the head's payload."""
    doc = asdict(policy)
    for key, value in doc.items():
        if isinstance(value, frozenset):
            doc[key] = sorted(value)
    return doc


def from_json(doc: Mapping[str, Any]) -> Policy:
    """The policy :func:`to_json` wrote; raises DataError when a field is missing or unknown."""
    fields = set(Policy.__dataclass_fields__)
    if set(doc) != fields:
        raise DataError(f"remediation policy: fields {sorted(set(doc) ^ fields)} missing or unknown")
    values = dict(doc)
    values["xid_buckets"] = {str(k): str(v) for k, v in doc["xid_buckets"].items()}
    for key in ("xid_warning", "teardown_xids", "ecc_fault", "hard_checks", "no_capacity", "not_offered"):
        values[key] = frozenset(values[key])
    values["corroborate"] = {k: Corroboration(**v) for k, v in doc["corroborate"].items()}
    values["rungs"] = {k: Rung(**v) for k, v in doc["rungs"].items()}
    return Policy(**values)
