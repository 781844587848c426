"""The one registry of every file a node carries: one row per node path, with its source, mode, roles and condition.

As Cluster Toolkit's startup-script runners (``modules/scripts/startup-script/variables.tf``: each runner a
``destination``, a ``source`` or ``content``, and its type) and as :mod:`gb300.tags` does for tags, each
:class:`Row` names where a file lands on the node and where its content comes from:

- :class:`Template`: a Jinja template under ``templates/``, rendered with the node context (``ctx``, ``software``,
  ``node``, ``nccl``, ``steps``);
- :class:`RepoFile`: a file of the repository, placed as it is (a step library, a tool, a unit);
- :class:`Content`: a content function of :mod:`gb300.node.files`, :mod:`gb300.node.imds_guard` or
  :mod:`gb300.slurm` (contents only: none of them names a node path).

A row's ``roles``, ``part`` and ``when`` (a condition on the typed stack config) say who carries it; ``inline``
rows travel in the custom data as well as the payload, ``first`` ones run before the payload is fetched. A
:class:`Family` is rows repeated once per name (``{name}`` in the path), names outer: a Blob container's config,
unit and env file stay together. A :class:`Group` renders another table (:data:`SLURM_ROWS` with the Slurm view of
the node) or the files the heal loop lists (:mod:`gb300.heal.deploy`). The table order is the ``write_files``
order of the full cloud-config, which the golden files hold. The steps themselves are :mod:`gb300.node.steps`;
:mod:`gb300.node.bundle` packs both. docs/node-steps.md says how to add a file.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from gb300 import tags as gb300_tags
from gb300.config import StackConfig
from gb300.errors import BootstrapError
from gb300.node import context as node_context
from gb300.node import files as node_files
from gb300.node import imds_guard, paths, payload, templating
from gb300.node import steps as node_steps
from gb300.node.boot_context import BootstrapContext
from gb300.node.file import NodeFile
from gb300.node.steps import BOTH, GPU, HEAD, LOGIN, Part, Step
from gb300.paths import CLOUD_INIT_DIR, PACKAGE_DIR, REPO_ROOT
from gb300.slurm import config as slurm_config
from gb300.slurm import files as slurm_files
from gb300.slurm.health import health_env_for

_HEAD_ROLE = gb300_tags.ROLE_HEAD  # the head's Prometheus agent also scrapes slurmctld

In = TypeVar("In")
SLURM_ENV = f"{paths.ETC}/slurm.env"
HEALTH_ENV = f"{paths.ETC}/health.env"
STORAGE_ENV = f"{paths.ETC}/storage.env"
MONITORING_ENV = f"{paths.ETC}/monitoring.env"
LOGIN_LIMITS = "/etc/systemd/system/user-.slice.d/50-gb300-limits.conf"
"""systemd applies a ``user-.slice.d`` drop-in to every ``user-<uid>.slice``: one cgroup per signed-in user."""
BREAK_GLASS = "/etc/ssh/sshd_config.d/50-gb300-break-glass.conf"


@dataclass(frozen=True)
class Target:
    """What the node rows render for: a role's context and the steps it runs."""

    ctx: BootstrapContext
    steps: tuple[Step, ...]

    @property
    def stack(self) -> StackConfig:
        return node_context.stack_of(self.ctx)


@dataclass(frozen=True)
class SlurmView:
    """What the Slurm rows render for: the role, the Slurm view of the cluster, the boot inputs and, on a GPU
    node, its health expectations."""

    role: str
    cluster: slurm_config.SlurmCluster
    inputs: slurm_files.SlurmBootInputs
    health_env: str = ""

    @functools.cached_property
    def configs(self) -> dict[str, str]:
        """Slurm's configuration (slurm.conf, gres.conf, ...), rendered once per view."""
        return slurm_config.render(self.cluster)

    @functools.cached_property
    def accounting(self) -> dict[str, str]:
        """slurmdbd.conf and the MariaDB drop-in; empty when accounting is off."""
        return slurm_config.render_accounting(self.cluster)


@dataclass(frozen=True)
class Template:
    """A template under ``templates/``, rendered with the node context."""

    name: str


@dataclass(frozen=True)
class RepoFile:
    """A file of the repository (a path from its root; ``{name}`` for a family's member), placed as it is."""

    path: str


@dataclass(frozen=True)
class Content(Generic[In]):
    """A content function: the text of the file (``name`` is a family member's, else ``""``)."""

    render: Callable[[In, str], str]


@dataclass(frozen=True)
class Row(Generic[In]):
    """One file a node carries: its node path, where its content comes from, its mode, who carries it."""

    path: str
    source: Template | RepoFile | Content[In]
    roles: tuple[str, ...]
    part: Part = "bootstrap"
    mode: str = "0644"
    when: Callable[[In], bool] | None = None
    inline: bool = False
    first: bool = False


@dataclass(frozen=True)
class Family(Generic[In]):
    """``rows`` once per name ``names`` gives (``{name}`` in their paths and repository files), names outer."""

    names: Callable[[In], Sequence[str]]
    rows: tuple[Row[In], ...]
    roles: tuple[str, ...]
    part: Part = "bootstrap"
    when: Callable[[In], bool] | None = None


@dataclass(frozen=True)
class Group:
    """Files another table or module renders for the node (its Slurm rows, the heal loop's list)."""

    name: str
    render: Callable[[Target], Iterable[NodeFile]]
    roles: tuple[str, ...]
    part: Part
    when: Callable[[Target], bool] | None = None


Entry = Row[In] | Family[In]


@functools.cache
def _read(path: str) -> str:
    return (REPO_ROOT / path).read_text(encoding="utf-8")


def _content(source: Template | RepoFile | Content[In], value: In, name: str) -> str:
    if isinstance(source, Content):
        return source.render(value, name)
    if isinstance(source, RepoFile):
        return _read(source.path.format(name=name))
    assert isinstance(value, Target)  # noqa: S101 - templates are node rows
    ctx = value.ctx
    return templating.render(
        source.name, ctx=ctx, software=ctx.software, node=ctx.node, nccl=ctx.nccl, steps=value.steps
    )


def _place(row: Row[In], value: In, name: str = "") -> NodeFile:
    return NodeFile(row.path.format(name=name), _content(row.source, value, name), row.mode)


def render_rows(entries: Iterable[Entry[In]], value: In, wanted: Callable[[Entry[In]], bool]) -> Iterator[NodeFile]:
    """The files of ``entries`` that ``wanted`` keeps, rendered for ``value``, in table order."""
    for entry in entries:
        if not wanted(entry):
            continue
        if isinstance(entry, Row):
            yield _place(entry, value)
            continue
        for name in entry.names(value):
            yield from (_place(row, value, name) for row in entry.rows)


def _on(condition: Callable[[StackConfig], bool]) -> Callable[[Target], bool]:
    """A condition of :mod:`gb300.node.steps` on the stack, for a node row."""
    return lambda t: condition(t.stack)


_blob_mounts = _on(node_steps.on_blob_mounts)
_prometheus = _on(node_steps.on_prometheus)
_remediation = _on(node_steps.on_remediation)
_storage = _on(node_steps.on_storage)
_imds_tags = _on(node_steps.on_imds_tags)


def _login(t: Target) -> bool:
    return t.stack.login is not None


def _no_admin_key(t: Target) -> bool:
    login = t.stack.login
    return login is not None and not login.admin_key


def _stack(render: Callable[[StackConfig], str]) -> Content[Target]:
    return Content(lambda t, _name: render(t.stack))


def _guard(render: Callable[[StackConfig | None], str]) -> Content[Target]:
    return Content(lambda t, _name: render(t.ctx.stack))


def _recipes(t: Target) -> list[str]:
    """The build recipes (cloud-init/build/) of the ``install: source`` components; each must exist."""
    names = []
    for comp in t.ctx.software.components:
        if comp.install != "source" or comp.recipe is None:
            continue
        source = CLOUD_INIT_DIR / "build" / f"{comp.recipe}.sh"
        if not source.is_file():
            msg = f"versions.yaml components.{comp.name}.recipe: no build recipe {source} (got {comp.recipe!r})"
            raise BootstrapError(msg)
        names.append(comp.recipe)
    return names


# --- the Slurm rows (rendered for a SlurmView: tests render them for a cluster of their own) ---

SLURM_HEAD_TOOLS = ("gb300-slurm-install", "gb300-topology-refresh")
"""The head's tools (``gb300-slurm-install`` is no step: the steps call it to install Slurm at the pinned version)."""
SLURM_LOGIN_TOOLS = ("gb300-slurm-install",)
"""The login nodes' tools: Slurm's commands and sackd come from ``gb300-slurm-install``, as on the other roles."""
SLURM_GPU_TOOLS = (
    "gb300-slurm-install",
    "gb300-health-check",
    "gb300-imex-prolog",
    "gb300-imex-epilog",
    "gb300-enroot-dirs",  # called by the IMEX prolog and epilog and by gb300-pyxis-setup
    "gb300-dcgm-job-map",  # called by the IMEX prolog and epilog: the DCGM exporter's job label per GPU
    "gb300-pam-adopt",  # called by gb300-slurmd-setup: ssh only for users with a job here
    "gb300-fabric-publish",
    "gb300-scheduled-events",  # drains before Azure maintenance (IMDS Scheduled Events), resumes after
)
SLURM_HEAD_UNITS = ("gb300-topology-refresh.service", "gb300-topology-refresh.timer")
SLURM_GPU_UNITS = ("gb300-health-boot.service", "gb300-fabric-publish.service", "gb300-scheduled-events.service")
TOPOLOGY_GENERATOR = ("__init__.py", "hostlist.py", "topology.py", "stale.py")
"""gb300's own modules the head's ``gb300-topology-refresh`` runs (under :data:`gb300.node.paths.SLURM_LIB`)."""
_GENERATOR_SOURCE = f"{PACKAGE_DIR.relative_to(REPO_ROOT)}/slurm/{{name}}"


def _accounting(v: SlurmView) -> bool:
    return bool(v.accounting)


def _accounts(v: SlurmView) -> bool:
    return slurm_config.ACCOUNTS_FILE in v.accounting


def _names(names: tuple[str, ...]) -> Callable[[SlurmView], Sequence[str]]:
    return lambda _v: names


SLURM_ROWS: tuple[Row[SlurmView] | Family[SlurmView], ...] = (
    Family(lambda v: list(v.configs), (Row("/etc/slurm/{name}", Content(lambda v, n: v.configs[n]), HEAD),), HEAD),
    Row("/etc/slurm/slurmdbd.conf", Content(lambda v, _n: v.accounting["slurmdbd.conf"]), HEAD, "slurm", "0600",
        _accounting),
    Row("/etc/mysql/mariadb.conf.d/60-gb300-slurmdbd.cnf",
        Content(lambda v, _n: v.accounting["mariadb-slurmdbd.cnf"]), HEAD, "slurm", when=_accounting),
    Row(f"{paths.ETC}/{slurm_config.ACCOUNTS_FILE}",
        Content(lambda v, _n: v.accounting[slurm_config.ACCOUNTS_FILE]), HEAD, "slurm", when=_accounts),
    # slurmdbd.service drop-in: run as the slurm user from the start
    Row(f"{paths.UNIT_STAGING}/slurmdbd-gb300.conf", RepoFile("cloud-init/slurm/systemd/slurmdbd-gb300.conf"), HEAD,
        "slurm", when=_accounting),
    Row(SLURM_ENV, Content(lambda v, _n: slurm_files.render_slurm_env(v.inputs)), BOTH, "slurm"),
    Row(HEALTH_ENV, Content(lambda v, _n: v.health_env), GPU, "slurm"),
    Family(_names(SLURM_HEAD_TOOLS), (Row(f"{paths.SBIN}/{{name}}", RepoFile("cloud-init/slurm/{name}"), HEAD,
                                          mode="0755"),), HEAD),
    Family(_names(SLURM_GPU_TOOLS), (Row(f"{paths.SBIN}/{{name}}", RepoFile("cloud-init/slurm/{name}"), GPU,
                                         mode="0755"),), GPU),
    Family(_names(SLURM_LOGIN_TOOLS), (Row(f"{paths.SBIN}/{{name}}", RepoFile("cloud-init/slurm/{name}"), LOGIN,
                                           mode="0755"),), LOGIN),
    Family(_names(SLURM_HEAD_UNITS), (Row(f"{paths.UNIT_STAGING}/{{name}}",
                                          RepoFile("cloud-init/slurm/systemd/{name}"), HEAD),), HEAD),
    Family(_names(SLURM_GPU_UNITS), (Row(f"{paths.UNIT_STAGING}/{{name}}",
                                         RepoFile("cloud-init/slurm/systemd/{name}"), GPU),), GPU),
    Family(_names(TOPOLOGY_GENERATOR), (Row(f"{paths.SLURM_LIB}/gb300/slurm/{{name}}", RepoFile(_GENERATOR_SOURCE),
                                            HEAD),), HEAD),
)  # fmt: skip


def slurm_node_files(view: SlurmView) -> list[NodeFile]:
    """The Slurm files of ``view.role``: the head's (configuration, accounting, boot inputs, topology refresh) or a
    GPU node's (boot inputs, health expectations, the health gate, IMEX hooks, fabric publisher). Raises
    SlurmConfigError when the head's accounting settings disagree or a GPU node's inputs lack its pool and shape."""
    if view.role == gb300_tags.ROLE_HEAD:
        slurm_files.check_head(view.cluster, view.inputs)
    elif view.role == gb300_tags.ROLE_GPU_NODE:
        slurm_files.check_gpu(view.inputs)
    return list(render_rows(SLURM_ROWS, view, lambda e: view.role in e.roles and (e.when is None or e.when(view))))


def slurm_view(ctx: BootstrapContext) -> SlurmView:
    """The Slurm view of a node context: its stack's Slurm cluster, boot inputs and (GPU) health expectations."""
    cfg = node_context.stack_of(ctx)
    cluster = node_context.slurm_cluster(cfg)
    inputs = node_context.boot_inputs(ctx)
    if ctx.role != gb300_tags.ROLE_GPU_NODE:
        return SlurmView(ctx.role, cluster, inputs)
    health = health_env_for(
        node_context.gpu_pool_of(ctx).vm_size,
        soft_failures_to_drain=cfg.health.soft_failures_to_drain,
        nvme_mount=ctx.node.nvme_mount_point,
        mounts=node_context.health_mounts(ctx),
        lustre=cfg.storage.lustre is not None,  # the kernel must have the lustre module
    )
    return SlurmView(ctx.role, cluster, inputs, health)


def _heal_head(t: Target) -> list[NodeFile]:
    from gb300.heal import deploy as heal_deploy  # noqa: PLC0415 - only stacks with the loop on need it

    return heal_deploy.head_files(t.stack)


def _heal_gpu(_t: Target) -> list[NodeFile]:
    from gb300.heal import deploy as heal_deploy  # noqa: PLC0415 - only stacks with the loop on need it

    return heal_deploy.gpu_files()


_SYSTEMD = paths.SYSTEMD
_STEPS = "cloud-init/scripts"

# Every file a node carries besides the step scripts themselves, in write_files order.
ROWS: tuple[Row[Target] | Family[Target] | Group, ...] = (
    # Inline and run before the payload is fetched: IMDS is closed before anything else runs (docs/security.md).
    # Its units come with the payload: 00-imds-guard, the first step, enables them.
    Row(paths.IMDS_GUARD, _guard(imds_guard.script), BOTH, mode="0755", inline=True, first=True),
    Row(paths.IMDS_GUARD_UNIT, _guard(imds_guard.unit), BOTH),
    Row(paths.IMDS_GUARD_RECHECK, _guard(imds_guard.recheck_unit), BOTH),
    Row(paths.IMDS_GUARD_TIMER, _guard(imds_guard.timer), BOTH),
    # Runs the custom data's fetch-payload again on a running node (a stack's payload only: docs/node-payload.md).
    Row(paths.PAYLOAD_UPDATE, Content(lambda _t, _n: payload.update_script()), BOTH, "storage", "0755"),
    Row(f"{paths.LIB}/lib.sh", RepoFile("cloud-init/lib/gb300-lib.sh"), BOTH),
    Row(paths.RUN_STEP, RepoFile("cloud-init/lib/run-step"), BOTH, mode="0755"),
    Row(f"{paths.ETC}/cluster.env", Template("cluster.env.j2"), BOTH),
    Row(f"{paths.ETC}/node.env", Template("node.env.j2"), BOTH),
    Row("/etc/sysctl.d/90-gb300.conf", Template("sysctl.conf.j2"), BOTH),
    Row("/etc/security/limits.d/90-gb300.conf", Template("limits.conf.j2"), BOTH),
    Row(f"{paths.ETC}/versions.env", Template("versions.env.j2"), GPU),
    Row("/etc/modprobe.d/90-gb300-nvidia.conf", Template("modprobe-nvidia.conf.j2"), GPU),
    Row("/etc/nccl.conf", Template("nccl.conf.j2"), GPU),
    Row("/etc/systemd/system.conf.d/90-gb300-numa.conf", Template("systemd-numa.conf.j2"), GPU),
    Row(f"{_SYSTEMD}/gb300-resume.service", Template("systemd/gb300-resume.service"), BOTH),
    Row("/etc/profile.d/gb300-nccl.sh", Template("profile-nccl.sh.j2"), GPU),
    Family(_recipes, (Row(f"{paths.BUILD_DIR}/{{name}}.sh", RepoFile("cloud-init/build/{name}.sh"), GPU,
                          mode="0755"),), GPU),
    Row(paths.IMDS_TAG, RepoFile(f"{_STEPS}/gb300-imds-tag"), BOTH, "storage", "0755", _imds_tags),
    Row(STORAGE_ENV, _stack(node_files.storage_env), BOTH, "storage", when=_storage),
    Family(lambda t: node_files.mounted_containers(t.stack), (
        Row(f"{paths.ETC}/blobfuse2/{{name}}.yaml.in", Content(lambda t, n: node_files.blobfuse_config(t.stack, n)),
            GPU),
        Row(f"{_SYSTEMD}/gb300-blobfuse2-{{name}}.service",
            Content(lambda t, n: node_files.blobfuse_unit(t.stack, n)), GPU),
        Row(f"{paths.ETC}/blobfuse2/{{name}}.env", Content(lambda t, n: node_files.blobfuse_env(t.stack, n)), GPU),
    ), GPU, "storage", _blob_mounts),
    Row(MONITORING_ENV, _stack(node_files.monitoring_env), BOTH, "monitoring", when=_prometheus),
    Row(f"{paths.ETC}/prometheus-agent.yml.in",
        Content(lambda t, _n: node_files.prometheus_agent(t.stack, t.ctx.pool_name, t.ctx.role == _HEAD_ROLE)),
        BOTH, "monitoring", when=_prometheus),
    Row(f"{paths.ETC}/dcgm-exporter/counters.csv", RepoFile("templates/dcgm-exporter/counters.csv"), BOTH,
        "monitoring", when=_prometheus),
    Row(f"{_SYSTEMD}/gb300-dcgm-exporter.service", RepoFile("templates/systemd/gb300-dcgm-exporter.service"), BOTH,
        "monitoring", when=_prometheus),
    Row(f"{_SYSTEMD}/prometheus-node-exporter.service.d/gb300.conf",
        RepoFile("templates/systemd/gb300-node-exporter.conf"), BOTH, "monitoring", when=_prometheus),
    Row(f"{_SYSTEMD}/gb300-prometheus-agent.service", RepoFile("templates/systemd/gb300-prometheus-agent.service"),
        BOTH, "monitoring", when=_prometheus),
    Row(f"{_SYSTEMD}/gb300-node-metrics.service", RepoFile("templates/systemd/gb300-node-metrics.service"), BOTH,
        "monitoring", when=_prometheus),
    Row(f"{_SYSTEMD}/gb300-node-metrics.timer", RepoFile("templates/systemd/gb300-node-metrics.timer"), BOTH,
        "monitoring", when=_prometheus),
    Row(f"{paths.LIB}/gb300-node-metrics", RepoFile(f"{_STEPS}/gb300-node-metrics"), BOTH, "monitoring", "0755",
        _prometheus),
    Group("slurm", lambda t: slurm_node_files(slurm_view(t.ctx)), BOTH, "slurm"),
    # The login nodes (gb300:login): each user's processes in one bounded cgroup, the break-glass key refused.
    Row(LOGIN_LIMITS, _stack(node_files.login_limits), LOGIN, "slurm", when=_login),
    Row(BREAK_GLASS, _stack(node_files.break_glass), LOGIN, "slurm", when=_no_admin_key),
    Group("remediation", _heal_head, HEAD, "slurm", _remediation),
    Group("remediation gate", _heal_gpu, GPU, "slurm", _remediation),
)  # fmt: skip


def _wanted(entry: Row[Target] | Family[Target] | Group, target: Target) -> bool:
    if target.ctx.role not in entry.roles:
        return False
    if target.ctx.stack is None:
        return entry.part == "bootstrap"
    return entry.when is None or entry.when(target)


def files_for(target: Target) -> list[NodeFile]:
    """Every file ``target``'s role carries besides its step scripts, in table order (contents as rendered)."""
    out: list[NodeFile] = []
    for entry in ROWS:
        if not _wanted(entry, target):
            continue
        if isinstance(entry, Group):
            out.extend(entry.render(target))
        else:
            out.extend(render_rows((entry,), target, lambda _e: True))
    return out


def inline_rows(target: Target) -> list[Row[Target]]:
    """The rows ``target``'s role also carries in its custom data (``first`` ones run before the fetch)."""
    return [e for e in ROWS if isinstance(e, Row) and e.inline and _wanted(e, target)]
