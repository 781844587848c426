"""Slurm accounts, QoS and fair share from the stack file: the file ``gb300-slurm-accounts`` applies with sacctmgr,
and the slurm.conf lines that make Slurm enforce them.

:func:`render_accounts` writes ``slurm-accounts.tsv``: one record a line, fields separated by tabs, every field
checked by :func:`gb300.io.quoting.checked` (no control character, so no tab or newline inside a field). The step
reads it with ``IFS=$'\\t' read -r`` and passes each field to sacctmgr as one argument: nothing in it is evaluated
by a shell. Values are written as ``sacctmgr -nP show`` prints them, so the step compares and changes only what
differs:

- ``cluster <name>``: the cluster the associations belong to;
- ``qos <name> <priority> <preempt> <maxwall> <max GPUs per user> <GPU limit>``;
- ``account <name> <fairshare> <GPU limit> <qos> <default qos>``;
- ``user <name> <accounts> <default account>``.

Lists are comma-separated and sorted (sacctmgr prints QoS lists sorted); an empty field is "not set".
:func:`slurm_conf_lines` gives the priority, enforcement and preemption keys (``data/slurm_priority.yaml``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from gb300.facts.loader import data
from gb300.io import quoting

__all__ = ["SlurmAccount", "SlurmAccounts", "SlurmQos", "render_accounts", "slurm_conf_lines", "wall_time"]

FILE = "slurm-accounts.tsv"  # gb300.slurm.config.ACCOUNTS_FILE: the name in refusals


@dataclass(frozen=True)
class SlurmQos:
    """A QoS: its priority, the QoS it preempts, and its limits (None: not set)."""

    name: str
    priority: int = 0
    preempt: tuple[str, ...] = ()
    max_wall_hours: int | None = None
    max_gpus_per_user: int | None = None
    gpu_limit: int | None = None


@dataclass(frozen=True)
class SlurmAccount:
    """An account: its share, GPU limit, allowed and default QoS (empty: Slurm's own)."""

    name: str
    fairshare: int = 1
    gpu_limit: int | None = None
    qos: tuple[str, ...] = ()
    default_qos: str | None = None


@dataclass(frozen=True)
class SlurmAccounts:
    """Everything gb300-slurm-accounts applies: QoS, accounts, and each user's accounts and default account."""

    qos: tuple[SlurmQos, ...] = ()
    accounts: tuple[SlurmAccount, ...] = ()
    users: tuple[tuple[str, tuple[str, ...], str], ...] = ()  # (name, accounts, default account)

    @property
    def preempts(self) -> bool:
        """Whether any QoS preempts another (slurm.conf then needs PreemptType=preempt/qos)."""
        return any(q.preempt for q in self.qos)


def wall_time(hours: int) -> str:
    """A time limit of ``hours`` as sacctmgr prints it: ``HH:MM:SS``, or ``D-HH:MM:SS`` from a day on."""
    days, rest = divmod(hours, 24)
    return f"{days}-{rest:02d}:00:00" if days else f"{rest:02d}:00:00"


def _text(value: int | None) -> str:
    return "" if value is None else str(value)


def _record(kind: str, *fields: str) -> str:
    return "\t".join(quoting.checked(field, f"{FILE} {kind} field") for field in (kind, *fields)) + "\n"


def render_accounts(cluster_name: str, accounts: SlurmAccounts) -> str:
    """``slurm-accounts.tsv`` for ``cluster_name`` (see the module's docstring); refuses a control character in any
    value (:class:`gb300.io.quoting.UnsafeTextError`)."""
    lines = [
        "# gb300 Slurm accounts (gb300:slurm.accounts, .qos, .users), applied by gb300-slurm-accounts with sacctmgr.\n",
        "# Fields are tab-separated, as sacctmgr -nP show prints them; an empty field is not set.\n",
        _record("cluster", cluster_name),
    ]
    for q in accounts.qos:
        wall = "" if q.max_wall_hours is None else wall_time(q.max_wall_hours)
        lines.append(
            _record(
                "qos", q.name, str(q.priority), ",".join(sorted(q.preempt)), wall, _text(q.max_gpus_per_user),
                _text(q.gpu_limit),
            )
        )  # fmt: skip
    for a in accounts.accounts:
        qos = ",".join(sorted(a.qos))
        lines.append(_record("account", a.name, str(a.fairshare), _text(a.gpu_limit), qos, a.default_qos or ""))
    for name, member_of, default in accounts.users:
        lines.append(_record("user", name, ",".join(sorted(member_of)), default))
    return "".join(lines)


@functools.cache
def _priority() -> dict[str, Any]:
    return data("slurm_priority.yaml")


def accounting_tres() -> str:
    """slurm.conf's ``AccountingStorageTRES`` whenever accounting is on: GPUs counted (``gres/gpu``), so sacct's
    ``tres.allocated`` names each job's GPUs (``gb300 usage``) and ``GrpTRES=gres/gpu=N`` can limit them."""
    return str(_priority()["tres"])


def slurm_conf_lines(accounts: SlurmAccounts) -> tuple[tuple[str, str], ...]:
    """slurm.conf keys for declared accounts: enforcement, multifactor priority, and preemption by QoS when a QoS
    preempts (``data/slurm_priority.yaml``). GPUs are a counted resource whenever accounting is on
    (:func:`accounting_tres`)."""
    facts = _priority()
    lines = [("AccountingStorageEnforce", str(facts["enforce"]))]
    lines += [(str(key), str(value)) for key, value in facts["settings"].items()]
    if accounts.preempts:
        lines += [(str(key), str(value)) for key, value in facts["preempt"].items()]
    return tuple(lines)
