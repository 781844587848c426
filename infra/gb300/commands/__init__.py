"""``gb300`` subcommands. Each module has ``add_parser(subparsers)`` and ``run(args) -> int``."""

from __future__ import annotations

from types import ModuleType

from gb300.commands import (
    docs,
    goodput,
    heal,
    init,
    migrate_racks,
    payload,
    plan,
    rollout,
    schema,
    size_storage,
    software,
    status,
    strip_state,
    topology,
    usage,
)

COMMANDS: tuple[ModuleType, ...] = (
    init,
    plan,
    schema,
    topology,
    size_storage,
    software,
    payload,
    rollout,
    migrate_racks,
    status,
    goodput,
    usage,
    strip_state,
    heal,
    docs,
)

__all__ = ["COMMANDS"]
