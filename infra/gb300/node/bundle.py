"""One role's node bundle: everything the role boots with, typed, checked once, before any packing.

:func:`bundle_for` selects the role's steps (:mod:`gb300.node.steps`) and renders the rows of the node registry
(:mod:`gb300.node.registry`) for its context; the result is a :class:`Bundle`: the role fragments' cloud-config
keys, every file (step scripts last, shell scripts compacted), the steps ``run-step`` runs, the inline files and
the commands that run before the fetch, and the custom data's own files (:func:`gb300.node.payload.fetch_files`).
Every path is checked (absolute, no ``..``, placed once) and every content is scanned for secrets here, once; the
two packers of :mod:`gb300.node.pack` (the payload archive and the small custom data) are pure functions of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from gb300 import tags as gb300_tags
from gb300.errors import BootstrapError
from gb300.node import manifest, paths, registry
from gb300.node import steps as node_steps
from gb300.node.boot_context import BootstrapContext
from gb300.node.file import NodeFile
from gb300.node.payload import fetch_files
from gb300.node.resources import CLOUD_INIT_DIR
from gb300.node.roles import load_role
from gb300.node.secrets import find_secret_material

__all__ = ["Bundle", "bundle_for"]

_DUMPER: type[Any] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass(frozen=True)
class Bundle:
    """One role's node bundle (one pool's, for a GPU node): what both packers read."""

    role: str
    pool: str
    cluster: str
    name: str
    """The payload's name in the payload container (``head``, ``gpu-<pool>``)."""
    settings: dict[str, Any]
    """The role fragments' cloud-config keys (``cloud-init/roles/``: common, then the role's)."""
    files: tuple[NodeFile, ...]
    """Every file of the payload, in ``write_files`` order (the step scripts last); shell scripts compacted."""
    steps: tuple[str, ...]
    """The steps ``run-step`` runs, in order."""
    inline: tuple[NodeFile, ...]
    """The files the custom data carries too (before the fetch), in registry order."""
    first: tuple[str, ...]
    """Commands ``runcmd`` runs before the fetch (inline files)."""
    fetch: tuple[NodeFile, ...]
    """The custom data's own files: fetch-payload and payload.env (none without a stack)."""


def _checked_paths(role: str, files: list[NodeFile]) -> None:
    paths = [f.path for f in files]
    duplicates = sorted({p for p in paths if paths.count(p) > 1})
    if duplicates:
        msg = f"custom data for role {role!r} places these paths twice: {', '.join(duplicates)}"
        raise BootstrapError(msg)
    for path in paths:
        if not path.startswith("/") or ".." in path.split("/"):
            msg = f"node payload for role {role!r}: {path!r} must be an absolute node path without '..'"
            raise BootstrapError(msg)


def _scan(role: str, settings: dict[str, Any], files: list[NodeFile]) -> None:
    """The one secret scan of a bundle: the fragments' keys and every file (custom data and payload alike)."""
    texts = [yaml.dump(settings, Dumper=_DUMPER, sort_keys=False), *(f.content for f in files)]
    found = find_secret_material("\n".join(texts))
    if not found:
        return
    where = [f.path for f in files if find_secret_material(f.content)] or ["cloud-init/roles/"]
    msg = (
        f"custom data and node payload for role {role!r} must not carry secrets (found: {', '.join(found)}, in "
        f"{', '.join(where)}). Fetch them at boot with the node's managed identity."
    )
    raise BootstrapError(msg)


def _shipped(path: str, content: str) -> str:
    """A file's text as the node gets it: gb300's scripts without their header comments, a hook (``gb300:hooks``)
    byte for byte, since run-hooks refuses a hook whose sha256 differs from the one the signed table lists."""
    return content if path.startswith(f"{paths.HOOK_DIR}/") else node_steps.compact(content)


def bundle_for(ctx: BootstrapContext, *, fetch: bool = True) -> Bundle:
    """``ctx.role``'s bundle for its pool and stack. ``fetch=False`` leaves out the custom data's own files (the
    full cloud-config of a context without a stack, the bootstrap's own tests). Raises BootstrapError for a bad
    path, a path placed twice or secret-looking content; ConfigError when the stack has no signing key."""
    common, fragment = load_role(ctx.role, CLOUD_INIT_DIR)
    steps = node_steps.steps_for(ctx)
    target = registry.Target(ctx, steps)
    placed = [*registry.files_for(target), *registry.render(registry.step_rows(steps), target)]
    files = [NodeFile(f.path, _shipped(f.path, f.content), f.permissions) for f in placed]
    _checked_paths(ctx.role, files)
    rows = registry.inline_rows(target)
    wanted = {row.destination for row in rows}
    name = manifest.payload_name(ctx.role, ctx.pool_name if ctx.role in gb300_tags.POOL_ROLES else None)
    extra = fetch_files(ctx, name) if fetch else ()
    settings = {**common.cloud_config, **fragment.cloud_config}
    _scan(ctx.role, settings, [*files, *extra])
    return Bundle(
        role=ctx.role,
        pool=ctx.pool_name,
        cluster=ctx.cluster_name,
        name=name,
        settings=settings,
        files=tuple(files),
        steps=tuple(s.name for s in steps),
        inline=tuple(f for f in files if f.path in wanted),
        first=tuple(row.destination for row in rows if row.first),
        fetch=extra,
    )
