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
from gb300.slurm.hostlist import compress

DRAIN_PREFIX = "gb300-rollout:"
"""Reason prefix of the rollout's drains. ``gb300-health-check`` resumes only its own ``gb300:`` drains."""
HEALTH_PREFIX = "gb300:"
"""Reason prefix of ``gb300-health-check``'s drains: a node drained with it failed the health gate."""


@dataclass(frozen=True)
class SlurmNode:
    """What the controller says about one node: state words (``IDLE``, ``DRAIN``...), reason and boot time."""

    name: str
    states: frozenset[str]
    reason: str
    boot_time: float


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
    """``scontrol`` and ``squeue``, run on the head (empty ``via``) or through a prefix such as ``ssh admin@head``."""

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
        doc = json.loads(self._call(["scontrol", "--json", "show", "node", compress(hosts)]) or "{}")
        wanted = set(hosts)
        out = {}
        for raw in doc.get("nodes") or []:
            name = str(raw.get("name") or raw.get("hostname") or "")
            if name not in wanted:
                continue
            out[name] = SlurmNode(name, _states(raw), str(raw.get("reason") or ""), _number(raw.get("boot_time")))
        return out


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


__all__ = ["DRAIN_PREFIX", "HEALTH_PREFIX", "Runner", "Slurm", "SlurmError", "SlurmNode", "run_local"]
