"""The scenario format of ``gb300 heal simulate`` (docs/self-healing.md#simulating-a-scenario).

``racks`` of 18 nodes named ``r0001-00`` .. ``r<NNNN>-17``; ``duration`` simulated seconds; ``jobs`` with node
patterns (``r0001-*,r0002-0[0-3]``, shell-style); ``events`` nodes and Azure report at simulated times;
``truth``, what is really wrong (read by the simulated world only; ``recurs_after``: the cure holds that long;
``seen_by: nccl``: a fault the gate passes and only the rack NCCL run shows);
``azure``, how ARM answers the loop's calls by window (``status: 202`` with a ``code``: accepted, then the operation
fails); ``scheduled``, Azure Scheduled Events; ``head``, the head's own crashes; ``operator``, a person's
resume or ``Action:`` request; ``remediation``, optional overrides of the stack's ``gb300:remediation`` (camelCase
keys). Every problem is one line naming its key path; exit 2. :func:`bound` refuses work beyond stated bounds.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gb300.config import stack_yaml
from gb300.config.remediation import RemediationSettings
from gb300.errors import ConfigError, Problem
from gb300.facts.loader import data
from gb300.heal.policy import EVENT_KINDS, hard_checks

RACK_SIZE = 18
POLL_MIN_S, POLL_MAX_S = 10.0, 3600.0
"""``--poll``: the loop's tick while it has work (the head's pollSeconds is 60)."""
FILE_MAX_BYTES = 256 * 1024
"""A scenario file larger than this is refused before it is parsed."""
NODE_TICKS_MAX = 2 * 64 * RACK_SIZE * 1440
"""Work bound: nodes x ticks (duration / poll), twice a simulated day of 64 racks at a 60 s tick (under a minute)."""
EVENTS_MAX = 50_000
"""Work bound: events after their node patterns are expanded."""
CuredBy = Literal["self", "reboot", "reimage", "replace", "none"]
CURE_LEVEL: Mapping[str, int] = {"self": 0, "reboot": 1, "reimage": 2, "replace": 3, "none": 4}
ECC_CODES = ("row-remap-pending", "uncorrectable")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class JobSpec(_Model):
    name: str = Field(min_length=1)
    nodes: str = Field(min_length=1)
    start: float = Field(0, ge=0)
    end: float = Field(gt=0)


class EventSpec(_Model):
    at: float = Field(ge=0)
    node: str = Field(min_length=1)
    kind: Literal[EVENT_KINDS]  # type: ignore[valid-type]
    code: int | str | None = None
    check: str | None = None
    context: str | None = None

    @model_validator(mode="after")
    def _detail(self) -> EventSpec:
        if self.kind == "xid" and not isinstance(self.code, int):
            raise ValueError(f"kind xid needs an integer 'code' (got {self.code!r})")
        if self.kind == "ecc" and self.code not in ECC_CODES:
            raise ValueError(f"kind ecc needs 'code' {' or '.join(ECC_CODES)} (got {self.code!r})")
        if self.kind == "check-failed":
            known = set(data("health.yaml")["defaults"]["checks"])
            if self.check not in known:
                raise ValueError(f"kind check-failed needs 'check', a health-gate check (got {self.check!r})")
        return self


class TruthSpec(_Model):
    node: str = Field(min_length=1)
    cured_by: CuredBy
    until: float | None = Field(None, ge=0)
    recurs_after: float | None = Field(None, ge=600)
    seen_by: Literal["gate", "nccl"] = "gate"  # nccl: the node's gate passes; only the rack NCCL run shows it


AzureCall = Literal["restart", "reimage", "redeploy", "list", "report", "any"]
RUNG_CALLS = ("restart", "reimage", "redeploy")


class AzureWindow(_Model):
    """How ARM answers the loop's calls between ``from`` and ``until``: a status of 400 or more refuses the call;
    ``status: 202`` with a ``code`` accepts a restart, reimage or redeploy whose operation then fails with that code
    (the VM's instance view reads ``ProvisioningState/failed/<code>``, the VM is left stopped, nothing is cured)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    start: float = Field(alias="from", ge=0)
    until: float = Field(gt=0)
    call: AzureCall = "any"
    status: int = Field(ge=202, le=599)
    retryAfter: float | None = Field(None, ge=0, le=86400)  # noqa: N815 - the scenario format's key
    node: str | None = Field(None, min_length=1)
    code: str | None = Field(None, pattern=r"^[A-Za-z]{1,64}$")  # ARM's error code in the body (AllocationFailed...)

    @model_validator(mode="after")
    def _order(self) -> AzureWindow:
        if self.until <= self.start:
            raise ValueError(f"until must be after from (got {self.until!r})")
        if self.status < 400 and (self.status != 202 or self.code is None or self.call not in RUNG_CALLS):
            raise ValueError(
                f"status below 400 must be 202 with a 'code' and a call of {', '.join(RUNG_CALLS)} (an operation ARM "
                f"accepts and that fails later; got status {self.status}, code {self.code!r}, call {self.call!r})"
            )
        return self


PLATFORM_EVENTS = ("Freeze", "Reboot", "Redeploy", "Preempt", "Terminate")
"""Azure Scheduled Events' types (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events)."""


class ScheduledEvent(_Model):
    """An Azure Scheduled Event (IMDS) on the nodes matching ``node``: announced ``at``, started ``notBefore`` seconds
    later (default: the type's minimum notice, data/remediation.yaml simulation.scheduledEvents). The node's
    gb300-scheduled-events drains it (``gb300-maintenance: <Type> <EventId> ...``) unless it is drained already,
    and resumes it once the event is over. Freeze pauses the VM, Reboot reboots it, Redeploy moves it to a new host;
    Preempt and Terminate delete it (its Slurm record stays, with no VM)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    at: float = Field(ge=0)
    node: str = Field(min_length=1)
    type: Literal[PLATFORM_EVENTS]  # type: ignore[valid-type]
    notBefore: float | None = Field(None, ge=0, le=86400)  # noqa: N815 - Azure's field name


class HeadFault(_Model):
    """The head's own fault, back ``down`` s later: ``crash-after-call`` dies right after its next Azure call returns,
    before it saves; ``crash-in-tick`` dies in its first tick at or after ``at``, at the ``after``-th step of that
    tick that reaches the world (an Azure call answered, a Slurm write answered, a state save about to be written),
    or before its last save when the tick has fewer steps (:func:`gb300.heal.generate.crash_every_tick`)."""

    at: float = Field(ge=0)
    kind: Literal["crash-after-call", "crash-in-tick"]
    down: float = Field(0, ge=0, le=86400)
    after: int = Field(1, ge=1, le=10_000)


class OperatorAction(_Model):
    """What a person does: ``resume`` a halted loop, or ``request`` a repair of a node (``Action:Reboot``...)."""

    at: float = Field(ge=0)
    kind: Literal["resume", "request"]
    node: str | None = Field(None, min_length=1)
    action: Literal["reboot", "replace"] | None = None

    @model_validator(mode="after")
    def _request(self) -> OperatorAction:
        if self.kind == "request" and (self.node is None or self.action is None):
            raise ValueError("kind request needs 'node' and 'action' (reboot or replace)")
        return self


class Scenario(_Model):
    racks: int = Field(ge=1, le=2000)
    duration: float = Field(gt=0, le=30 * 86400)
    jobs: list[JobSpec] = Field(default_factory=list)
    events: list[EventSpec] = Field(default_factory=list)
    truth: list[TruthSpec] = Field(default_factory=list)
    azure: list[AzureWindow] = Field(default_factory=list)
    head: list[HeadFault] = Field(default_factory=list)
    operator: list[OperatorAction] = Field(default_factory=list)
    scheduled: list[ScheduledEvent] = Field(default_factory=list)
    remediation: dict[str, Any] = Field(default_factory=dict)

    @property
    def nodes(self) -> list[str]:
        return [node_name(r, i) for r in range(1, self.racks + 1) for i in range(RACK_SIZE)]


def node_name(rack: int, index: int) -> str:
    return f"r{rack:04d}-{index:02d}"


def match(pattern: str, nodes: list[str]) -> list[str]:
    """Nodes matching any comma-separated shell pattern, in fleet order."""
    parts = [p.strip() for p in pattern.split(",") if p.strip()]
    if not parts:
        return []
    shell = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in parts))  # one regex: fnmatchcase's rules
    return [n for n in nodes if shell.match(n)]


def _path(where: str, loc: tuple[Any, ...]) -> str:
    out = where
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def parse(raw: Any, where: str = "scenario") -> tuple[Scenario, RemediationSettings]:
    """The scenario and the remediation settings it runs with; :class:`ConfigError` lists every problem."""
    if not isinstance(raw, Mapping):
        raise ConfigError([Problem(where, "must be a mapping with racks, duration, events and truth")])
    try:
        scenario = Scenario.model_validate(dict(raw))
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            msg = str(err["msg"]).removeprefix("Value error, ")
            got = err.get("input")
            if err["type"] != "value_error" and not isinstance(got, Mapping):
                msg += f" (got {got!r})"
            problems.append(Problem(_path(where, loc[:3] if err["type"] == "literal_error" else loc), msg))
        raise ConfigError(problems) from None
    nodes = scenario.nodes
    problems = []
    patterns: list[tuple[str, list[str | None]]] = [
        ("jobs", [j.nodes for j in scenario.jobs]),
        ("events", [e.node for e in scenario.events]),
        ("truth", [t.node for t in scenario.truth]),
        ("azure", [w.node for w in scenario.azure]),
        ("operator", [o.node for o in scenario.operator]),
        ("scheduled", [s.node for s in scenario.scheduled]),
    ]
    for field, items in patterns:
        for i, pattern in enumerate(items):
            if pattern is not None and not match(pattern, nodes):
                problems.append(
                    Problem(
                        f"{where}.{field}[{i}]", f"matches no node (got {pattern!r}); nodes are r0001-00 .. {nodes[-1]}"
                    )
                )
    for i, job in enumerate(scenario.jobs):
        if job.end <= job.start:
            problems.append(Problem(f"{where}.jobs[{i}].end", f"must be after start (got {job.end!r})"))
    try:
        # The simulator needs no role: the rails and options are what a scenario sets (enabled stays off here).
        settings = RemediationSettings.model_validate({**scenario.remediation, "enabled": False})
    except ValidationError as exc:
        problems += [
            Problem(_path(f"{where}.remediation", tuple(e["loc"])), f"{e['msg']} (got {e.get('input')!r})")
            for e in exc.errors(include_url=False)
        ]
        settings = RemediationSettings()
    if problems:
        raise ConfigError(problems)
    return scenario, settings


def load(path: Path) -> tuple[Scenario, RemediationSettings]:
    """Read a scenario file with the strict reader of user YAML (gb300.config.stack_yaml) and parse it."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0  # the reader names a missing file
    if size > FILE_MAX_BYTES:
        raise ConfigError([Problem(path.name, f"is {size} bytes; a scenario may have at most {FILE_MAX_BYTES}")])
    return parse(stack_yaml.load(path), where=path.name)


def bound(scenario: Scenario, poll_s: float, where: str = "scenario") -> None:
    """Refuse, in one line each, work beyond the stated bounds (:data:`NODE_TICKS_MAX`, :data:`EVENTS_MAX`,
    :data:`POLL_MIN_S` .. :data:`POLL_MAX_S`) before any of it is done."""
    problems = []
    if not POLL_MIN_S <= poll_s <= POLL_MAX_S:
        problems.append(Problem("--poll", f"must be {POLL_MIN_S:g} to {POLL_MAX_S:g} seconds (got {poll_s:g})"))
    else:
        work = scenario.racks * RACK_SIZE * scenario.duration / poll_s
        if work > NODE_TICKS_MAX:
            problems.append(
                Problem(
                    where,
                    f"{scenario.racks} racks for {scenario.duration:g} s at a {poll_s:g} s tick is {work:,.0f} "
                    f"node-ticks; at most {NODE_TICKS_MAX:,} (fewer racks, a shorter duration or a longer --poll)",
                )
            )
    nodes = scenario.nodes
    expanded = sum(len(match(e.node, nodes)) for e in scenario.events[: EVENTS_MAX + 1])
    if expanded > EVENTS_MAX:
        problems.append(Problem(f"{where}.events", f"expand to more than {EVENTS_MAX:,} node events"))
    if problems:
        raise ConfigError(problems)


__all__ = [
    "CURE_LEVEL",
    "PLATFORM_EVENTS",
    "RACK_SIZE",
    "Scenario",
    "ScheduledEvent",
    "bound",
    "hard_checks",
    "load",
    "match",
    "node_name",
    "parse",
]
