"""A CPU pool's node (role cpu-node, gb300:cpuPools): no GPU step runs, slurmd registers it as a dynamic node of its
pool without GPUs, and its health gate runs no GPU, InfiniBand or DCGM check."""

from __future__ import annotations

import pytest

from gb300 import config
from gb300 import tags as gb300_tags
from gb300.config import StackConfig
from gb300.node import context as node_context
from gb300.node import steps as node_steps
from gb300.node.bundle import Bundle, bundle_for
from gb300.node.custom_data import render_stack
from gb300.paths import REPO_ROOT
from gb300.slurm import health

EXAMPLE = REPO_ROOT / "examples" / "custom-slurm" / "Pulumi.custom.yaml"


@pytest.fixture(scope="module")
def cfg() -> StackConfig:
    return config.parse(config.load_stack_file(EXAMPLE))


@pytest.fixture(scope="module")
def cpu_bundle(cfg: StackConfig) -> Bundle:
    """The example's CPU pool `prep`'s node bundle."""
    [pool] = cfg.cpu_pools
    return bundle_for(node_context.build(cfg, gb300_tags.ROLE_CPU_NODE, pool), fetch=False)


def _env(bundle: Bundle, path: str) -> dict[str, str]:
    [text] = [f.content for f in bundle.files if f.path == path]
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
    return {key: value.strip("'") for key, value in pairs}


def test_a_cpu_node_runs_no_gpu_step(cfg: StackConfig) -> None:
    """The cpu-node role runs the shared steps and slurmd's registration, and none of the steps only GPU nodes run."""
    [pool] = cfg.cpu_pools
    cpu = {s.name for s in node_steps.steps_for(node_context.build(cfg, gb300_tags.ROLE_CPU_NODE, pool))}
    gpu_only = {s.name for s in node_steps.STEPS if s.roles == node_steps.GPU}
    assert gpu_only, "the registry has GPU-only steps"
    assert cpu.isdisjoint(gpu_only)
    assert {"gb300-munge-key", "gb300-slurmd-setup", "10-tuning", node_steps.READY_STEP} <= cpu


def test_slurm_env_registers_the_pool_without_gpus(cfg: StackConfig, cpu_bundle: Bundle) -> None:
    """slurm.env names the pool, no GPUs, the pool's features (its name first) and the size's CPU layout."""
    [pool] = cfg.cpu_pools
    env = _env(cpu_bundle, "/etc/gb300/slurm.env")
    layout = pool.sku.cpu_layout
    assert layout is not None
    assert (env["GB300_SLURM_POOL"], env["GB300_SLURM_GPUS"]) == (pool.name, "0")
    assert env["GB300_SLURM_FEATURES"] == ",".join((pool.name, *pool.features))
    assert env["GB300_SLURM_CPUS"] == str(pool.sku.vcpus)
    shape = (env["GB300_SLURM_SOCKETS"], env["GB300_SLURM_CORES_PER_SOCKET"], env["GB300_SLURM_THREADS_PER_CORE"])
    assert shape == (str(layout.sockets), str(layout.cores_per_socket), str(layout.threads_per_core))
    assert env["GB300_INSTALL_ENROOT"] == "0"


def test_the_health_gate_skips_every_gpu_check_on_a_cpu_node(cpu_bundle: Bundle) -> None:
    """health.env skips, in every mode, each check but data/health.yaml cpuNodeChecks, loads no NVIDIA module and
    runs no IMEX in the job prolog."""
    env = _env(cpu_bundle, "/etc/gb300/health.env")
    kept = {"expectations", "kernel-modules", "mounts"}
    every = {c.name for c in health.health_spec("Standard_D32ds_v5", gpus=0, ib_ports=0, ib_rate_gbps=None).checks}
    for mode in health.RUN_MODES:
        skipped = set(env[f"GB300_SKIP_{mode.upper()}"].split())
        assert every - kept <= skipped
        assert {"gpus", "ib", "dcgm-diag", "xid"} <= skipped
    assert "nvidia" not in env["GB300_KERNEL_MODULES"].split()
    assert env["GB300_IMEX_MODE"] == "none"
    assert env["GB300_FIELD_WATCHES"] == ""


def test_a_cpu_node_carries_slurms_node_programs_but_no_fabric_publisher(cpu_bundle: Bundle) -> None:
    """The programs slurm.conf runs on every node (health check, prolog, epilog) are there; the NVLink fabric
    publisher and the DCGM job map are not."""
    paths = {f.path for f in cpu_bundle.files}
    for tool in ("gb300-health-check", "gb300-imex-prolog", "gb300-imex-epilog", "gb300-slurm-install"):
        assert f"/usr/local/sbin/{tool}" in paths
    assert not any("fabric-publish" in path or "dcgm-job-map" in path for path in paths)


def test_each_cpu_pool_has_its_own_payload(cfg: StackConfig) -> None:
    """The stack's render holds the CPU pool's payload, named cpu-<pool>, apart from the GPU pool's."""
    rendered = render_stack(cfg)
    [(name, data)] = rendered.cpu_pools.items()
    assert data in rendered.all
    assert data.sha256 != rendered.pools["train"].sha256
    assert (name, data.name) == ("prep", "cpu-prep")


def test_a_cpu_node_needs_its_pool(cfg: StackConfig) -> None:
    """Building a cpu-node context without its pool is refused, naming the role."""
    with pytest.raises(ValueError, match="a cpu-node's custom data needs its pool"):
        node_context.build(cfg, gb300_tags.ROLE_CPU_NODE)
