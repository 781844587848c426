"""The exception hierarchy for mistakes a user can fix (see the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class Gb300Error(Exception):
    """Base of every error the CLI turns into a clear message and exit 2, never a traceback."""


@dataclass(frozen=True)
class Problem:
    """One invalid value: where it is (``gb300:gpuPools[0].racks``) and what is wrong with it."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ConfigError(Gb300Error):
    """The stack configuration is invalid; carries one :class:`Problem` per offending key path."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class UsageError(Gb300Error):
    """The command line is wrong (a missing file, a stack that does not exist)."""
