"""The fleet rails (docs/self-healing.md#safety-rails): what bounds the repair ladder across the fleet.

:class:`Rails` remembers when each node showed fault evidence and when each rack was held as one NVLink incident,
halts the loop when either count crosses its share of the fleet within ``haltWindowSeconds``, and admits queued
cases to the ladder within ``maxNodesPerRack`` and ``maxRacks``. It saves and restores its own fields
(:meth:`Rails.to_doc`, :meth:`Rails.restore`); the ladder (:mod:`gb300.heal.loop`) never writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gb300.heal.case import Case
from gb300.heal.policy import Policy

ACTIVE = ("draining", "acting", "revalidating")
"""Case states that hold one of the rails' repair slots."""
NAMED_MAX = 12
"""Racks a halt reason names (the rest counted), so the record stays readable at fleet scale."""


@dataclass
class Rails:
    """The halt rail and the admission rails of one loop."""

    policy: Policy
    halted: bool = False
    rejudge: bool = False
    faults: list[tuple[float, str]] = field(default_factory=list)
    holds: list[tuple[float, str]] = field(default_factory=list)
    probation: list[str] = field(default_factory=list)  # nodes queued when a person resumed the loop
    probe_failed: list[str] = field(default_factory=list)  # of those, the ones whose repair failed a recheck

    def fault(self, now: float, node: str) -> None:
        """A node showed fault evidence now (a person's request is not fault evidence)."""
        self.faults.append((now, node))

    def held(self, now: float, rack: str) -> None:
        """A rack was held now as one NVLink incident: it counts toward the halt rail as one rack."""
        self.holds.append((now, rack))

    def halt_reason(self, nodes: int, racks: int, now: float) -> str | None:
        """Why the loop halts now, or None: the nodes' rail (:meth:`Policy.halt_reason`), or more racks held
        within the halt window than ``haltShare`` of the racks and at least two (one held rack is one incident;
        many at once is the fabric or a rollout, not a repair for this loop)."""
        why = self.policy.halt_reason(self.faults, nodes, now)
        if why is not None:
            return why
        held = sorted({r for t, r in self.holds if now - t <= self.policy.halt_window_s})
        if not racks or len(held) <= max(self.policy.halt_share * racks, 1):
            return None
        named = ", ".join(held[:NAMED_MAX]) + (f" and {len(held) - NAMED_MAX} more" if len(held) > NAMED_MAX else "")
        return (
            f"{len(held)} of {racks} racks held as NVLink incidents within {self.policy.halt_window_s:.0f}s "
            f"(more than {self.policy.halt_share:.0%} and 1: {named}): repairs stopped, waiting for a person"
        )

    def check(self, nodes: int, racks: int, now: float) -> str | None:
        """Halt when a rail is crossed; the reason when it halts now, else None."""
        why = None if self.halted else self.halt_reason(nodes, racks, now)
        if why is not None:
            self.halted = True
        return why

    def on_probation(self, nodes: Iterable[str]) -> None:
        """A person resumed the loop: the first repairs of ``nodes`` (the cases still queued) test the resume."""
        self.probation, self.probe_failed = sorted(nodes), []

    def probe(self, node: str, passed: bool) -> str | None:
        """A repair of a node queued at the resume ended a rung: passed (returned), probation ends; failed a recheck,
        counted. Why the loop halts again, or None: ``resumeRecheckFailures`` of them failed before one returned
        (the halting evidence is still there: a resume too early must not repeat the storm)."""
        if node not in self.probation:
            return None
        if passed:
            self.probation, self.probe_failed = [], []
            return None
        if node not in self.probe_failed:
            self.probe_failed.append(node)
        if len(self.probe_failed) < self.policy.resume_failures or self.halted:
            return None
        self.halted = True
        return (
            f"{len(self.probe_failed)} of the first repairs after the resume failed their rechecks "
            f"({', '.join(self.probe_failed[:NAMED_MAX])}) and none returned: the evidence that halted the loop is "
            "still there; repairs stopped again, waiting for a person"
        )

    def admit(self, cases: Iterable[Case], drain: Callable[[Case], bool]) -> None:
        """Drain queued cases, oldest evidence first, while their rack has a slot (``maxNodesPerRack``, drained
        nodes waiting for their jobs included) and the fleet has a rack slot (``maxRacks``, :meth:`repairing`)."""
        cases = list(cases)
        per_rack: dict[str, int] = {}
        for case in cases:
            if case.state in ACTIVE:
                per_rack[case.instance.rack.name] = per_rack.get(case.instance.rack.name, 0) + 1
        racks = self.repairing(cases)
        for case in sorted((c for c in cases if c.state == "queued"), key=lambda c: c.first_evidence):
            rack = case.instance.rack.name
            if per_rack.get(rack, 0) >= self.policy.max_nodes_per_rack:
                continue
            if rack not in racks and len(racks) >= self.policy.max_racks:
                continue
            if drain(case):
                per_rack[rack] = per_rack.get(rack, 0) + 1
                racks.add(rack)

    @staticmethod
    def repairing(cases: Iterable[Case]) -> set[str]:
        """Racks under repair for ``maxRacks``: a node drained and still waiting for its job (a week-long run) holds
        no rack slot, so idle faulty nodes elsewhere are repaired meanwhile."""
        return {c.instance.rack.name for c in cases if c.state in ("acting", "revalidating")}

    def may_start(self, cases: Iterable[Case], case: Case) -> bool:
        """Whether a drained node whose jobs ended may start its repair now: its rack is under repair already, or
        the fleet has a rack slot free."""
        racks = self.repairing(cases)
        return case.instance.rack.name in racks or len(racks) < self.policy.max_racks

    def to_doc(self, horizon: float) -> dict[str, Any]:
        """The rails' fields as the state file keeps them (times older than ``horizon`` before the newest left
        out)."""

        def recent(seen: list[tuple[float, str]]) -> list[list[Any]]:
            return [[t, n] for t, n in seen if seen[-1][0] - t <= horizon]

        seen = {"faults": recent(self.faults), "holds": recent(self.holds)}
        probation = {"probation": list(self.probation), "probeFailed": list(self.probe_failed)}
        return {"halted": self.halted, "rejudge": self.rejudge, **seen, **probation}

    def restore(self, doc: Mapping[str, Any]) -> None:
        """Put the fields :meth:`to_doc` saved back."""
        self.halted = bool(doc.get("halted", False))
        self.rejudge = bool(doc.get("rejudge", False))
        self.faults = [(float(t), str(n)) for t, n in doc.get("faults", [])]
        self.holds = [(float(t), str(r)) for t, r in doc.get("holds", [])]
        self.probation = [str(n) for n in doc.get("probation", [])]
        self.probe_failed = [str(n) for n in doc.get("probeFailed", [])]


def resumed(doc: dict[str, Any]) -> None:
    """A person resumed the halted loop: the halt and both windows are cleared, and the next tick judges the queued
    cases again."""
    doc |= {"halted": False, "faults": [], "holds": [], "rejudge": True}
