"""What each role carries for Slurm (the Slurm rows of gb300.node.registry, contents from gb300.slurm.files)."""

from __future__ import annotations

import gzip
import re
import shlex

import pytest

from gb300.node.file import NodeFile
from gb300.node.registry import SlurmView, slurm_node_files
from gb300.node.steps import STEPS
from gb300.slurm.config import SlurmCluster, SlurmPool
from gb300.slurm.files import SlurmBootInputs, render_slurm_env
from gb300.slurm.health import health_spec, render_health_env

INPUTS = SlurmBootInputs(head_hostname="head", keyvault_name="kv-gb300-ref")
TRAIN = SlurmPool(
    "train", "ref-train-r0001-", 36, "Standard_ND128isr_GB300_v6", 4, 128, 840499,
    sockets=2, cores_per_socket=64, threads_per_core=1,
)  # fmt: skip
CLUSTER = SlurmCluster("ref", "head", (TRAIN,))
NODE_INPUTS = INPUTS.for_pool(TRAIN)
HEALTH = render_health_env(
    health_spec("Standard_ND128isr_GB300_v6", gpus=4, ib_ports=4, ib_rate_gbps=800),
    soft_failures_to_drain=3,
    nvme_mount="/mnt/resource_nvme",
    mounts=("/mnt/resource_nvme",),
)


def head_files(cluster: SlurmCluster, inputs: SlurmBootInputs) -> list[NodeFile]:
    """The head's Slurm files as the node registry places them."""
    return slurm_node_files(SlurmView("head", cluster, inputs))


def gpu_files(inputs: SlurmBootInputs, health_env: str) -> list[NodeFile]:
    """A GPU node's Slurm files as the node registry places them."""
    return slurm_node_files(SlurmView("gpu-node", CLUSTER, inputs, health_env))


def test_every_tool_is_shipped_executable() -> None:
    """The tools Slurm and systemd run (topology refresh, health gate, IMEX hooks, publisher) are 0755 in sbin."""
    tools = {
        "head": (head_files(CLUSTER, INPUTS), ["gb300-topology-refresh"]),
        "gpu": (
            gpu_files(NODE_INPUTS, HEALTH),
            ["gb300-health-check", "gb300-imex-prolog", "gb300-imex-epilog", "gb300-fabric-publish"],
        ),
    }
    for files, names in tools.values():
        shipped = {f.path: f.permissions for f in files}
        for name in names:
            assert shipped[f"/usr/local/sbin/{name}"] == "0755"


def test_gpu_nodes_get_health_gate_and_imex_hooks_named_in_slurm_conf() -> None:
    """The programs slurm.conf names (health check, prolog, epilog) are placed on GPU nodes."""
    paths = {f.path for f in gpu_files(NODE_INPUTS, HEALTH)}
    assert {
        "/usr/local/sbin/gb300-health-check",
        "/usr/local/sbin/gb300-imex-prolog",
        "/usr/local/sbin/gb300-imex-epilog",
        "/etc/gb300/health.env",
    } <= paths


@pytest.mark.parametrize("role", ["head", "gpu"])
def test_files_fit_custom_data_with_room_to_spare(role: str) -> None:
    """Gzipped, a role's Slurm files use under a third of Azure's 64 KB custom data."""
    files = head_files(CLUSTER, INPUTS) if role == "head" else gpu_files(NODE_INPUTS, HEALTH)
    size = len(gzip.compress("".join(f.path + f.content for f in files).encode()))
    assert size < 64 * 1024 // 3


def test_slurm_env_is_sourceable_and_holds_no_key() -> None:
    """slurm.env is KEY=value lines a shell can source, naming the vault and secret but holding no key."""
    env = render_slurm_env(SlurmBootInputs("head", "kv-gb300-ref", identity_client_id="abc", pyxis_version="0.20.0"))
    pairs = dict(shlex.split(line)[0].split("=", 1) for line in env.splitlines() if not line.startswith("#"))
    assert pairs["GB300_KEYVAULT_NAME"] == "kv-gb300-ref"
    assert pairs["GB300_MUNGE_SECRET_NAME"] == "munge-key"  # noqa: S105 - a secret name
    assert pairs["GB300_IDENTITY_CLIENT_ID"] == "abc"
    assert "GB300_ENROOT_VERSION" not in pairs


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        (
            SlurmBootInputs("head", "kv"),
            "'keyvault_name' must be a Key Vault name, 3-24 characters (got 'kv')",
        ),
        (SlurmBootInputs("head", "kv-gb300", block_size=0), "'block_size' must be at least 1 (got 0)"),
        (SlurmBootInputs("head", "kv-gb300", pool="Train"), "'pool' must be lowercase letters, digits or '_'"),
        (SlurmBootInputs("head", "kv-gb300", cpus=0), "'cpus' must be at least 1 (got 0)"),
    ],
    ids=["short-vault", "zero-block", "pool-case", "zero-cpus"],
)
def test_slurm_env_rejects_invalid_inputs(inputs: SlurmBootInputs, message: str) -> None:
    """Invalid boot inputs raise ValueError naming the field."""
    with pytest.raises(ValueError, match=re.escape(message)):
        render_slurm_env(inputs)


def env_pairs(text: str) -> dict[str, str]:
    return dict(shlex.split(line)[0].split("=", 1) for line in text.splitlines() if not line.startswith("#"))


def test_gpu_node_env_carries_its_pool_and_shape() -> None:
    """A GPU node's slurm.env names its pool and the CPUs, socket layout, memory and GPUs it registers with."""
    [env] = [f.content for f in gpu_files(NODE_INPUTS, HEALTH) if f.path == "/etc/gb300/slurm.env"]
    pairs = env_pairs(env)
    assert (pairs["GB300_SLURM_POOL"], pairs["GB300_SLURM_CPUS"]) == ("train", "128")
    layout = ("GB300_SLURM_SOCKETS", "GB300_SLURM_CORES_PER_SOCKET", "GB300_SLURM_THREADS_PER_CORE")
    assert tuple(pairs[key] for key in layout) == ("2", "64", "1")
    assert (pairs["GB300_SLURM_REAL_MEMORY_MIB"], pairs["GB300_SLURM_GPUS"]) == ("840499", "4")
    assert "GB300_SLURM_POOL" not in env_pairs(render_slurm_env(INPUTS))  # the head registers no node


def test_gpu_files_need_the_socket_layout() -> None:
    """A GPU node's inputs without the size's socket layout are refused: slurmd would register one-core sockets."""
    plain = SlurmPool("train", "ref-train-r0001-", 36, "Standard_ND128isr_GB300_v6", 4, 128, 840499)
    with pytest.raises(ValueError, match=re.escape("'sockets' must be set for a pool node (got None)")):
        gpu_files(INPUTS.for_pool(plain), HEALTH)


def test_gpu_files_need_the_node_shape() -> None:
    """GPU files without the node's pool are refused, naming the field and how to set it."""
    with pytest.raises(
        ValueError, match=re.escape("'pool' must be set for a pool node (got None). Pass inputs.for_pool(")
    ):
        gpu_files(INPUTS, HEALTH)


DBD_CLUSTER = SlurmCluster("ref", "head", (TRAIN,), accounting_host="head")
DBD_INPUTS = SlurmBootInputs(head_hostname="head", keyvault_name="kv-gb300-ref", slurmdbd=True)


def test_accounting_files_are_placed_only_with_slurmdbd() -> None:
    """With slurmdbd on the head gets slurmdbd.conf (0600), the MariaDB drop-in and GB300_SLURMDBD=1; off, none."""
    on = {f.path: f for f in head_files(DBD_CLUSTER, DBD_INPUTS)}
    off = {f.path: f for f in head_files(CLUSTER, INPUTS)}
    assert on["/etc/slurm/slurmdbd.conf"].permissions == "0600"
    assert "/etc/mysql/mariadb.conf.d/60-gb300-slurmdbd.cnf" in on
    assert env_pairs(on["/etc/gb300/slurm.env"].content)["GB300_SLURMDBD"] == "1"
    assert not [path for path in off if "slurmdbd.conf" in path or "mariadb" in path]
    assert "GB300_SLURMDBD" not in env_pairs(off["/etc/gb300/slurm.env"].content)


@pytest.mark.parametrize(("cluster", "inputs"), [(DBD_CLUSTER, INPUTS), (CLUSTER, DBD_INPUTS)], ids=["env", "conf"])
def test_slurmdbd_flag_and_accounting_host_must_agree(cluster: SlurmCluster, inputs: SlurmBootInputs) -> None:
    """A head whose slurm.conf and slurm.env disagree about slurmdbd is refused, naming the field."""
    with pytest.raises(ValueError, match=re.escape("'slurmdbd' must be")):
        head_files(cluster, inputs)


def test_slurmdbd_starts_before_slurmctld() -> None:
    """The head sets up slurmdbd after the munge key and before slurmctld, which registers with it."""
    names = [s.name for s in STEPS]
    assert names.index("gb300-munge-key") < names.index("gb300-slurmdbd-setup") < names.index("gb300-slurmctld-setup")
