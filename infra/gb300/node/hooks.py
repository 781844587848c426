"""The bootstrap hooks of ``gb300:hooks`` on a node: one :class:`~gb300.node.row.Row` per hook (``kind: hook``),
the table ``run-hooks`` reads (:func:`table`), and what ``gb300 plan`` lists (:func:`listing`).

A hook lands at ``/usr/local/lib/gb300/hooks/<name>`` (mode 0755) in the signed payload; the table beside it names
its point, timeout, outcome on failure and sha256, which ``run-hooks`` checks before running it. Hooks read the
user's repository (:func:`gb300.config.hooks.hook_root`) when the payload is rendered.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from gb300.config import StackConfig
from gb300.config.hooks import Hook, hook_root
from gb300.node import paths
from gb300.node.row import Row

__all__ = ["STEP_OF", "HookListing", "listing", "read", "rows", "runs_on", "table"]

STEP_OF = {
    "beforeSlurm": "gb300-hooks-before-slurm",
    "afterHealthGate": "gb300-hooks-after-gate",
    "prolog": "gb300-imex-prolog",
    "epilog": "gb300-imex-epilog",
}
"""The step (or, for job hooks, the Slurm prolog and epilog) that runs a point's hooks."""


def read(source: str) -> str:
    """A hook's text, read from the user's repository now (it is theirs and may change between renders)."""
    return (hook_root() / source).read_text(encoding="utf-8")


def runs_on(hook: Hook, role: str, pool: str) -> bool:
    """Whether a node of ``role`` (in GPU pool ``pool``) runs ``hook``."""
    return role in hook.roles and (not hook.pools or pool in hook.pools)


def rows(cfg: StackConfig, role: str, pool: str) -> tuple[Row, ...]:
    """One row per hook the role (and pool) runs, then the table ``run-hooks`` reads (none without hooks)."""
    hooks = [h for h in cfg.hooks if runs_on(h, role, pool)]
    if not hooks:
        return ()
    mine = tuple(Row("hook", h.script, f"{paths.HOOK_DIR}/{h.name}", STEP_OF[h.point], "0755") for h in hooks)
    runner = Row("repo", "cloud-init/lib/run-hooks", paths.RUN_HOOKS, STEP_OF[hooks[0].point], "0755")
    return (runner, *mine, Row("content", "hooks-table", paths.HOOKS_TABLE, STEP_OF[hooks[0].point]))


def sha256(hook: Hook) -> str:
    return hashlib.sha256(hook.resolved().read_bytes()).hexdigest()


def table(cfg: StackConfig, role: str, pool: str) -> str:
    """The hooks table of a node: ``point name timeout on-failure sha256``, tab-separated, one hook a line."""
    lines = ["# gb300:hooks on this node: point, name, timeout (s), on failure, sha256 (run-hooks checks it)"]
    for h in cfg.hooks:
        if runs_on(h, role, pool):
            lines.append("\t".join((h.point, h.name, str(h.timeout_seconds), h.on_failure, sha256(h))))
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class HookListing:
    """One hook as ``gb300 plan`` lists it."""

    name: str
    point: str
    roles: tuple[str, ...]
    pools: tuple[str, ...]
    script: str
    size: int
    sha256: str
    timeout_seconds: int
    on_failure: str


def listing(cfg: StackConfig) -> list[HookListing]:
    """Every hook of the stack with its script's size and sha256, in stack order."""
    return [
        HookListing(
            h.name, h.point, tuple(h.roles), tuple(h.pools), h.script, h.resolved().stat().st_size, sha256(h),
            h.timeout_seconds, h.on_failure,
        )
        for h in cfg.hooks
    ]  # fmt: skip
