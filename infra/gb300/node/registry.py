"""The one registry of every file a node carries: one plain :class:`~gb300.node.row.Row` per file, step scripts and
hooks included.

A row is data (kind, source, destination, mode, owner step; roles, a named condition, a named name list): as Cluster
Toolkit's startup-script runners (``modules/scripts/startup-script/variables.tf``) and as :mod:`gb300.tags` does for
tags. Its text comes from a template under ``templates/``, a repository file, a named content function of
:mod:`gb300.node.sources`, a step's script (:func:`step_rows`, from :mod:`gb300.node.steps`) or a hook of the
user's repository (:func:`hook_rows`, from ``gb300:hooks``). The table order is the ``write_files`` order of the full
cloud-config, which the golden files hold; consecutive rows naming the same ``each`` repeat together, names outer
(a Blob container's config, unit and env file stay together). :mod:`gb300.node.bundle` packs the rendered files.
docs/node-steps.md lists the table (generated: :func:`table_markdown`) and says how to add a file.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence

from gb300 import tags as gb300_tags
from gb300.config import StackConfig
from gb300.node import hooks as node_hooks
from gb300.node import paths, sources, templating
from gb300.node import steps as node_steps
from gb300.node.file import NodeFile
from gb300.node.row import Row
from gb300.node.steps import STEPS, Step
from gb300.node.target import SlurmView, Target, slurm_view
from gb300.paths import PACKAGE_DIR, REPO_ROOT
from gb300.slurm import config as slurm_config
from gb300.slurm import files as slurm_files

__all__ = [
    "ROWS",
    "SLURM_ROWS",
    "Row",
    "SlurmView",
    "Target",
    "files_for",
    "inline_rows",
    "render",
    "slurm_node_files",
    "slurm_view",
    "step_rows",
    "table_markdown",
]

GPU = (gb300_tags.ROLE_GPU_NODE,)
CPU = (gb300_tags.ROLE_CPU_NODE,)
POOLS = gb300_tags.POOL_ROLES
HEAD = (gb300_tags.ROLE_HEAD,)
LOGIN = (gb300_tags.ROLE_LOGIN,)
SLURM_ENV = f"{paths.ETC}/slurm.env"
HEALTH_ENV = f"{paths.ETC}/health.env"
STORAGE_ENV = f"{paths.ETC}/storage.env"
MONITORING_ENV = f"{paths.ETC}/monitoring.env"
LOGIN_LIMITS = "/etc/systemd/system/user-.slice.d/50-gb300-limits.conf"
"""systemd applies a ``user-.slice.d`` drop-in to every ``user-<uid>.slice``: one cgroup per signed-in user."""
BREAK_GLASS = "/etc/ssh/sshd_config.d/50-gb300-break-glass.conf"
_SYSTEMD = paths.SYSTEMD
_UNITS = paths.UNIT_STAGING
_STEPS = "cloud-init/scripts"
_SLURM = "cloud-init/slurm"
_GENERATOR = f"{PACKAGE_DIR.relative_to(REPO_ROOT)}/slurm/{{name}}"
_PACKAGE = PACKAGE_DIR.relative_to(REPO_ROOT).as_posix()
_HEAL = paths.HEAL_HOME
_CTLD = "gb300-slurmctld-setup"
_DBD = "gb300-slurmdbd-setup"
_SLURMD = "gb300-slurmd-setup"
_LOGIN = "gb300-login-setup"

# The Slurm files (rendered for the node's Slurm view; tests render them for a cluster of their own).
SLURM_ROWS: tuple[Row, ...] = (
    Row("content", "slurm-config", "/etc/slurm/{name}", _CTLD, roles=HEAD, when="stack", each="slurm-configs"),
    Row("content", "slurmdbd-conf", "/etc/slurm/slurmdbd.conf", _DBD, "0600", HEAD, "slurmdbd"),
    Row("content", "mariadb-slurmdbd", "/etc/mysql/mariadb.conf.d/60-gb300-slurmdbd.cnf", _DBD, roles=HEAD,
        when="slurmdbd"),
    Row("content", "slurm-accounts", f"{paths.ETC}/{slurm_config.ACCOUNTS_FILE}", "gb300-slurm-accounts", roles=HEAD,
        when="accounts"),
    # slurmdbd.service drop-in: run as the slurm user from the start
    Row("repo", f"{_SLURM}/systemd/slurmdbd-gb300.conf", f"{_UNITS}/slurmdbd-gb300.conf", _DBD, roles=HEAD,
        when="slurmdbd"),
    Row("content", "slurm-env", SLURM_ENV, "gb300-munge-key", when="stack"),
    Row("content", "health-env", HEALTH_ENV, _SLURMD, roles=POOLS, when="stack"),
    Row("repo", f"{_SLURM}/{{name}}", f"{paths.SBIN}/{{name}}", _CTLD, "0755", HEAD, "stack", "slurm-head-tools"),
    Row("repo", f"{_SLURM}/{{name}}", f"{paths.SBIN}/{{name}}", _SLURMD, "0755", GPU, "stack", "slurm-gpu-tools"),
    Row("repo", f"{_SLURM}/{{name}}", f"{paths.SBIN}/{{name}}", _SLURMD, "0755", CPU, "stack", "slurm-cpu-tools"),
    Row("repo", f"{_SLURM}/{{name}}", f"{paths.SBIN}/{{name}}", _LOGIN, "0755", LOGIN, "stack", "slurm-login-tools"),
    Row("repo", f"{_SLURM}/systemd/{{name}}", f"{_UNITS}/{{name}}", _CTLD, roles=HEAD, when="stack",
        each="slurm-head-units"),
    Row("repo", f"{_SLURM}/systemd/{{name}}", f"{_UNITS}/{{name}}", _SLURMD, roles=GPU, when="stack",
        each="slurm-gpu-units"),
    Row("repo", f"{_SLURM}/systemd/{{name}}", f"{_UNITS}/{{name}}", _SLURMD, roles=CPU, when="stack",
        each="slurm-cpu-units"),
    Row("repo", _GENERATOR, f"{paths.SLURM_LIB}/gb300/slurm/{{name}}", _CTLD, roles=HEAD, when="stack",
        each="topology-generator"),
)  # fmt: skip

# The remediation loop's files (docs/self-healing.md#on-the-head): its code, pins, settings, tool and units.
HEAL_ROWS: tuple[Row, ...] = (
    Row("repo", f"{_PACKAGE}/{{name}}", f"{_HEAL}/python/gb300/{{name}}", "gb300-heal-setup", roles=HEAD,
        when="remediation", each="heal-modules"),
    Row("repo", "examples/nccl-eval.py", f"{_HEAL}/examples/nccl-eval.py", "gb300-heal-setup", roles=HEAD,
        when="remediation"),
    Row("content", "heal-requirements", f"{_HEAL}/requirements.txt", "gb300-heal-setup", roles=HEAD,
        when="remediation"),
    Row("content", "heal-config", paths.HEAL_CONFIG, "gb300-heal-setup", roles=HEAD, when="remediation"),
    Row("repo", f"{_SLURM}/gb300-heal", f"{paths.SBIN}/gb300-heal", "gb300-heal-setup", "0755", HEAD, "remediation"),
    Row("repo", f"{_SLURM}/systemd/gb300-heal.service", f"{_UNITS}/gb300-heal.service", "gb300-heal-setup",
        roles=HEAD, when="remediation"),
    Row("content", "heal-timer", f"{_UNITS}/gb300-heal.timer", "gb300-heal-setup", roles=HEAD, when="remediation"),
    Row("repo", f"{_SLURM}/gb300-heal-publish", f"{paths.SBIN}/gb300-heal-publish", "gb300-heal-gate-setup", "0755",
        GPU, "remediation"),
    Row("repo", f"{_SLURM}/systemd/gb300-heal-publish.service", f"{_UNITS}/gb300-heal-publish.service",
        "gb300-heal-gate-setup", roles=GPU, when="remediation"),
    Row("repo", f"{_SLURM}/systemd/gb300-heal-publish.timer", f"{_UNITS}/gb300-heal-publish.timer",
        "gb300-heal-gate-setup", roles=GPU, when="remediation"),
)  # fmt: skip

_MON = "prometheus"
# Every file a node carries besides the step scripts and hooks, in write_files order.
ROWS: tuple[Row, ...] = (
    # Inline and run before the payload is fetched: IMDS is closed before anything else runs (docs/security.md).
    # Its units come with the payload: 00-imds-guard, the first step, enables them.
    Row("content", "imds-guard", paths.IMDS_GUARD, "00-imds-guard", "0755", inline=True, first=True),
    Row("content", "imds-guard-unit", paths.IMDS_GUARD_UNIT, "00-imds-guard"),
    Row("content", "imds-guard-recheck", paths.IMDS_GUARD_RECHECK, "00-imds-guard"),
    Row("content", "imds-guard-timer", paths.IMDS_GUARD_TIMER, "00-imds-guard"),
    # Runs the custom data's fetch-payload again on a running node (a stack's payload only: docs/node-payload.md).
    Row("content", "payload-update", paths.PAYLOAD_UPDATE, "", "0755", when="stack"),
    Row("repo", "cloud-init/lib/gb300-lib.sh", f"{paths.LIB}/lib.sh", "00-imds-guard"),
    Row("repo", "cloud-init/lib/run-step", paths.RUN_STEP, "00-imds-guard", "0755"),
    Row("template", "cluster.env.j2", f"{paths.ETC}/cluster.env", "00-preflight"),
    Row("template", "node.env.j2", f"{paths.ETC}/node.env", "00-preflight"),
    Row("template", "sysctl.conf.j2", "/etc/sysctl.d/90-gb300.conf", "10-tuning"),
    Row("template", "limits.conf.j2", "/etc/security/limits.d/90-gb300.conf", "10-tuning"),
    Row("template", "versions.env.j2", f"{paths.ETC}/versions.env", "00-preflight", roles=GPU),
    Row("template", "modprobe-nvidia.conf.j2", "/etc/modprobe.d/90-gb300-nvidia.conf", "20-nvidia-driver", roles=GPU),
    Row("template", "nccl.conf.j2", "/etc/nccl.conf", "40-nccl", roles=GPU),
    Row("template", "systemd-numa.conf.j2", "/etc/systemd/system.conf.d/90-gb300-numa.conf", "10-tuning", roles=GPU),
    Row("template", "systemd/gb300-resume.service", f"{_SYSTEMD}/gb300-resume.service", "15-kernel"),
    Row("template", "profile-nccl.sh.j2", "/etc/profile.d/gb300-nccl.sh", "40-nccl", roles=GPU),
    Row("repo", "cloud-init/build/{name}.sh", f"{paths.BUILD_DIR}/{{name}}.sh", "40-nccl", "0755", GPU,
        each="build-recipes"),
    Row("repo", f"{_STEPS}/gb300-imds-tag", paths.IMDS_TAG, "72-lustre", "0755", when="imds-tags"),
    Row("content", "storage-env", STORAGE_ENV, "72-lustre", when="storage"),
    Row("content", "blobfuse-config", f"{paths.ETC}/blobfuse2/{{name}}.yaml.in", "74-blobfuse2", roles=GPU,
        when="blob-mounts", each="blob-containers"),
    Row("content", "blobfuse-unit", f"{_SYSTEMD}/gb300-blobfuse2-{{name}}.service", "74-blobfuse2", roles=GPU,
        when="blob-mounts", each="blob-containers"),
    Row("content", "blobfuse-env", f"{paths.ETC}/blobfuse2/{{name}}.env", "74-blobfuse2", roles=GPU,
        when="blob-mounts", each="blob-containers"),
    Row("content", "monitoring-env", MONITORING_ENV, "87-prometheus-agent", when=_MON),
    Row("content", "prometheus-agent", f"{paths.ETC}/prometheus-agent.yml.in", "87-prometheus-agent", when=_MON),
    Row("repo", "templates/dcgm-exporter/counters.csv", f"{paths.ETC}/dcgm-exporter/counters.csv",
        "85-dcgm-exporter", when=_MON),
    Row("repo", "templates/systemd/gb300-dcgm-exporter.service", f"{_SYSTEMD}/gb300-dcgm-exporter.service",
        "85-dcgm-exporter", when=_MON),
    Row("repo", "templates/systemd/gb300-node-exporter.conf",
        f"{_SYSTEMD}/prometheus-node-exporter.service.d/gb300.conf", "86-node-exporter", when=_MON),
    Row("repo", "templates/systemd/gb300-prometheus-agent.service", f"{_SYSTEMD}/gb300-prometheus-agent.service",
        "87-prometheus-agent", when=_MON),
    Row("repo", "templates/systemd/gb300-node-metrics.service", f"{_SYSTEMD}/gb300-node-metrics.service",
        "86-node-exporter", when=_MON),
    Row("repo", "templates/systemd/gb300-node-metrics.timer", f"{_SYSTEMD}/gb300-node-metrics.timer",
        "86-node-exporter", when=_MON),
    Row("repo", f"{_STEPS}/gb300-node-metrics", f"{paths.LIB}/gb300-node-metrics", "86-node-exporter", "0755",
        when=_MON),
    *SLURM_ROWS,
    # The login nodes (gb300:login): each user's processes in one bounded cgroup, the break-glass key refused.
    Row("content", "login-limits", LOGIN_LIMITS, _LOGIN, roles=LOGIN, when="login-pool"),
    Row("content", "break-glass", BREAK_GLASS, _LOGIN, roles=LOGIN, when="no-admin-key"),
    *HEAL_ROWS,
)  # fmt: skip


@functools.cache
def _read(path: str) -> str:
    return (REPO_ROOT / path).read_text(encoding="utf-8")


def _content(row: Row, target: Target, name: str) -> str:
    if row.kind == "content":
        return sources.CONTENT[row.source](target, name)
    if row.kind == "repo":
        return _read(row.source.format(name=name))
    if row.kind == "step":  # the steps' own tree (a test adds a step to a copy of it)
        return (node_steps.CLOUD_INIT_DIR / row.source.removeprefix("cloud-init/")).read_text(encoding="utf-8")
    if row.kind == "hook":
        return node_hooks.read(row.source)  # read each time: a hook is the user's and may change
    ctx = target.node
    return templating.render(
        row.source, ctx=ctx, software=ctx.software, node=ctx.node, nccl=ctx.nccl, steps=target.steps
    )


def _wanted(row: Row, target: Target) -> bool:
    if row.roles and target.role not in row.roles:
        return False
    if not row.when:
        return True
    return target.has_stack and sources.CONDITIONS[row.when](target)


def _blocks(rows: Iterable[Row]) -> Iterator[tuple[str, list[Row]]]:
    """Consecutive rows naming the same ``each`` as one block (a single row is its own block)."""
    block: list[Row] = []
    for row in rows:
        if block and (not row.each or row.each != block[0].each):
            yield block[0].each, block
            block = []
        block.append(row)
    if block:
        yield block[0].each, block


def render(rows: Iterable[Row], target: Target) -> list[NodeFile]:
    """The files of the ``rows`` ``target``'s role carries, rendered, in table order (names outer in a block)."""
    out: list[NodeFile] = []
    for each, block in _blocks(r for r in rows if _wanted(r, target)):
        names: Sequence[str] = sources.NAMES[each](target) if each else ("",)
        for name in names:
            out.extend(NodeFile(r.destination.format(name=name), _content(r, target, name), r.mode) for r in block)
    return out


def step_rows(steps: Sequence[Step]) -> tuple[Row, ...]:
    """One row per step script: it lands at :attr:`Step.node_path` (``run-step <name>`` runs it)."""
    return tuple(Row("step", f"cloud-init/{s.script}", s.node_path, s.name, "0755", s.roles) for s in steps)


def hook_rows(cfg: StackConfig | None, role: str, pool: str) -> tuple[Row, ...]:
    """One row per hook of ``gb300:hooks`` the role (and pool) runs (none without a stack)."""
    return node_hooks.rows(cfg, role, pool) if cfg is not None else ()


def files_for(target: Target) -> list[NodeFile]:
    """Every file ``target``'s role carries besides its step scripts, in table order (contents as rendered)."""
    ctx = target.node
    if ctx.stack is not None:
        _check_slurm(target.slurm)
    return render((*ROWS, *hook_rows(ctx.stack, ctx.role, ctx.pool_name)), target)


def inline_rows(target: Target) -> list[Row]:
    """The rows ``target``'s role also carries in its custom data (``first`` ones run before the fetch)."""
    return [r for r in ROWS if r.inline and _wanted(r, target)]


def slurm_node_files(view: SlurmView) -> list[NodeFile]:
    """The Slurm files of ``view.role``: the head's (configuration, accounting, boot inputs, topology refresh) or a
    GPU node's (boot inputs, health expectations, the health gate, IMEX hooks, fabric publisher). Raises
    SlurmConfigError when the head's accounting settings disagree or a GPU node's inputs lack its pool and shape."""
    _check_slurm(view)
    return render(SLURM_ROWS, Target(None, view=view))


def _check_slurm(view: SlurmView) -> None:
    if view.role == gb300_tags.ROLE_HEAD:
        slurm_files.check_head(view.cluster, view.inputs)
    elif view.role in gb300_tags.POOL_ROLES:
        slurm_files.check_gpu(view.inputs)


def table_markdown() -> str:
    """The node-file table of docs/node-steps.md: every row of the registry and every step script, one line each."""
    lines = [
        "| Kind | Source | Destination | Mode | Owner step | Roles | When |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in (*ROWS, *step_rows(STEPS)):
        roles = ", ".join(row.roles) or "all"
        each = f" (each of `{row.each}`)" if row.each else ""
        lines.append(
            f"| {row.kind} | `{row.source}` | `{row.destination}`{each} | {row.mode} | {row.step or '(tool)'} "
            f"| {roles} | {row.when or 'always'} |"
        )
    return "\n".join(lines) + "\n"
