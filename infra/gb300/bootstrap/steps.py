"""The node step list (cloud-init/steps.yaml) and the per-role fragments (cloud-init/roles/).

Adding a step is data: an entry in steps.yaml and a script in cloud-init/scripts/. Adding a role is
a fragment cloud-init/roles/<role>.yaml (its cloud-config keys and templated files).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gb300.bootstrap.errors import BootstrapDataError, UnknownRoleError
from gb300.bootstrap.resources import CLOUD_INIT_DIR, TEMPLATES_DIR, load_yaml_mapping

__all__ = [
    "COMMON_FRAGMENT",
    "FileSpec",
    "RoleFragment",
    "Step",
    "known_roles",
    "load_role",
    "load_steps",
    "steps_for_role",
]

COMMON_FRAGMENT = "common"
_STEP_NAME_RE = re.compile(r"^[0-9]{2}-[a-z0-9][a-z0-9-]*$")
_MODE_RE = re.compile(r"^0[0-7]{3}$")


@dataclass(frozen=True)
class Step:
    """One ordered bootstrap step: a script run on the roles that list it."""

    name: str
    script: str
    roles: tuple[str, ...]
    description: str

    @property
    def script_path(self) -> Path:
        """The script's source file in the repository."""
        return CLOUD_INIT_DIR / "scripts" / self.script


@dataclass(frozen=True)
class FileSpec:
    """A file a role places with write_files, its contents rendered from a Jinja template."""

    path: str
    template: str
    permissions: str


@dataclass(frozen=True)
class RoleFragment:
    """A role's cloud-config keys and templated files, as read from cloud-init/roles/<role>.yaml."""

    name: str
    cloud_config: dict[str, Any]
    files: tuple[FileSpec, ...]


def known_roles(cloud_init_dir: Path = CLOUD_INIT_DIR) -> tuple[str, ...]:
    """Roles that have a fragment, sorted (the common fragment is not a role)."""
    return tuple(sorted(p.stem for p in (cloud_init_dir / "roles").glob("*.yaml") if p.stem != COMMON_FRAGMENT))


def load_steps(cloud_init_dir: Path = CLOUD_INIT_DIR) -> tuple[Step, ...]:
    """Read steps.yaml and check each entry names an existing script and known roles."""
    path = cloud_init_dir / "steps.yaml"
    raw = load_yaml_mapping(path).get("steps")
    if not isinstance(raw, list):
        msg = f"{path}: must have a `steps` list"
        raise BootstrapDataError(msg)
    roles = set(known_roles(cloud_init_dir))
    steps: list[Step] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        where = f"{path}: steps[{index}]"
        if not isinstance(entry, dict):
            msg = f"{where}: must be a mapping (got {entry!r})"
            raise BootstrapDataError(msg)
        name = str(entry.get("name", ""))
        if not _STEP_NAME_RE.match(name) or name in seen:
            msg = f"{where}.name: must be a unique NN-name (got {name!r})"
            raise BootstrapDataError(msg)
        seen.add(name)
        script = str(entry.get("script", ""))
        if "/" in script or not (cloud_init_dir / "scripts" / script).is_file():
            msg = f"{where}.script: must name a file in {cloud_init_dir / 'scripts'} (got {script!r})"
            raise BootstrapDataError(msg)
        step_roles = tuple(str(r) for r in entry.get("roles", []))
        unknown = sorted(set(step_roles) - roles)
        if not step_roles or unknown:
            msg = f"{where}.roles: must list known roles {sorted(roles)} (got {list(step_roles)!r})"
            raise BootstrapDataError(msg)
        steps.append(Step(name, script, step_roles, str(entry.get("description", ""))))
    return tuple(steps)


def steps_for_role(role: str, cloud_init_dir: Path = CLOUD_INIT_DIR) -> tuple[Step, ...]:
    """The steps `role` runs, in order."""
    return tuple(s for s in load_steps(cloud_init_dir) if role in s.roles)


def _load_fragment(path: Path, name: str) -> RoleFragment:
    raw = load_yaml_mapping(path)
    cloud_config = raw.get("cloud_config") or {}
    if not isinstance(cloud_config, dict):
        msg = f"{path}: cloud_config must be a mapping (got {cloud_config!r})"
        raise BootstrapDataError(msg)
    for reserved in ("write_files", "runcmd"):
        if reserved in cloud_config:
            msg = f"{path}: cloud_config.{reserved} is generated; list files under `files` and steps in steps.yaml"
            raise BootstrapDataError(msg)
    files: list[FileSpec] = []
    for index, entry in enumerate(raw.get("files") or []):
        where = f"{path}: files[{index}]"
        spec = FileSpec(str(entry.get("path", "")), str(entry.get("template", "")), str(entry.get("permissions", "")))
        if not spec.path.startswith("/") or not _MODE_RE.match(spec.permissions):
            msg = f'{where}: needs an absolute path and permissions like "0644" (got {entry!r})'
            raise BootstrapDataError(msg)
        if not (TEMPLATES_DIR / spec.template).is_file():
            msg = f"{where}.template: no template {spec.template!r} in {TEMPLATES_DIR}"
            raise BootstrapDataError(msg)
        files.append(spec)
    return RoleFragment(name=name, cloud_config=dict(cloud_config), files=tuple(files))


def load_role(role: str, cloud_init_dir: Path = CLOUD_INIT_DIR) -> tuple[RoleFragment, RoleFragment]:
    """The common fragment and `role`'s own fragment, in merge order."""
    roles = known_roles(cloud_init_dir)
    if role not in roles:
        msg = f"role must be one of {', '.join(roles)} (got {role!r})"
        raise UnknownRoleError(msg)
    roles_dir = cloud_init_dir / "roles"
    common = _load_fragment(roles_dir / f"{COMMON_FRAGMENT}.yaml", COMMON_FRAGMENT)
    return common, _load_fragment(roles_dir / f"{role}.yaml", role)
