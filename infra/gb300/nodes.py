"""What each node role boots with: the bootstrap's cloud-config plus the storage, monitoring and Slurm files and
steps of its role.

Custom data is rendered from the typed config alone (no deploy-time values), so its hash is known at plan
time and tells which pools need a reimage. Deploy-time values a node needs (the Key Vault's generated name)
reach it as VM tags read from IMDS, never as custom data.
"""

from __future__ import annotations

from dataclasses import dataclass

from gb300 import bootstrap, node_files
from gb300.config import GpuPool, StackConfig
from gb300.slurm import config as slurm_config
from gb300.slurm import files as slurm_files
from gb300.slurm.health import health_env_for

HEAD = "head"
GPU_NODE = "gpu-node"


@dataclass(frozen=True)
class CustomData:
    """One role's rendered custom data, base64 of gzip as Azure takes it, with its content hash."""

    role: str
    base64: str
    sha256: str
    cloud_config: str

    @property
    def size(self) -> int:
        return len(self.base64)


def head_hostname(cfg: StackConfig) -> str:
    return f"{cfg.cluster.name}-head"


def slurm_cluster(cfg: StackConfig) -> slurm_config.SlurmCluster:
    """The Slurm view of the cluster: one partition per GPU pool, the head node as controller."""
    pools = []
    for pool in cfg.gpu_pools:
        sku = pool.sku
        pools.append(
            slurm_config.SlurmPool(
                name=pool.name,
                node_prefix=f"{cfg.cluster.name}-{pool.name}-",
                count=pool.vms,
                vm_size=pool.vm_size,
                gpus_per_node=sku.gpus,
                cpus=sku.vcpus,
                memory_mib=slurm_config.real_memory_mib(float(sku.memory_gib.value)),
            )
        )
    return slurm_config.SlurmCluster(
        cluster_name=cfg.cluster.name,
        head_hostname=head_hostname(cfg),
        pools=tuple(pools),
        accounting_host=head_hostname(cfg) if cfg.head.slurmdbd else None,
    )


def _boot_inputs(cfg: StackConfig, software: bootstrap.SoftwareSet, role: str) -> slurm_files.SlurmBootInputs:
    enroot = software.component("enroot")
    pyxis = software.component("pyxis")
    slurm = software.component("slurm")
    return slurm_files.SlurmBootInputs(
        head_hostname=head_hostname(cfg),
        keyvault_name=None,  # the node reads its gb300-keyvault tag
        slurmdbd=cfg.head.slurmdbd,  # GB300_SLURMDBD: gb300-slurmdbd-setup installs MariaDB and slurmdbd
        slurm_version=slurm.version,  # Microsoft's slurm-smd packages at this version, held
        slurm_apt_version=slurm.apt_version,
        slurm_packages=slurm.packages,
        slurm_repo=next(r for r in software.repos if r.name == slurm.repo),
        enroot_version=enroot.version,
        enroot_debs=tuple((f.url, f.sha256) for f in enroot.files),
        install_enroot=role == GPU_NODE,  # containers start on GPU nodes; the head's srun needs pyxis only
        pyxis_version=pyxis.version,
        pyxis_source=(pyxis.files[0].url, pyxis.files[0].sha256) if pyxis.files else None,
    )


def render(role: str, cfg: StackConfig, pool: GpuPool | None = None) -> CustomData:
    """The custom data of ``role`` (``head`` or ``gpu-node`` of ``pool``)."""
    software = bootstrap.apply_software_overrides(cfg.software)
    inputs = _boot_inputs(cfg, software, role)
    if role == GPU_NODE:
        if pool is None:
            raise ValueError("a gpu-node's custom data needs its pool")
        [slurm_pool] = [p for p in slurm_cluster(cfg).pools if p.name == pool.name]
        # slurmd registers as a dynamic node with the pool's name as its feature and the pool's node shape
        files = slurm_files.gpu_files(inputs.for_pool(slurm_pool), health_env_for(pool.vm_size))
        steps = slurm_files.GPU_STEPS
        pool_name = pool.name
    else:
        files = slurm_files.head_files(slurm_cluster(cfg), inputs)
        steps = slurm_files.HEAD_STEPS
        pool_name = HEAD
    # Storage and monitoring first (Slurm's steps expect the shared filesystem mounted), then Slurm.
    feature_files = [bootstrap.ExtraFile.of(f) for f in node_files.node_files(cfg, pool_name, role)]
    feature_steps = [bootstrap.ExtraStep(s.name, s.command) for s in node_files.steps_for(cfg, role)]
    # The software set resolved above (versions.yaml with gb300:software applied) serves the Slurm pins and
    # the bootstrap alike, so the versions file is read and the overrides applied once per role.
    ctx = bootstrap.BootstrapContext(
        role=role,
        cluster_name=cfg.cluster.name,
        pool_name=pool_name,
        software=software,
        extra_files=(*feature_files, *files),
        extra_steps=(*feature_steps, *(bootstrap.ExtraStep(name, f"{slurm_files.SBIN}/{name}") for name in steps)),
    )
    rendered = bootstrap.render_custom_data(ctx)
    return CustomData(role, rendered.custom_data, rendered.sha256, rendered.cloud_config)
