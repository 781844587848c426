"""What a pool's bootstrap is rendered from: a plain, frozen value the Pulumi program builds."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from gb300.bootstrap.errors import BootstrapError
from gb300.bootstrap.settings import NcclSettings, NodeSettings, load_nccl, load_node
from gb300.bootstrap.software import SoftwareSet, apply_software_overrides

__all__ = ["BootstrapContext", "ExtraFile", "ExtraStep", "NodeFileLike"]

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_ENV_KEY_RE = re.compile(r"^GB300_[A-Z0-9_]+$")
_RESERVED_ENV = frozenset({"GB300_CLUSTER", "GB300_POOL", "GB300_ROLE", "GB300_STEPS", "GB300_ROOT"})
_STEP_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_ABS_PATH_RE = re.compile(r"^/[A-Za-z0-9._/+-]+$")
_MODE_RE = re.compile(r"^0[0-7]{3}$")


class NodeFileLike(Protocol):
    """Anything with a node path, text content and octal permissions (e.g. gb300.slurm.files.NodeFile)."""

    @property
    def path(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def permissions(self) -> str: ...


@dataclass(frozen=True)
class ExtraFile:
    """A file another feature places on the node with write_files (no secrets: custom data is readable)."""

    path: str
    content: str
    permissions: str = "0644"

    @classmethod
    def of(cls, item: NodeFileLike) -> ExtraFile:
        """Copy any NodeFile-like value."""
        return cls(item.path, item.content, item.permissions)


@dataclass(frozen=True)
class ExtraStep:
    """A step another feature runs through run-step, after the bootstrap's own steps and before ready.

    `command` is an absolute path on the node (usually placed by an ExtraFile); it must exit 0 when done,
    and it runs with the same journal logging, failure status and completion record as every step.
    """

    name: str
    command: str


@dataclass(frozen=True)
class BootstrapContext:
    """Inputs of one role's custom data for one pool.

    `extra_env` carries feature inputs later steps read from /etc/gb300/cluster.env (for example
    `GB300_LUSTRE_MGS` for a lustre-mount step): plain, non-secret `GB300_*` values only.
    `extra_files` and `extra_steps` let a feature built in Python (the Slurm steps) add its files and
    ordered steps; static steps belong in cloud-init/steps.yaml.
    """

    role: str
    cluster_name: str
    pool_name: str
    software: SoftwareSet
    extra_env: tuple[tuple[str, str], ...] = ()
    extra_files: tuple[ExtraFile, ...] = ()
    extra_steps: tuple[ExtraStep, ...] = ()
    node: NodeSettings = field(default_factory=load_node)
    nccl: NcclSettings = field(default_factory=load_nccl)

    def __post_init__(self) -> None:
        for label, value in (("cluster_name", self.cluster_name), ("pool_name", self.pool_name)):
            if not _NAME_RE.match(value):
                msg = f"'{label}' must be lowercase letters, digits and dashes, at most 63 (got {value!r})"
                raise BootstrapError(msg)
        for key, value in self.extra_env:
            if not _ENV_KEY_RE.match(key) or key in _RESERVED_ENV:
                msg = f"'extra_env' keys must be GB300_* names not set by gb300 itself (got {key!r})"
                raise BootstrapError(msg)
            if "\n" in value:
                msg = f"'extra_env.{key}' must be one line (got {value!r})"
                raise BootstrapError(msg)
        for item in self.extra_files:
            if not _ABS_PATH_RE.match(item.path) or not _MODE_RE.match(item.permissions):
                msg = f"'extra_files' need an absolute path and permissions like '0644' (got {item.path!r})"
                raise BootstrapError(msg)
        seen: set[str] = set()
        for step in self.extra_steps:
            if not _STEP_RE.match(step.name) or step.name in seen or not _ABS_PATH_RE.match(step.command):
                msg = (
                    "'extra_steps' need unique lowercase names and absolute commands "
                    f"(got {step.name!r} -> {step.command!r})"
                )
                raise BootstrapError(msg)
            seen.add(step.name)

    @classmethod
    def for_pool(
        cls,
        *,
        role: str,
        cluster_name: str,
        pool_name: str,
        software_overrides: Mapping[str, object] | None = None,
        extra_env: Mapping[str, str] | None = None,
        extra_files: Iterable[NodeFileLike] = (),
        extra_steps: Iterable[ExtraStep] = (),
    ) -> BootstrapContext:
        """Build a context from plain config values, applying `gb300:software` overrides."""
        return cls(
            role=role,
            cluster_name=cluster_name,
            pool_name=pool_name,
            software=apply_software_overrides(software_overrides),
            extra_env=tuple(sorted((extra_env or {}).items())),
            extra_files=tuple(ExtraFile.of(f) for f in extra_files),
            extra_steps=tuple(extra_steps),
        )
