"""What the node registry's rows render for: a :class:`Target` (a role's context and steps) and its
:class:`SlurmView` (the Slurm view of the cluster), shared by the registry and its content functions."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from gb300 import tags as gb300_tags
from gb300.config import StackConfig
from gb300.node import context as node_context
from gb300.node.boot_context import BootstrapContext
from gb300.node.steps import Step
from gb300.slurm import config as slurm_config
from gb300.slurm import files as slurm_files
from gb300.slurm.health import cpu_health_env, health_env_for


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


def slurm_view(ctx: BootstrapContext) -> SlurmView:
    """The Slurm view of a node context: its stack's Slurm cluster, boot inputs and (GPU or CPU node) health
    expectations."""
    cfg = node_context.stack_of(ctx)
    cluster = node_context.slurm_cluster(cfg)
    inputs = node_context.boot_inputs(ctx)
    if ctx.role == gb300_tags.ROLE_CPU_NODE:
        cpu = node_context.pool_of(ctx)
        lustre = cfg.storage.lustre is not None
        mounts = node_context.health_mounts(ctx)
        soft = cfg.health.soft_failures_to_drain
        health = cpu_health_env(cpu.vm_size, soft_failures_to_drain=soft, mounts=mounts, lustre=lustre)
        return SlurmView(ctx.role, cluster, inputs, health)
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


@dataclass(frozen=True)
class Target:
    """What the node rows render for: a role's context and the steps it runs, or (``view`` given, no context) the
    Slurm view alone, for the Slurm rows of a cluster of a test's own."""

    ctx: BootstrapContext | None
    steps: tuple[Step, ...] = ()
    view: SlurmView | None = None

    @property
    def role(self) -> str:
        return self.view.role if self.view is not None else self.node.role

    @property
    def node(self) -> BootstrapContext:
        """The node context (a Slurm-only target has none: its rows never ask)."""
        if self.ctx is None:
            msg = "a Slurm-only target renders the Slurm rows only"
            raise TypeError(msg)
        return self.ctx

    @property
    def has_stack(self) -> bool:
        return self.view is not None or self.node.stack is not None

    @property
    def stack(self) -> StackConfig:
        return node_context.stack_of(self.node)

    @functools.cached_property
    def slurm(self) -> SlurmView:
        """The Slurm view: the one given, else the node context's, rendered once per target."""
        return self.view if self.view is not None else slurm_view(self.node)
