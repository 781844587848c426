"""Exceptions raised while rendering a node's bootstrap.

Hierarchy (part of the package's one hierarchy, :mod:`gb300.errors`)::

    Gb300Error
    └── BootstrapError             anything this package raises on purpose
        ├── BootstrapDataError     a data file (versions.yaml, checksums.yaml, a role fragment) is malformed
        │                          (also a gb300.errors.DataError: a bug in gb300, CLI exit 3)
        ├── UnknownRoleError       a role with no cloud-init/roles/<role>.yaml (also a DataError)
        └── SoftwareOverrideError  a `gb300:software` entry names an unknown component or a bad version

Messages name the config path or file, what was expected and what was got.
"""

from __future__ import annotations

from gb300.errors import DataError, Gb300Error

__all__ = ["BootstrapDataError", "BootstrapError", "SoftwareOverrideError", "UnknownRoleError"]


class BootstrapError(Gb300Error):
    """Base class of every error this package raises on purpose."""


class BootstrapDataError(BootstrapError, DataError):
    """A bootstrap data file is malformed (a repository bug, not a user's mistake)."""


class UnknownRoleError(BootstrapError, DataError):
    """A role was asked for that has no fragment under cloud-init/roles/."""


class SoftwareOverrideError(BootstrapError):
    """A `gb300:software` override is not usable."""
