"""The IMDS guard: which local users may reach the instance metadata service on a node, and its two node files.

Any process on an Azure VM can ask IMDS (``data/imds.yaml``: 169.254.169.254) for the token of the VM's managed
identity, and the node identity reads the munge key. The guard is one nftables table that refuses IMDS to every
local user except root and the service users of the agents the stack installs (``data/imds.yaml`` ``agents``)
plus ``gb300:access.imdsAllowedUsers``. The node step ``00-imds-guard`` applies it before any other step, and
``gb300-imds-guard.service`` applies it at every boot before the network (docs/security.md).
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
TABLE = "inet gb300_imds"
"""The nftables table the guard owns (family and name)."""


def facts() -> dict[str, Any]:
    """``data/imds.yaml``: the IMDS address and the agents that need a token from it."""
    return loader.data("imds.yaml")


def address() -> str:
    """IMDS's address."""
    return str(facts()["address"]["value"])


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
    """The guard script (the address and allowed users baked in) and the unit that runs it at every boot."""
    users = allowed_users(ctx.stack)
    script = templating.render("gb300-imds-guard.j2", address=address(), users=users, table=TABLE)
    unit = templating.render("systemd/gb300-imds-guard.service", guard=GUARD)
    return [NodeFile(GUARD, script, "0755"), NodeFile(UNIT, unit)]
