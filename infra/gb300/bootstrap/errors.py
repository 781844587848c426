"""Exceptions raised while rendering a node's bootstrap.

Hierarchy::

    BootstrapError                 anything this package raises on purpose
    ├── BootstrapDataError         a data file (versions.yaml, checksums.yaml, a role fragment) is malformed
    ├── UnknownRoleError           a role with no cloud-init/roles/<role>.yaml
    └── SoftwareOverrideError      a `gb300:software` entry names an unknown component or a bad version

Messages name the config path or file, what was expected and what was got.
"""

from __future__ import annotations

__all__ = ["BootstrapDataError", "BootstrapError", "SoftwareOverrideError", "UnknownRoleError"]


class BootstrapError(Exception):
    """Base class of every error this package raises on purpose."""


class BootstrapDataError(BootstrapError):
    """A bootstrap data file is malformed (a repository bug, not a user's mistake)."""


class UnknownRoleError(BootstrapError):
    """A role was asked for that has no fragment under cloud-init/roles/."""


class SoftwareOverrideError(BootstrapError):
    """A `gb300:software` override is not usable."""
