"""The one exception hierarchy of gb300: every error it raises on purpose derives from :class:`Gb300Error`.

::

    Gb300Error                     anything gb300 raises on purpose; the CLI prints it, never a traceback
     +-- ConfigError               invalid stack configuration, one Problem per key path      (exit 2)
     +-- UsageError                bad command line or input file                               (exit 2)
     +-- DataError                 a data file or registry shipped with gb300 is malformed      (exit 3)
     +-- BootstrapError            a node's bootstrap cannot be rendered (gb300.node)           (exit 2)
     |    +-- BootstrapDataError   ... because a bootstrap data file is malformed (also a DataError, exit 3)
     |    +-- UnknownRoleError     ... for a role with no fragment (also a DataError, exit 3)
     |    +-- SoftwareOverrideError  ... for a bad ``gb300:software`` entry                     (exit 2)
     +-- SlurmConfigError          a Slurm cluster description that cannot be rendered (gb300.slurm; exit 2)
     +-- CredentialError           no usable Azure credential for gb300's own calls (gb300.azure.credential; exit 2)
     +-- PathError                 a config check's problem at another key path (gb300.config.checks; also a
                                   ValueError: pydantic makes it one problem of the ConfigError)

The CLI's exit codes: 0 pass, 1 findings, 2 bad input, 3 internal error (a :class:`DataError` or a bug).
``gb300.slurm.hostlist`` and ``gb300.slurm.topology`` run on the controller as standalone stdlib scripts, so they
raise plain ``ValueError`` (every Slurm error here is also a ``ValueError``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# The CLI's exit codes (gb300.cli; docs/cli.md's table is generated from them by gb300 docs).
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE (13)
TRACEBACK_ENV = "GB300_TRACEBACK"


class Gb300Error(Exception):
    """Base of every error gb300 raises on purpose: the CLI turns it into a clear message, never a traceback."""


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


class DataError(Gb300Error):
    """A data file, template or registry shipped with gb300 is malformed: a bug in gb300, not in the user's input."""


class BootstrapError(Gb300Error):
    """A node's bootstrap cannot be rendered (:mod:`gb300.node`)."""


class BootstrapDataError(BootstrapError, DataError):
    """A bootstrap data file (versions.yaml, checksums.yaml, a role fragment) is malformed: a bug in gb300."""


class UnknownRoleError(BootstrapError, DataError):
    """A role was asked for that has no fragment under cloud-init/roles/."""


class SoftwareOverrideError(BootstrapError):
    """A ``gb300:software`` entry names an unknown component or a bad version."""
