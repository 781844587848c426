"""The IMDS guard: which local users may reach the instance metadata service on a node, and its node files.

Any process on an Azure VM can ask IMDS (``data/imds.yaml``: 169.254.169.254) for the token of the VM's managed
identity, and the node identity reads the munge key. The guard is one nftables table that refuses IMDS to every
local user except root and the service users of the agents the stack installs (``data/imds.yaml`` ``agents``)
plus ``gb300:access.imdsAllowedUsers``, and the Azure WireServer (``data/imds.yaml`` ``wireserver``) to every user
but root except for DNS (port 53). The node step ``00-imds-guard`` applies it before any other step,
``gb300-imds-guard.service`` at every boot before the network, and ``gb300-imds-guard.timer`` every
``recheck_seconds`` puts the table back if it was flushed or changed (docs/security.md). This module renders
the four files' contents; the node registry (:mod:`gb300.node.registry`) names where they land.
"""

from __future__ import annotations

from typing import Any

from gb300.config import StackConfig
from gb300.facts import loader
from gb300.node import paths, templating

GUARD = paths.IMDS_GUARD
UNIT = paths.IMDS_GUARD_UNIT
RECHECK_UNIT = paths.IMDS_GUARD_RECHECK
TIMER = paths.IMDS_GUARD_TIMER
TABLE = "inet gb300_imds"
"""The nftables table the guard owns (family and name)."""


def facts() -> dict[str, Any]:
    """``data/imds.yaml``: the IMDS address and the agents that need a token from it."""
    return loader.data("imds.yaml")


def address() -> str:
    """IMDS's address."""
    return str(facts()["address"]["value"])


def wireserver() -> str:
    """The WireServer's address (Azure DNS answers there on port 53)."""
    return str(facts()["wireserver"]["value"])


def recheck_seconds() -> int:
    """How often the timer checks the guard's table."""
    return int(facts()["recheck_seconds"]["value"])


def _setting(cfg: StackConfig, dotted: str) -> bool:
    value: Any = cfg
    for part in dotted.split("."):
        value = getattr(value, part)
    return bool(value)


def allowed_users(cfg: StackConfig | None) -> tuple[str, ...]:
    """The users besides root that may reach IMDS on ``cfg``'s nodes: the installed agents' users, then the
    stack's own ``gb300:access.imdsAllowedUsers``; none without a stack (the bootstrap's own tests)."""
    if cfg is None:
        return ()
    users: list[str] = []
    for agent in facts()["agents"].values():
        if _setting(cfg, agent["when"]):
            users += agent["users"]
    users += cfg.access.imds_allowed_users
    return tuple(dict.fromkeys(users))


def script(cfg: StackConfig | None) -> str:
    """The guard script, the addresses and allowed users baked in (the node registry places it, inline)."""
    return templating.render(
        "gb300-imds-guard.j2",
        address=address(),
        wireserver=wireserver(),
        users=allowed_users(cfg),
        table=TABLE,
        recheck_seconds=recheck_seconds(),
    )


def unit(_cfg: StackConfig | None) -> str:
    """The unit that runs the guard at every boot, before the network."""
    return templating.render("systemd/gb300-imds-guard.service", guard=GUARD)


def recheck_unit(_cfg: StackConfig | None) -> str:
    """The service the timer starts: the guard again."""
    return templating.render("systemd/gb300-imds-guard-recheck.service", guard=GUARD)


def timer(_cfg: StackConfig | None) -> str:
    """The timer that runs the guard again every ``recheck_seconds``."""
    return templating.render("systemd/gb300-imds-guard.timer", recheck_seconds=recheck_seconds())
