"""``gb300:slurm.accounts``, ``gb300:slurm.qos`` and ``gb300:slurm.users``: who may run what, and how much of the
cluster each group gets (docs/accounts.md).

The models hold the syntax (names Slurm keeps as they are written, GUIDs, ranges); :class:`Accounts` checks what
reads several entries (duplicates, a QoS named but not declared, a default account per user). What needs the rest of
the stack (the cluster's GPUs, job accounting) is :class:`gb300.config.models.StackConfig`'s.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Sequence
from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field

from gb300.config.base import Checks, ConfigModel
from gb300.config.checks import PathError

__all__ = ["Account", "AccountUser", "Accounts", "Qos", "SlurmName", "SlurmUser"]

# sacctmgr lowercases account and QoS names (and user names, unless slurmdbd keeps their case): a name given in
# lowercase is the name Slurm shows. Neither ',' nor '=' nor a space: sacctmgr splits its arguments on them.


def check_slurm_name(value: str) -> str:
    """An account or QoS name as Slurm keeps it: lowercase, no separator sacctmgr splits on."""
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", value):
        raise ValueError(
            "must be lowercase letters, digits, '_' and '-', starting with a letter (sacctmgr lowercases account and "
            f"QoS names) (got {value!r})"
        )
    return value


def check_slurm_user(value: str) -> str:
    """A Linux user name as Slurm keeps it: lowercase, no separator sacctmgr splits on."""
    if not re.fullmatch(r"[a-z_][a-z0-9_.@-]*", value):
        raise ValueError(
            "must be a lowercase Linux user name: letters, digits, '_', '.', '@' and '-', not starting with a digit, "
            f"'.', '@' or '-' (got {value!r})"
        )
    return value


SlurmName = Annotated[str, Field(min_length=1, max_length=40), AfterValidator(check_slurm_name)]
SlurmUser = Annotated[str, Field(min_length=1, max_length=64), AfterValidator(check_slurm_user)]
_RESERVED = ("root",)  # Slurm's own root account and its user root


def check_guid(value: str) -> str:
    """An Entra object ID: a GUID, in its lowercase hyphenated form."""
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        raise ValueError(
            f"must be an Entra group object ID, a GUID such as '00000000-0000-0000-0000-000000000000' (got {value!r})"
        ) from None
    if str(parsed) != value.lower() or len(value) != 36:
        raise ValueError(f"must be a GUID in its hyphenated form, 8-4-4-4-12 hex digits (got {value!r})")
    return value.lower()


EntraGroup = Annotated[str, Field(max_length=36), AfterValidator(check_guid)]


class Qos(ConfigModel):
    """One entry of ``gb300:slurm.qos``: a quality of service jobs ask for with ``--qos``."""

    name: SlurmName
    """The QoS name (lowercase letters, digits, `_`, `-`); `normal` is Slurm's own default QoS, declare it to set its
    priority."""
    priority: Annotated[int, Field(ge=0, le=1_000_000, strict=True)] = 0
    """The QoS priority; with `PriorityWeightQOS` it adds to the priority of the jobs that use it."""
    preempt: list[SlurmName] = Field(default_factory=list)
    """The QoS whose jobs this QoS's jobs may preempt (requeue), each declared in gb300:slurm.qos."""
    max_wall_hours: Annotated[int, Field(ge=1, le=365 * 24, strict=True)] | None = None
    """The longest a job of this QoS may run, in hours (`MaxWall`); unset: no limit of the QoS's own."""
    max_gpus_per_user: Annotated[int, Field(ge=1, strict=True)] | None = None
    """The most GPUs one user's running jobs of this QoS hold together (`MaxTRESPerUser=gres/gpu=N`)."""
    gpu_limit: Annotated[int, Field(ge=1, strict=True)] | None = None
    """The most GPUs all running jobs of this QoS hold together (`GrpTRES=gres/gpu=N`)."""

    def check_no_self_preemption(self) -> None:
        """A QoS does not preempt itself (sacctmgr refuses it)."""
        for i, name in enumerate(self.preempt):
            if name == self.name:
                raise PathError(("preempt", i), f"names the QoS itself (got {name!r})", relative=True)

    CHECKS: ClassVar[Checks] = (check_no_self_preemption,)


class Account(ConfigModel):
    """One entry of ``gb300:slurm.accounts``: a Slurm account (a team or project), its users, share and limits."""

    name: SlurmName
    """The account name (lowercase letters, digits, `_`, `-`); jobs charge it with `--account`."""
    users: list[SlurmUser] = Field(default_factory=list)
    """The Linux user names of the account's members (lowercase); every other user is refused when submitting to it.
    """
    entra_groups: list[EntraGroup] = Field(default_factory=list)
    """Entra ID group object IDs (GUIDs) whose members belong to the account: recorded for the Entra sign-in;
    members are added to Slurm by their user names in `users`."""
    fairshare: Annotated[int, Field(ge=1, le=1_000_000, strict=True)] = 1
    """The account's share of the cluster relative to the other accounts (Slurm's `Fairshare`): two accounts of
    shares 3 and 1 are entitled to three quarters and one quarter of the GPU time."""
    gpu_limit: Annotated[int, Field(ge=1, strict=True)] | None = None
    """The most GPUs the account's running jobs hold together (`GrpTRES=gres/gpu=N`); a job past it pends
    (reason `AssocGrpGRES`). Unset: no limit."""
    default_qos: SlurmName | None = None
    """The QoS the account's jobs get without `--qos`; must be one of `qos` when that is given."""
    qos: list[SlurmName] = Field(default_factory=list)
    """The QoS the account's jobs may ask for; empty: Slurm's default (`normal`)."""

    def check_default_qos_allowed(self) -> None:
        """The default QoS is one the account may use, and no QoS is listed twice."""
        for i, name in enumerate(self.qos):
            if name in self.qos[:i]:
                raise PathError(("qos", i), f"lists {name!r} twice", relative=True)
        for i, user in enumerate(self.users):
            if user in self.users[:i]:
                raise PathError(("users", i), f"lists {user!r} twice", relative=True)
        if self.default_qos is not None and self.qos and self.default_qos not in self.qos:
            raise PathError(
                ("defaultQos",),
                f"must be one of the account's qos ({', '.join(self.qos)}) (got {self.default_qos!r})",
                relative=True,
            )

    CHECKS: ClassVar[Checks] = (check_default_qos_allowed,)


class AccountUser(ConfigModel):
    """One entry of ``gb300:slurm.users``: a user's default account, for a user in more than one account."""

    name: SlurmUser
    """The user name, a member (`users`) of at least one declared account."""
    default_account: SlurmName
    """The account the user's jobs charge without `--account`: one the user is a member of."""


def _duplicates(names: Sequence[str]) -> Iterator[tuple[int, int]]:
    """(index, index of the first) of every name that repeats an earlier one."""
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            yield i, seen[name]
        seen.setdefault(name, i)


class Accounts(ConfigModel):
    """The accounting part of ``gb300:slurm``: accounts, QoS and users' default accounts, checked together."""

    accounts: list[Account] = Field(default_factory=list)
    """Slurm accounts with their users, fair share and GPU limit; declaring one turns on job accounting and its
    enforcement (docs/accounts.md)."""
    qos: list[Qos] = Field(default_factory=list)
    """Qualities of service: priority, preemption and limits (docs/accounts.md)."""
    users: list[AccountUser] = Field(default_factory=list)
    """The default account of each user who is in more than one account."""

    def check_unique_names(self) -> None:
        """No two accounts, QoS or user entries share a name, and none is Slurm's own root."""
        for key, names in (
            ("accounts", [a.name for a in self.accounts]),
            ("qos", [q.name for q in self.qos]),
            ("users", [u.name for u in self.users]),
        ):
            for i, first in _duplicates(names):
                raise PathError(
                    (key, i, "name"),
                    f"duplicates slurm.{key}[{first}].name (got {names[i]!r})"
                    + ("; give each user one default account" if key == "users" else ""),
                    relative=True,
                )
            for i, name in enumerate(names):
                if name in _RESERVED and key == "accounts":
                    raise PathError((key, i, "name"), f"is Slurm's own root account (got {name!r})", relative=True)

    def check_qos_declared(self) -> None:
        """Every QoS an account or a QoS names is declared in gb300:slurm.qos (Slurm's `normal` too)."""
        declared = [q.name for q in self.qos]
        hint = f"declared: {', '.join(declared)}" if declared else "none is declared"
        named: list[tuple[tuple[str | int, ...], str]] = []
        for i, qos in enumerate(self.qos):
            named += [(("qos", i, "preempt", j), name) for j, name in enumerate(qos.preempt)]
        for i, account in enumerate(self.accounts):
            named += [(("accounts", i, "qos", j), name) for j, name in enumerate(account.qos)]
            if account.default_qos is not None:
                named.append((("accounts", i, "defaultQos"), account.default_qos))
        for loc, name in named:
            if name not in declared:
                message = f"names a QoS gb300:slurm.qos does not declare (got {name!r}; {hint})"
                raise PathError(loc, message, relative=True)

    def check_default_accounts(self) -> None:
        """A default account is given only for a member, to one of the user's accounts, and every user of several
        accounts has one."""
        member_of = self.memberships()
        for i, entry in enumerate(self.users):
            accounts = member_of.get(entry.name)
            if accounts is None:
                raise PathError(
                    ("users", i, "name"),
                    f"is in no declared account (got {entry.name!r}); add the user to an account's users",
                    relative=True,
                )
            if entry.default_account not in accounts:
                raise PathError(
                    ("users", i, "defaultAccount"),
                    f"must be one of {entry.name!r}'s accounts ({', '.join(accounts)}) (got {entry.default_account!r})",
                    relative=True,
                )
        given = {entry.name for entry in self.users}
        for user, accounts in member_of.items():
            if len(accounts) > 1 and user not in given:
                raise PathError(
                    ("users",),
                    f"must give {user!r} a default account: the user is in {', '.join(accounts)}",
                    relative=True,
                )

    CHECKS: ClassVar[Checks] = (check_unique_names, check_qos_declared, check_default_accounts)

    @property
    def declares_accounts(self) -> bool:
        """Whether any account or QoS is declared: gb300 then runs job accounting and enforces them."""
        return bool(self.accounts or self.qos)

    def memberships(self) -> dict[str, list[str]]:
        """User name -> the declared accounts the user is a member of, in declaration order."""
        member_of: dict[str, list[str]] = {}
        for account in self.accounts:
            for user in account.users:
                member_of.setdefault(user, []).append(account.name)
        return member_of

    def default_account(self, user: str) -> str:
        """The account ``user``'s jobs charge by default: the given one, else the user's only account."""
        given = {entry.name: entry.default_account for entry in self.users}
        return given.get(user) or self.memberships()[user][0]
