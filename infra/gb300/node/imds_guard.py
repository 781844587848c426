"""The IMDS guard: which local users may reach the instance metadata service on a node, and its node files.

Any process on an Azure VM can ask IMDS (``data/imds.yaml``: 169.254.169.254) for the token of the VM's managed
identity, and the node identity reads the munge key. The guard is one nftables table that refuses IMDS to every
local user except root and the service users of the agents the stack installs (``data/imds.yaml`` ``agents``)
plus ``gb300:access.imdsAllowedUsers``, and the Azure WireServer (``data/imds.yaml`` ``wireserver``) to every user
but root except for DNS (port 53). The node step ``00-imds-guard`` applies it before any other step,
``gb300-imds-guard.service`` at every boot before the network, and ``gb300-imds-guard.timer`` every
``recheck_seconds`` puts the table back if it was flushed or changed (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gb300.config import StackConfig
from gb300.facts import loader
from gb300.node import templating
from gb300.node.boot_context import BootstrapContext
from gb300.node.boot_context import ExtraFile as NodeFile

GUARD = "/usr/local/sbin/gb300-imds-guard"
UNIT = "/etc/systemd/system/gb300-imds-guard.service"
RECHECK_UNIT = "/etc/systemd/system/gb300-imds-guard-recheck.service"
TIMER = "/etc/systemd/system/gb300-imds-guard.timer"
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


def files(ctx: BootstrapContext, _steps: Sequence[object]) -> list[NodeFile]:
    """The guard script (the addresses and allowed users baked in), the unit that runs it at every boot, and the
    timer with its service that run it again every ``recheck_seconds``."""
    users = allowed_users(ctx.stack)
    every = recheck_seconds()
    script = templating.render(
        "gb300-imds-guard.j2",
        address=address(),
        wireserver=wireserver(),
        users=users,
        table=TABLE,
        recheck_seconds=every,
    )
    unit = templating.render("systemd/gb300-imds-guard.service", guard=GUARD)
    recheck = templating.render("systemd/gb300-imds-guard-recheck.service", guard=GUARD)
    timer = templating.render("systemd/gb300-imds-guard.timer", recheck_seconds=every)
    return [
        NodeFile(GUARD, script, "0755"),
        NodeFile(UNIT, unit),
        NodeFile(RECHECK_UNIT, recheck),
        NodeFile(TIMER, timer),
    ]
