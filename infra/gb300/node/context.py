"""The one context a node's custom data is rendered from, built from the typed stack config.

:func:`build` turns ``(StackConfig, role, pool)`` into a :class:`~gb300.BootstrapContext` that carries
the stack itself; every value a step or a file needs is read from it here (or by the providers in
:mod:`gb300.node.steps`), never from a default in a feature module. The functions below are the derived values
several files share: the Slurm view of the cluster, the Slurm boot inputs, and the mounts the health gate checks.
"""

from __future__ import annotations

from collections.abc import Mapping

from gb300 import tags as gb300_tags
from gb300.config import CpuPool, GpuPool, StackConfig, netplan
from gb300.errors import BootstrapError
from gb300.facts import catalog, slurm_settings
from gb300.facts.software import apply_software_overrides
from gb300.node.boot_context import BootstrapContext
from gb300.resources import MUNGE_SECRET_NAME
from gb300.slurm import accounts as slurm_accounts
from gb300.slurm import config as slurm_config
from gb300.slurm import files as slurm_files
from gb300.slurm import options as slurm_options


def head_hostname(cfg: StackConfig) -> str:
    """The head node's host name (Slurm's controller)."""
    return f"{cfg.cluster.name}-head"


def max_gpu_nodes(cfg: StackConfig) -> int:
    """Slurm's MaxNodeCount: the GPU subnet's usable addresses, the most GPU nodes that can ever register.

    It depends on the address space alone (the GPU subnet never moves, docs/day2.md), not on the pools' sizes,
    so resizing a pool leaves the head's custom data, and with it the head VM, unchanged.
    """
    gpu = netplan.gpu_network(cfg.network.address_space, cfg.network.gpu_subnet_prefix_length)
    reserved = int(catalog.load().limit("subnetReservedAddresses"))
    return max(int(gpu.num_addresses) - reserved, sum(p.vms for p in cfg.gpu_pools) + cpu_vms(cfg))


def cpu_vms(cfg: StackConfig) -> int:
    """The VMs of every CPU pool (they share the GPU nodes' subnet and Slurm's MaxNodeCount)."""
    return sum(p.count for p in cfg.cpu_pools)


def _slurm_pool(cfg: StackConfig, pool: GpuPool | CpuPool) -> slurm_config.SlurmPool:
    """The Slurm view of one pool: its node set, its partition, the shape its nodes register with."""
    sku = pool.sku
    layout = sku.cpu_layout
    return slurm_config.SlurmPool(
        name=pool.name,
        node_prefix=f"{cfg.cluster.name}-{pool.name}-",
        count=pool.vms if isinstance(pool, GpuPool) else pool.count,
        vm_size=pool.vm_size,
        gpus_per_node=sku.gpus if isinstance(pool, GpuPool) else 0,
        cpus=sku.vcpus,
        memory_mib=slurm_config.real_memory_mib(float(sku.memory_gib.value)),
        sockets=layout.sockets if layout else None,
        cores_per_socket=layout.cores_per_socket if layout else None,
        threads_per_core=layout.threads_per_core if layout else None,
        partition_settings=_rendered("partition_line", pool.partition_settings),
        features=pool.node_features if isinstance(pool, CpuPool) else (),
    )


def slurm_cluster(cfg: StackConfig) -> slurm_config.SlurmCluster:
    """The Slurm view of the cluster: one partition per GPU pool, then one per CPU pool, the head node as
    controller."""
    pools: list[GpuPool | CpuPool] = [*cfg.gpu_pools, *cfg.cpu_pools]
    slurm_pools = [_slurm_pool(cfg, pool) for pool in pools]
    return slurm_config.SlurmCluster(
        cluster_name=cfg.cluster.name,
        head_hostname=head_hostname(cfg),
        pools=tuple(slurm_pools),
        max_nodes=max_gpu_nodes(cfg),
        accounting_host=head_hostname(cfg) if cfg.accounting else None,
        settings=_rendered("slurm_conf", cfg.slurm.settings),
        partitions=tuple(
            slurm_config.SlurmPartition(
                name=part.name,
                pools=tuple(part.pools or ()),
                feature=part.feature,
                settings=_rendered("partition_line", part.settings),
            )
            for part in cfg.slurm.partitions
        ),
        accounts=declared_accounts(cfg),
        metrics=_metrics(cfg),
    )


def _metrics(cfg: StackConfig) -> bool:
    """Whether the pinned Slurm release serves its own metrics (``MetricsType``); an unpinned version keeps them on."""
    version = apply_software_overrides(cfg.software).component("slurm").version
    return version is None or slurm_options.knows_metrics(version)


def declared_accounts(cfg: StackConfig) -> slurm_accounts.SlurmAccounts | None:
    """The accounts, QoS and users of gb300:slurm for gb300-slurm-accounts; None when none is declared."""
    declared = cfg.slurm
    if not declared.declares_accounts:
        return None
    return slurm_accounts.SlurmAccounts(
        qos=tuple(
            slurm_accounts.SlurmQos(
                name=q.name,
                priority=q.priority,
                preempt=tuple(q.preempt),
                max_wall_hours=q.max_wall_hours,
                max_gpus_per_user=q.max_gpus_per_user,
                gpu_limit=q.gpu_limit,
            )
            for q in declared.qos
        ),
        accounts=tuple(
            slurm_accounts.SlurmAccount(a.name, a.fairshare, a.gpu_limit, tuple(a.qos), a.default_qos)
            for a in declared.accounts
        ),
        users=tuple(
            (user, tuple(member_of), declared.default_account(user))
            for user, member_of in declared.memberships().items()
        ),
    )


def _rendered(line: str, settings: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    """Custom Slurm settings as slurm.conf writes them (a bool as YES/NO), in the stack file's order."""
    return tuple((key, slurm_settings.render_value(line, key, value)) for key, value in settings.items())


def stack_of(ctx: BootstrapContext) -> StackConfig:
    """The stack config a node context was built from (providers of stack-derived files need one)."""
    if ctx.stack is None:
        msg = f"role {ctx.role!r}: this file derives from the stack config; build the context with node_context.build"
        raise BootstrapError(msg)
    return ctx.stack


def gpu_pool_of(ctx: BootstrapContext) -> GpuPool:
    """The GPU pool of a gpu-node context."""
    cfg = stack_of(ctx)
    [pool] = [p for p in cfg.gpu_pools if p.name == ctx.pool_name]
    return pool


def pool_of(ctx: BootstrapContext) -> GpuPool | CpuPool:
    """The pool of a gpu-node or cpu-node context."""
    cfg = stack_of(ctx)
    if ctx.role == gb300_tags.ROLE_CPU_NODE:
        [cpu] = [p for p in cfg.cpu_pools if p.name == ctx.pool_name]
        return cpu
    return gpu_pool_of(ctx)


def boot_inputs(ctx: BootstrapContext) -> slurm_files.SlurmBootInputs:
    """What the Slurm steps read at boot (``/etc/gb300/slurm.env``), from the stack and its software pins."""
    cfg = stack_of(ctx)
    software = ctx.software
    enroot = software.component("enroot")
    pyxis = software.component("pyxis")
    slurm = software.component("slurm")
    racks = [p.sku.vms_per_nvlink_domain for p in cfg.gpu_pools if p.sku.is_rack_scale]
    inputs = slurm_files.SlurmBootInputs(
        head_hostname=head_hostname(cfg),
        keyvault_name=None,  # the node reads its Key Vault tag (gb300.tags.KEYVAULT)
        munge_secret_name=MUNGE_SECRET_NAME,  # the secret the program creates in the cluster's Key Vault
        secret_wait_seconds=ctx.node.secret_wait_seconds,  # data/node.yaml secret_fetch
        secret_retry_delay_seconds=ctx.node.secret_retry_delay_seconds,
        block_size=racks[0] if racks else 1,  # VMs per NVLink domain of the pools' SKU (topology/block)
        slurmdbd=cfg.accounting,  # GB300_SLURMDBD: gb300-slurmdbd-setup installs MariaDB and slurmdbd
        slurm_version=slurm.version,  # Microsoft's slurm-smd packages at this version, held
        slurm_apt_version=slurm.apt_version,
        slurm_packages=slurm.packages,
        slurm_repo=next(r for r in software.repos if r.name == slurm.repo),
        enroot_version=enroot.version,
        enroot_source=(enroot.git.url, enroot.git.commit) if enroot.git else None,
        enroot_packages=enroot.build_packages,
        # containers start on GPU nodes; the head's srun needs pyxis only
        install_enroot=ctx.role == gb300_tags.ROLE_GPU_NODE,
        pyxis_version=pyxis.version,
        pyxis_source=(pyxis.git.url, pyxis.git.commit) if pyxis.git else None,
        pyxis_packages=pyxis.build_packages,
    )
    if ctx.role not in gb300_tags.POOL_ROLES:
        return inputs
    [slurm_pool] = [p for p in slurm_cluster(cfg).pools if p.name == ctx.pool_name]
    # slurmd registers as a dynamic node with the pool's features (its name first) and the pool's node shape
    return inputs.for_pool(slurm_pool)


def health_mounts(ctx: BootstrapContext) -> tuple[str, ...]:
    """The mounts a pool node's health gate requires: exactly what the stack configures on it.

    The NVMe scratch (70-nvme-raid, every GPU node), the Lustre filesystem when ``gb300:storage.lustre`` is
    set, and every Blob container with a ``mountPath`` (GPU nodes: BlobFuse2's cache is on the NVMe scratch);
    nothing else (no shared mount of gb300's own). A CPU node has Lustre's only.
    """
    cfg = stack_of(ctx)
    gpu = ctx.role == gb300_tags.ROLE_GPU_NODE
    mounts = [ctx.node.nvme_mount_point] if gpu else []
    if cfg.storage.lustre is not None:
        mounts.append(cfg.storage.lustre.mount_path)
    if cfg.storage.blob is not None and gpu:
        mounts.extend(c.mount_path for c in cfg.storage.blob.containers if c.mount_path)
    return tuple(mounts)


def release(version: str) -> str:
    """A Debian version as the release it packages: no epoch, no ``-<digits>`` revision (``1:4.5.3-1`` -> ``4.5.3``)."""
    version = version.split(":", 1)[-1]
    head, _, revision = version.rpartition("-")
    return head if head and revision.isdigit() else version


def image_env(image: str) -> dict[str, str]:
    """What 00-preflight checks of the booted image: its URN and, for a version the image catalog knows, the
    image's record file followed by the ``KEY=version`` pairs that version records there."""
    env = {"GB300_IMAGE": image}
    known = catalog.load().image(image)
    entry = known.versions.get(image.rsplit(":", 1)[-1]) if known else None
    if known is not None and entry is not None and known.record_file:
        pairs = [
            f"{key}={release(entry.components[name])}"
            for name, key in known.record_keys.items()
            if name in entry.components
        ]
        env["GB300_IMAGE_RECORD"] = " ".join([known.record_file, *pairs])
    return env


def _image(cfg: StackConfig, role: str, pool: GpuPool | CpuPool | None) -> str:
    """The image ``role``'s VMs boot: the pool's, the login nodes' or the head's."""
    if pool is not None:
        return pool.image
    if role == gb300_tags.ROLE_LOGIN and cfg.login is not None:
        return cfg.login.image
    return cfg.head.image


def build(cfg: StackConfig, role: str, pool: GpuPool | CpuPool | None = None) -> BootstrapContext:
    """The context of ``role`` (``head``, ``login``, or ``gpu-node`` or ``cpu-node`` of ``pool``) for stack ``cfg``."""
    if role in gb300_tags.POOL_ROLES and pool is None:
        raise ValueError(f"a {role}'s custom data needs its pool")
    node_pool = pool if role in gb300_tags.POOL_ROLES else None
    # The software set (versions.yaml with gb300:software applied) serves the Slurm pins and the bootstrap alike.
    return BootstrapContext(
        role=role,
        cluster_name=cfg.cluster.name,
        pool_name=node_pool.name if node_pool is not None else role,
        software=apply_software_overrides(cfg.software),
        extra_env=tuple(sorted(image_env(_image(cfg, role, node_pool)).items())),
        stack=cfg,
    )
