"""Slurm's command line as gb300's tools on the head use it: ``scontrol`` and ``squeue``, their JSON parsed.

Shared by ``gb300 rollout`` (:mod:`gb300.ops.rollout`) and the remediation loop (:mod:`gb300.heal`), which runs on
the head from the node payload with nothing but the standard library and the Azure SDK: this module imports only
the standard library and gb300's own light modules. The drain reason prefixes name each drain's owner.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gb300.errors import Gb300Error
from gb300.slurm.hostlist import compress, expand

DRAIN_PREFIX = "gb300-rollout:"
"""Reason prefix of the rollout's drains. ``gb300-health-check`` resumes only its own ``gb300:`` drains."""
HEALTH_PREFIX = "gb300:"
"""Reason prefix of ``gb300-health-check``'s drains: a node drained with it failed the health gate."""
MAINTENANCE_PREFIX = "gb300-maintenance:"
"""Reason prefix of the drains gb300-scheduled-events makes before Azure maintenance (IMDS Scheduled Events):
``gb300-maintenance: <EventType> <EventId> not before <NotBefore> (Azure Scheduled Events)``."""


DOWN_STATES = frozenset({"DOWN", "NOT_RESPONDING", "NO_RESPOND", "POWERED_DOWN", "FAIL", "UNKNOWN"})
"""State words of a node that does not answer the controller (or is powered off): no gate verdict, not back."""

DRAIN_STATES = frozenset({"DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING"})
"""State words of a drained node (the DRAIN flag, in JSON a word of ``state``; FAIL drains too): only then is its
reason someone's drain. Slurm 24.11 keeps the old reason on a resumed node (data/slurm_releases.yaml
reasonKeptAfterResume), so a reason alone says nothing about the node now."""


@dataclass(frozen=True)
class SlurmNode:
    """What the controller says about one node: state words (``IDLE``, ``DRAIN``...), reason, boot time, and the
    free-text ``comment`` and ``extra`` fields (gb300-heal-publish and gb300-fabric-publish write them)."""

    name: str
    states: frozenset[str]
    reason: str
    boot_time: float
    comment: str = ""
    extra: str = ""

    @property
    def drained(self) -> bool:
        return bool(self.states & DRAIN_STATES)

    @property
    def drain_reason(self) -> str:
        """The reason of the node's drain, or "" when it is not drained (a reason left over from before a resume)."""
        return self.reason if self.drained else ""

    @property
    def reregistering(self) -> bool:
        """NOT_RESPONDING with boot time 0 and not DOWN: slurmctld asked the node to register again (a resume,
        an undrain, a reboot) and pinged it; for about a second after any resume every node reads so
        (data/slurm_releases.yaml notRespondingAfterResume). Not by itself a node that does not answer."""
        no_answer = bool(self.states & {"NOT_RESPONDING", "NO_RESPOND"})
        return no_answer and self.boot_time == 0 and not self.states & {"DOWN", "POWERED_DOWN", "FAIL"}


@dataclass(frozen=True)
class SlurmJob:
    """A job slurmctld holds: its id, its hosts, when it started and ended (None: unset), and whether it runs."""

    job_id: str
    hosts: frozenset[str]
    start: float | None
    end: float | None
    running: bool


RUNNING_JOB = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING"})
"""``job_state`` words of a job that still holds its nodes."""


def parse_nodes(text: str) -> dict[str, SlurmNode]:
    """``scontrol --json show node [hosts]``, parsed: each record of ``nodes`` by name (``hostname`` before Slurm
    23.02). The one reader of that command (``gb300 rollout`` and the remediation loop on the head)."""
    out = {}
    for raw in json.loads(text or "{}").get("nodes") or []:
        name = str(raw.get("name") or raw.get("hostname") or "")
        out[name] = SlurmNode(
            name,
            _states(raw),
            str(raw.get("reason") or ""),
            _number(raw.get("boot_time")),
            str(raw.get("comment") or ""),
            str(raw.get("extra") or ""),
        )
    return out


def parse_jobs(text: str) -> list[SlurmJob]:
    """``scontrol --json show job``, parsed: each record's ``job_id``, ``nodes`` (a hostlist), ``job_state`` (a list,
    a string before 23.02), ``start_time`` and ``end_time``; a record without nodes or id is left out. A running
    job's ``end_time`` is its time limit, so ``running`` (from ``job_state``) decides whether it ended."""
    jobs = []
    for raw in json.loads(text or "{}").get("jobs") or []:
        nodes = str(raw.get("nodes") or "")
        if not nodes or raw.get("job_id") is None:
            continue
        states = raw.get("job_state")
        words = {str(w).upper() for w in (states if isinstance(states, list) else [states or ""])}
        hosts = frozenset(expand(nodes))
        start, end = _time(raw.get("start_time")), _time(raw.get("end_time"))
        jobs.append(SlurmJob(str(raw["job_id"]), hosts, start, end, bool(words & RUNNING_JOB)))
    return jobs


Runner = Callable[[Sequence[str]], str]


def run_local(argv: Sequence[str]) -> str:
    """Run a command and return its standard output; a non-zero exit raises :class:`SlurmError`."""
    # errors="replace": a node's comment or reason cut inside a UTF-8 character must not make every read fail.
    done = subprocess.run(
        list(argv), capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=120, check=False
    )
    if done.returncode != 0:
        raise SlurmError(f"`{shlex.join(argv)}` exited {done.returncode}: {done.stderr.strip()[:300]}")
    return done.stdout


class SlurmError(Gb300Error, RuntimeError):
    """A Slurm command failed."""


class Slurm:
    """``scontrol`` and ``squeue``, run on the head (empty ``via``) or through a prefix such as ``ssh admin@head``.

    A reason is read together with the node's state: :attr:`SlurmNode.drain_reason` is a drain's reason only while
    the node is drained."""

    def __init__(self, via: Sequence[str] = (), run: Runner = run_local) -> None:
        self.via = tuple(via)
        self._run = run

    def _call(self, argv: Sequence[str]) -> str:
        # ssh hands the remote shell one string: quote the command so a reason with spaces stays one word.
        return self._run([*self.via, shlex.join(argv)] if self.via else list(argv))

    def drain(self, hosts: Sequence[str], reason: str) -> None:
        self._call(["scontrol", "update", f"nodename={compress(hosts)}", "state=drain", f"reason={reason}"])

    def resume(self, hosts: Sequence[str]) -> None:
        self._call(["scontrol", "update", f"nodename={compress(hosts)}", "state=resume"])

    def jobs(self, hosts: Sequence[str]) -> list[str]:
        """Ids of the jobs running (or completing) on any of ``hosts``."""
        out = self._call(["squeue", "--noheader", "--format=%A", f"--nodelist={compress(hosts)}"])
        return [line.strip() for line in out.splitlines() if line.strip()]

    def nodes(self, hosts: Sequence[str]) -> dict[str, SlurmNode]:
        """The controller's records of ``hosts`` (``scontrol --json show node``); unknown hosts are absent."""
        wanted = set(hosts)
        found = parse_nodes(self._call(["scontrol", "--json", "show", "node", compress(hosts)]))
        return {name: node for name, node in found.items() if name in wanted}


def _states(raw: Mapping[str, Any]) -> frozenset[str]:
    """State words from ``state`` (a list since Slurm 23.02, a string before) and ``state_flags``."""
    words: list[str] = []
    for key in ("state", "state_flags"):
        value = raw.get(key)
        items = value if isinstance(value, list) else str(value or "").replace("+", " ").split()
        words.extend(str(v).upper() for v in items)
    return frozenset(words)


def _number(value: Any) -> float:
    """A Slurm JSON time: a plain number, or ``{"set": true, "number": N}`` (Slurm 23.11+)."""
    if isinstance(value, Mapping):
        return float(value.get("number") or 0) if value.get("set", True) else 0.0
    return float(value or 0)


def _time(value: Any) -> float | None:
    """A Slurm JSON time (``{"set", "infinite", "number"}`` since 23.11, a bare number before); None when unset."""
    if isinstance(value, Mapping) and (not value.get("set", True) or value.get("infinite")):
        return None
    return _number(value) or None


__all__ = [
    "DOWN_STATES",
    "DRAIN_PREFIX",
    "DRAIN_STATES",
    "HEALTH_PREFIX",
    "MAINTENANCE_PREFIX",
    "RUNNING_JOB",
    "Runner",
    "Slurm",
    "SlurmError",
    "SlurmJob",
    "SlurmNode",
    "parse_jobs",
    "parse_nodes",
    "run_local",
]
