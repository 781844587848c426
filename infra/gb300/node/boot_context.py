"""What a pool's bootstrap is rendered from: a plain, frozen value the Pulumi program builds."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gb300.errors import BootstrapError
from gb300.facts.software import SoftwareSet, apply_software_overrides
from gb300.io.quoting import shown
from gb300.node.settings import NcclSettings, NodeSettings, load_nccl, load_node

if TYPE_CHECKING:
    from gb300.config import StackConfig

__all__ = ["BootstrapContext"]

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}\Z")
_ENV_KEY_RE = re.compile(r"^GB300_[A-Z0-9_]+\Z")
_RESERVED_ENV = frozenset({"GB300_CLUSTER", "GB300_POOL", "GB300_ROLE", "GB300_STEPS", "GB300_ROOT"})


@dataclass(frozen=True)
class BootstrapContext:
    """Inputs of one role's custom data for one pool: the one context every node file is rendered from.

    `stack` is the typed stack config the node belongs to (`gb300.node.context.build` sets it); the steps of
    `gb300.node.steps` and the files of `gb300.node.registry` are selected and rendered from it. Without a stack
    (the bootstrap's own tests) only their `bootstrap` part is rendered.
    `extra_env` carries plain, non-secret `GB300_*` values for /etc/gb300/cluster.env.
    """

    role: str
    cluster_name: str
    pool_name: str
    software: SoftwareSet
    extra_env: tuple[tuple[str, str], ...] = ()
    node: NodeSettings = field(default_factory=load_node)
    nccl: NcclSettings = field(default_factory=load_nccl)
    stack: StackConfig | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for label, value in (("cluster_name", self.cluster_name), ("pool_name", self.pool_name)):
            if not _NAME_RE.match(value):
                msg = f"'{label}' must be lowercase letters, digits and dashes, at most 63 (got {shown(value)})"
                raise BootstrapError(msg)
        for key, value in self.extra_env:
            if not _ENV_KEY_RE.match(key) or key in _RESERVED_ENV:
                msg = f"'extra_env' keys must be GB300_* names not set by gb300 itself (got {shown(key)})"
                raise BootstrapError(msg)
            if "\n" in value:
                msg = f"'extra_env.{key}' must be one line (got {shown(value)})"
                raise BootstrapError(msg)

    @classmethod
    def for_pool(
        cls,
        *,
        role: str,
        cluster_name: str,
        pool_name: str,
        software_overrides: Mapping[str, object] | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> BootstrapContext:
        """Build a context from plain config values, applying `gb300:software` overrides."""
        return cls(
            role=role,
            cluster_name=cluster_name,
            pool_name=pool_name,
            software=apply_software_overrides(software_overrides),
            extra_env=tuple(sorted((extra_env or {}).items())),
        )
