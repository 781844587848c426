"""``gb300`` subcommands. Each module has ``add_parser(subparsers)`` and ``run(args) -> int``."""

from __future__ import annotations

from types import ModuleType

from gb300.commands import (
    docs,
    migrate_racks,
    payload,
    plan,
    rollout,
    schema,
    size_storage,
    software,
    status,
    topology,
)

COMMANDS: tuple[ModuleType, ...] = (
    plan,
    schema,
    topology,
    size_storage,
    software,
    payload,
    rollout,
    migrate_racks,
    status,
    docs,
)

__all__ = ["COMMANDS"]
