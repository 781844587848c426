"""``gb300:hooks``: scripts of your own repository run on the nodes at four points (docs/customize.md).

Each hook names a script by its path in the repository (the checkout the stack file lives in), the point it runs at
(``beforeSlurm``, ``afterHealthGate``, ``prolog``, ``epilog``), the roles (and GPU pools) that run it, a timeout and
what a failure does (``drain`` the node, or ``warn`` and go on). The script must be a regular file inside the
repository, not a symlink, executable and at most ``data/hooks.yaml`` ``max_bytes`` long: each is checked here, with
its key path, before anything deploys.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import Field

from gb300 import tags as gb300_tags
from gb300.config.base import Checks, ConfigModel
from gb300.config.checks import PathError
from gb300.config.fields import PoolName
from gb300.facts.loader import data
from gb300.paths import REPO_ROOT

__all__ = ["POINTS", "Hook", "HookPoint", "hook_root", "limits"]

HookPoint = Literal["beforeSlurm", "afterHealthGate", "prolog", "epilog"]
POINTS: tuple[HookPoint, ...] = ("beforeSlurm", "afterHealthGate", "prolog", "epilog")
JOB_POINTS = ("prolog", "epilog")
HookName = Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[a-z][a-z0-9-]*$")]
Role = Literal["head", "gpu-node"]


def limits() -> dict[str, int]:
    """The hook limits of ``data/hooks.yaml``: ``max_bytes``, ``timeout_default``, ``timeout_max``, ``job_max``."""
    raw = data("hooks.yaml")
    return {
        "max_bytes": int(raw["max_bytes"]["value"]),
        "timeout_default": int(raw["timeout_seconds"]["default"]),
        "timeout_max": int(raw["timeout_seconds"]["max"]),
        "job_max": int(raw["job_timeout_seconds"]["max"]),
    }


def hook_root() -> Path:
    """The repository hook scripts are read from: ``GB300_HOOK_ROOT`` when set, else the gb300 checkout."""
    return Path(os.environ.get("GB300_HOOK_ROOT", str(REPO_ROOT))).resolve()


def _gpu_only() -> list[Role]:
    return ["gpu-node"]


class Hook(ConfigModel):
    """One entry of ``gb300:hooks``: a script of your repository, run on the nodes of its roles at one point."""

    name: HookName
    """The hook's name: its file name on the node and its tag in the step log (``gb300-hook-<name>``)."""
    script: Annotated[str, Field(min_length=1, max_length=256)]
    """The script's path in your repository (relative, for example `hooks/warm-cache.sh`): a regular, executable
    file, no symlink, at most `data/hooks.yaml` `max_bytes` long."""
    point: HookPoint
    """When it runs: `beforeSlurm` (before Slurm starts on the node), `afterHealthGate` (once the boot health gate
    passed), `prolog` or `epilog` (at each job's start and end, GPU nodes only)."""
    roles: list[Role] = Field(default_factory=_gpu_only, min_length=1)
    """The node roles that run it: `gpu-node`, `head` or both (default `gpu-node`)."""
    pools: list[PoolName] = Field(default_factory=list)
    """The GPU pools whose nodes run it (empty: every pool)."""
    timeout_seconds: Annotated[int, Field(ge=1)] = Field(default_factory=lambda: limits()["timeout_default"])
    """Seconds before the hook is killed (a kill is a failure): default and most from `data/hooks.yaml`; a
    `prolog` or `epilog` hook at most `job_timeout_seconds.max`."""
    on_failure: Literal["drain", "warn"] = "drain"
    """What a failure (non-zero exit or timeout) does: `drain` the node (its reason names the hook) or `warn` in the
    step log and go on."""

    def check_timeout(self) -> None:
        """The timeout is within the data file's limit for the hook's point."""
        cap = limits()["job_max" if self.point in JOB_POINTS else "timeout_max"]
        if self.timeout_seconds > cap:
            msg = f"must be at most {cap} seconds for a {self.point} hook (got {self.timeout_seconds})"
            raise PathError(("timeoutSeconds",), msg, relative=True)

    def check_job_points_on_gpu_nodes(self) -> None:
        """Job prologs and epilogs run where jobs run: on GPU nodes."""
        if self.point in JOB_POINTS and gb300_tags.ROLE_HEAD in self.roles:
            msg = f"a {self.point} hook runs on GPU nodes only (got {self.roles!r}); remove head"
            raise PathError(("roles",), msg, relative=True)

    def check_script(self) -> None:
        """The script is a regular executable file inside the repository, no symlink, within the size cap."""
        root = hook_root()
        given = root / self.script
        problem = _script_problem(root, given, limits()["max_bytes"])
        if problem:
            raise PathError(("script",), f"{problem} (got {self.script!r})", relative=True)

    CHECKS: ClassVar[Checks] = (check_timeout, check_job_points_on_gpu_nodes, check_script)

    def resolved(self) -> Path:
        """The script's file (checked to be inside the repository)."""
        return hook_root() / self.script


def _script_problem(root: Path, given: Path, cap: int) -> str:
    norm = Path(os.path.normpath(given))
    if not norm.is_relative_to(root):
        return f"must be a path inside the repository {root}"
    if any(p.is_symlink() for p in (norm, *norm.parents) if p.is_relative_to(root) and p != root):
        return "must not be a symlink (or under one): the payload ships the file itself"
    if not norm.is_file():
        return f"must be an existing file of the repository ({norm} is missing)"
    size = norm.stat().st_size
    if size > cap:
        return f"must be at most {cap} bytes (data/hooks.yaml max_bytes; it has {size})"
    if not os.access(norm, os.X_OK):
        return f"must be executable (chmod +x {norm.relative_to(root)}; git keeps the bit)"
    return ""
