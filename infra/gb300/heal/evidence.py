"""Evidence before drain: what nodes report, judged in context, into act / watch / ignore.

Rules (thresholds in ``data/remediation.yaml``, docs/self-healing.md#evidence-before-drain):

* XIDs Azure's health agent treats as warnings never drain, nor the catalog's neverDrain buckets (XID 45, the
  driver cleaning up at a job's teardown, among them); IMEX trouble on ``sameJobNodes`` nodes of one job within the
  window points at the job (one crashed NVLink job must not drain 77 nodes);
* transient-looking evidence (IB flaps and down links, IMEX, NVLink, thermal, an unreachable node, a soft gate
  check) acts at ``count`` reports within ``windowSeconds``, or when the node's gate still fails a recheck
  ``recheckAfterSeconds`` after the first report; IMEX reports count only while a job runs on the node;
* a large share of one rack unreachable at once is a rack incident (power, switch tray): hold and alert.

:class:`Judge` holds only what the loop was told (events) and what it probed; nothing here can see the
simulator's truth.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gb300.heal.policy import Policy

Decision = Literal["act", "ignore", "watch"]


XID_MAX = 999
"""No XID of NVIDIA's catalog has more than three digits; anything longer is not an XID (and never reaches int())."""


def xid_code(text: str | None) -> int | None:
    """An XID code from a report, or None when it is not one (empty, not digits, longer than :data:`XID_MAX`)."""
    raw = (text or "").strip()
    if not raw.isascii() or not raw.isdigit() or len(raw) > len(str(XID_MAX)):
        return None
    return int(raw)


HOST_MAX = 253
"""A host name is a DNS name: at most 253 characters (RFC 1035), of letters, digits, dots and hyphens."""
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")


def checked_host(text: str | None) -> str | None:
    """A physical host name as a node may name it (Hyper-V KVP ``PhysicalHostName``): a DNS name of at most
    :data:`HOST_MAX` characters, else None. Root on a node writes its own Slurm comment; anything else (a
    612-character name, a bidi override, a control character) never reaches Azure or the log."""
    name = (text or "").strip()
    if len(name) > HOST_MAX or not name.isascii() or not _HOST.fullmatch(name):
        return None
    return name


def printable(text: str, limit: int = 500) -> str:
    """``text`` as a log may hold it: control, format (bidi overrides) and separator characters escaped
    (``\\u202e``), cut to ``limit`` characters."""
    out = "".join(
        f"\\u{ord(ch):04x}" if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn") else ch
        for ch in text[: limit * 2]
    )
    return out if len(out) <= limit else out[: limit - 3] + "..."


@dataclass(frozen=True)
class Event:
    """One report from a node or from Azure: at a time, about a host."""

    at: float
    node: str
    kind: str
    code: str | None = None
    check: str | None = None
    context: str | None = None
    job: str | None = None

    @property
    def key(self) -> str:
        """The evidence's identity for grouping: kind plus code or check."""
        detail = self.code or self.check
        return f"{self.kind}:{detail}" if detail else self.kind

    def describe(self) -> str:
        extra = "".join(f" {k}={v}" for k, v in (("code", self.code), ("check", self.check)) if v)
        ctx = f" ({self.context})" if self.context else ""
        job = f" job={self.job}" if self.job else ""
        return f"t={self.at:.0f} {self.kind}{extra}{ctx}{job}"


_DETAILS = ("code", "check", "context", "job")


def event_of(raw: Sequence[Any] | Mapping[str, Any]) -> Event:
    """An event as :func:`event_doc` wrote it (the head's state file), or as a mapping of its fields (a state
    written before events were saved as lists)."""
    if isinstance(raw, Mapping):
        raw = [raw["at"], raw["node"], raw["kind"], *(raw.get(k) for k in _DETAILS)]
    details = [None if v is None else str(v) for v in raw[3:7]]
    return Event(float(raw[0]), str(raw[1]), str(raw[2]), *details)


def event_doc(event: Event) -> list[Any]:
    """An event as JSON: ``[at, node, kind, code, check, context, job]``, trailing details that are None left out
    (the state is read and written every tick, and most events carry only a kind)."""
    doc = [event.at, event.node, event.kind, event.code, event.check, event.context, event.job]
    while doc[-1] is None:
        doc.pop()
    return doc


@dataclass(frozen=True)
class GateResult:
    """The node's health gate verdict, as ``/var/lib/gb300/health/boot.result`` writes it."""

    passed: bool
    failures: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        return "pass" if self.passed else "fail: " + "; ".join(f"{c}: {m}" for c, m in self.failures)


def parse_gate_result(text: str | None) -> GateResult:
    """``pass``, or ``fail: <check>: <message>[; ...]`` (``boot.result``) or ``gb300: <check>: <message>[; ...]``
    (``last.result``), as gb300-health-check writes them under /var/lib/gb300/health; None: no answer."""
    if text is None:
        return GateResult(False, (("unreachable", "the node did not answer"),))
    line = text.strip().splitlines()[0] if text.strip() else ""
    if line == "pass":
        return GateResult(True)
    if not line.startswith(("fail:", "gb300:")):
        return GateResult(False, (("gate", f"unreadable result {line[:80]!r}"),))
    failures = []
    for part in line.partition(":")[2].split(";"):
        check, _, message = part.strip().partition(":")
        if check:
            failures.append((check.strip(), message.strip()))
    return GateResult(False, tuple(failures) or (("gate", "failed without a reason"),))


@dataclass(frozen=True)
class Verdict:
    """What to do about a node now, why, and the evidence behind it."""

    node: str
    decision: Decision
    reason: str
    evidence: tuple[Event, ...]


@dataclass
class Pending:
    """Evidence waiting for its recheck."""

    node: str
    key: str
    mode: Literal["recheck"]
    due: float
    events: list[Event] = field(default_factory=list)


@dataclass
class Judge:
    """Turns events into verdicts; keeps each node's recent evidence and what waits for a recheck."""

    policy: Policy
    rack_of: Callable[[str], str]
    rack_size: Callable[[str], int]
    history: dict[str, list[Event]] = field(default_factory=dict)
    pending: dict[tuple[str, str], Pending] = field(default_factory=dict)
    incidents: dict[str, float] = field(default_factory=dict)  # rack -> when it was declared
    _unreachable: dict[str, dict[str, float]] = field(default_factory=dict)  # rack -> node -> at
    fabric: dict[str, dict[str, float]] = field(default_factory=dict)  # rack -> node -> last NVLink report
    held: dict[str, float] = field(default_factory=dict)  # rack -> when its NVLink domain was held for a person
    suspect_until: dict[str, float] = field(default_factory=dict)  # node -> end of its evidence's window

    def _recent(self, node: str, kind: str, now: float, window: float) -> list[Event]:
        return [e for e in self.history.get(node, []) if self.rule_kind(e) == kind and now - e.at <= window]

    def rule_kind(self, event: Event) -> str:
        """The kind whose rules judge the event: an XID of the catalog's NVLink bucket is NVLink evidence
        (``nvlink-down``): counted toward its rack's NVLink domain and corroborated as NVLink trouble is, so a
        switch tray failing under most of a rack is one rack incident, not a node-by-node repair."""
        code = xid_code(event.code) if event.kind == "xid" else None
        if code is not None and self.policy.xid_bucket(code) == "nvlink" and code not in self.policy.xid_warning:
            return "nvlink-down"
        return event.kind

    def _hard(self, event: Event) -> tuple[bool, str]:  # noqa: PLR0911 - one return per evidence rule
        """Whether the event alone is a fault, or why it is not."""
        policy = self.policy
        if event.kind == "xid":
            code = xid_code(event.code)
            if code is None:
                return False, "an XID that is not a code of NVIDIA's catalog"
            if code in policy.teardown_xids and event.context == "job-teardown":
                return False, f"XID {code} during a job's teardown is the driver cleaning up"
            bucket = policy.xid_bucket(code)
            if code in policy.xid_warning:
                return False, f"XID {code}: NVIDIA's XID catalog bucket {bucket}: the application's, not the node's"
            return True, f"XID {code} ({bucket})"
        if event.kind == "ecc":
            if (event.code or "") in policy.ecc_fault:
                return True, f"ECC {event.code}"
            return False, f"ECC {event.code} needs no action"
        if event.kind == "gpu-missing":
            return True, "a GPU is missing"
        if event.kind == "check-failed" and (event.check or "") in policy.hard_checks:
            return True, f"hard gate check {event.check} failed"
        return False, ""

    def observe(self, event: Event) -> Verdict | None:
        """Record one event; a verdict now, or None when it waits (count, recheck)."""
        self.history.setdefault(event.node, []).append(event)
        verdict = self._observe(event)
        if verdict is None or verdict.decision == "act":
            rule = self.policy.corroborate.get(self.rule_kind(event))
            window = max(rule.window_s if rule else 0.0, self.policy.same_job_window_s)
            self.suspect_until[event.node] = max(self.suspect_until.get(event.node, 0.0), event.at + window)
        return verdict

    def suspects(self, now: float) -> set[str]:
        """Nodes with evidence still inside its window (left out of rack acceptance runs)."""
        return {node for node, until in self.suspect_until.items() if until > now} | {
            p.node for p in self.pending.values()
        }

    def _context(self, event: Event, rack: str) -> Verdict | None:
        """What the event's context decides before the evidence rules: a person's request, a held rack, a job's
        IMEX."""
        if event.kind == "request":
            why = f"a person asked for {event.code} (Action: in the node's reason)"
            return Verdict(event.node, "act", why, (event,))
        if rack in self.incidents and event.kind == "unreachable":
            return Verdict(event.node, "ignore", f"rack {rack} incident: held for a person", (event,))
        if rack in self.held:
            return Verdict(event.node, "ignore", f"rack {rack}: NVLink domain held for a person", (event,))
        if self.rule_kind(event) == "nvlink-down":
            self.fabric.setdefault(rack, {})[event.node] = event.at
        if event.kind == "imex-unhealthy" and event.job:
            return self._imex_of_job(event)
        return None

    def _observe(self, event: Event) -> Verdict | None:
        rack = self.rack_of(event.node)
        decided = self._context(event, rack)
        if decided is not None:
            return decided
        kind = self.rule_kind(event)
        hard, why = self._hard(event) if kind == event.kind else (False, "")
        if hard:
            # Hard evidence is the node's, whatever job ran on it (three XID 79s under one job are three nodes off
            # the bus); the catalog's teardown artifact (XID 45) is never hard (neverDrain), so no job rule here.
            return Verdict(event.node, "act", why, (event,))
        rule = self.policy.corroborate.get(kind)
        if rule is None:
            return Verdict(event.node, "ignore", why or f"{event.kind} is not fault evidence", (event,))
        if rule.while_job_runs and not event.job:
            return Verdict(
                event.node, "ignore", f"{event.kind} on an idle node (per-job service not running)", (event,)
            )
        if event.kind == "unreachable":
            self._unreachable.setdefault(rack, {})[event.node] = event.at
        recent = self._recent(event.node, kind, event.at, rule.window_s)
        if rule.count and len(recent) >= rule.count:
            self.pending.pop((event.node, kind), None)
            return Verdict(
                event.node, "act", f"{len(recent)} {kind} reports within {rule.window_s:.0f}s", tuple(recent)
            )
        if rule.recheck_after_s is not None:
            self._wait(event, "recheck", event.at + rule.recheck_after_s, key=kind)
        return None

    def _wait(self, event: Event, mode: Literal["recheck"], due: float, key: str | None = None) -> None:
        slot = (event.node, key or event.key)
        if slot not in self.pending:
            self.pending[slot] = Pending(event.node, key or event.key, mode, due)
        self.pending[slot].events.append(event)

    def rack_incidents(self, now: float) -> list[str]:
        """Racks that just crossed the unreachable share (their waiting unreachable reports are dropped)."""
        declared = []
        for rack, seen in self._unreachable.items():
            if rack in self.incidents:
                continue
            recent = [n for n, at in seen.items() if now - at <= self.policy.rack_incident_window_s]
            size = self.rack_size(recent[0]) if recent else 0
            if size and len(recent) >= self.policy.rack_incident_share * size:
                self.incidents[rack] = now
                declared.append(rack)
                for slot in [s for s, p in self.pending.items() if p.key == "unreachable" and s[0] in seen]:
                    del self.pending[slot]
        return declared

    def _imex_of_job(self, event: Event) -> Verdict | None:
        """IMEX is started per job: trouble on ``sameJobNodes`` or more of one job's nodes at once is the job's."""
        window = self.policy.corroborate["imex-unhealthy"].window_s
        peers = {
            node
            for node, events in self.history.items()
            for e in events
            if e.kind == event.kind and e.job == event.job and event.at - e.at <= window
        }
        if len(peers) < self.policy.same_job_nodes:
            return None
        for slot in [s for s, p in self.pending.items() if p.key == event.kind and s[0] in peers]:
            del self.pending[slot]
        why = f"IMEX unhealthy on {len(peers)} nodes of job {event.job}: the job's, not the nodes'"
        return Verdict(event.node, "ignore", why, (event,))

    def fabric_incidents(self, now: float) -> list[str]:
        """Racks where NVLink evidence (the nodes' ``nvlink-down``: fabric health, NVLink errors) came from the
        rack-incident share of the nodes within its window: the NVLink domain, not the nodes. Held from now on
        (their waiting NVLink evidence dropped); only a person lets them go."""
        declared = []
        for rack, seen in self.fabric.items():
            if rack in self.held:
                continue
            recent = [n for n, at in seen.items() if now - at <= self.policy.rack_incident_window_s]
            size = self.rack_size(recent[0]) if recent else 0
            if size and len(recent) >= self.policy.rack_incident_share * size:
                self.held[rack] = now
                declared.append(rack)
                for slot in [s for s in self.pending if self.rack_of(s[0]) == rack]:
                    del self.pending[slot]
        return declared

    def to_doc(self, horizon: float) -> dict[str, Any]:
        """What the judge holds, as JSON (each node's history within ``horizon`` of its newest event)."""

        def recent(events: Sequence[Event]) -> list[list[Any]]:
            newest = max((e.at for e in events), default=0.0)
            return [event_doc(e) for e in events if newest - e.at <= horizon]

        pending = [
            {"node": p.node, "key": p.key, "mode": p.mode, "due": p.due, "events": [event_doc(e) for e in p.events]}
            for p in self.pending.values()
        ]
        return {
            "history": {node: kept for node, events in self.history.items() if (kept := recent(events))},
            "pending": pending,
            "incidents": self.incidents,
            "fabric": self.fabric,
            "held": self.held,
            "unreachable": self._unreachable,
            "suspectUntil": self.suspect_until,
        }

    def restore(self, raw: Mapping[str, Any]) -> None:
        """Put what :meth:`to_doc` saved back."""

        def by_node(seen: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
            return {str(rack): {str(n): float(at) for n, at in nodes.items()} for rack, nodes in seen.items()}

        self.history = {node: [event_of(e) for e in events] for node, events in raw.get("history", {}).items()}
        self.pending = {
            (p["node"], p["key"]): Pending(
                p["node"], p["key"], p["mode"], float(p["due"]), [event_of(e) for e in p["events"]]
            )
            for p in raw.get("pending", [])
        }
        self.incidents = {str(k): float(v) for k, v in raw.get("incidents", {}).items()}
        self.held = {str(k): float(v) for k, v in raw.get("held", {}).items()}
        self.fabric = by_node(raw.get("fabric", {}))
        self._unreachable = by_node(raw.get("unreachable", {}))
        self.suspect_until = {str(k): float(v) for k, v in raw.get("suspectUntil", {}).items()}

    def clear_incident(self, rack: str) -> None:
        self.incidents.pop(rack, None)
        self._unreachable.pop(rack, None)

    def due(self, now: float) -> list[Pending]:
        """Waiting evidence whose time has come (removed from the waiting list)."""
        ready = [p for p in self.pending.values() if p.due <= now]
        for p in ready:
            del self.pending[(p.node, p.key)]
        return sorted(ready, key=lambda p: (p.due, p.node))

    def recheck(self, item: Pending, gate: GateResult) -> Verdict:
        """A watched node after its recheck: act when the gate still fails, else let it be."""
        if gate.passed:
            return Verdict(item.node, "ignore", f"{item.key} did not last: the gate passes", tuple(item.events))
        return Verdict(
            item.node, "act", f"{item.key}, and the gate still fails ({gate.describe()})", tuple(item.events)
        )
