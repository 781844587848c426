"""The per-role cloud-config fragments (cloud-init/roles/).

A fragment holds a role's cloud-config keys only. The steps a role runs and the files it carries are declared
once, in the node registry (`gb300.node.steps`); adding a role is a fragment cloud-init/roles/<role>.yaml and
its entries in that registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gb300.errors import BootstrapDataError, UnknownRoleError
from gb300.node.resources import CLOUD_INIT_DIR, load_yaml_mapping

__all__ = ["COMMON_FRAGMENT", "RoleFragment", "known_roles", "load_role"]

COMMON_FRAGMENT = "common"


@dataclass(frozen=True)
class RoleFragment:
    """A role's cloud-config keys, as read from cloud-init/roles/<role>.yaml."""

    name: str
    cloud_config: dict[str, Any]


def known_roles(cloud_init_dir: Path = CLOUD_INIT_DIR) -> tuple[str, ...]:
    """Roles that have a fragment, sorted (the common fragment is not a role)."""
    return tuple(sorted(p.stem for p in (cloud_init_dir / "roles").glob("*.yaml") if p.stem != COMMON_FRAGMENT))


def _load_fragment(path: Path, name: str) -> RoleFragment:
    raw = load_yaml_mapping(path)
    unknown = sorted(set(raw) - {"cloud_config"})
    if unknown:
        msg = (
            f"{path}: only cloud_config belongs here (got {', '.join(unknown)}); "
            "files and steps are declared in gb300.node.steps"
        )
        raise BootstrapDataError(msg)
    cloud_config = raw.get("cloud_config") or {}
    if not isinstance(cloud_config, dict):
        msg = f"{path}: cloud_config must be a mapping (got {cloud_config!r})"
        raise BootstrapDataError(msg)
    for reserved in ("write_files", "runcmd"):
        if reserved in cloud_config:
            msg = f"{path}: cloud_config.{reserved} is generated from the node registry (gb300.node.steps)"
            raise BootstrapDataError(msg)
    return RoleFragment(name=name, cloud_config=dict(cloud_config))


def load_role(role: str, cloud_init_dir: Path = CLOUD_INIT_DIR) -> tuple[RoleFragment, RoleFragment]:
    """The common fragment and `role`'s own fragment, in merge order."""
    roles = known_roles(cloud_init_dir)
    if role not in roles:
        msg = f"role must be one of {', '.join(roles)} (got {role!r})"
        raise UnknownRoleError(msg)
    roles_dir = cloud_init_dir / "roles"
    common = _load_fragment(roles_dir / f"{COMMON_FRAGMENT}.yaml", COMMON_FRAGMENT)
    return common, _load_fragment(roles_dir / f"{role}.yaml", role)
