"""Real Slurm (Debian's 24.11 and 26.05) on gb300's rendered configuration: the controller starts, the dynamic GPU
nodes register as their pool's SKU, and a two-node job runs through gb300's prolog and epilog."""

from __future__ import annotations

import json
import re

from tests.support.real_slurm.adapt import SLURM_CONF_ADAPTATIONS, without_newer_keys
from tests.support.real_slurm.cluster import Cluster


def _node_env(cluster: Cluster) -> dict[str, str]:
    return cluster.files.env(cluster.files.node, "/etc/gb300/slurm.env")


def test_controller_runs_on_the_rendered_configuration(real_cluster: Cluster) -> None:
    """slurmctld answers on the head and runs the cluster, partition and plugins of the head's rendered slurm.conf."""
    rendered = real_cluster.files.head["/etc/slurm/slurm.conf"].content
    on_head = (real_cluster.head.upper / "etc/slurm/slurm.conf").read_text()
    assert on_head == without_newer_keys(rendered, real_cluster.version) + SLURM_CONF_ADAPTATIONS
    config = real_cluster.scontrol("show", "config")
    wanted = dict(line.split("=", 1) for line in rendered.splitlines() if "=" in line and not line.startswith("#"))
    assert f"ClusterName             = {wanted['ClusterName']}" in config
    assert f"SlurmctldHost[0]        = {wanted['SlurmctldHost']}" in config
    assert real_cluster.controller_up()
    partitions = real_cluster.scontrol("show", "partition", "-o")
    assert f"PartitionName={real_cluster.files.pool} " in partitions


def test_nodes_register_as_their_pool_with_its_gpus(real_cluster: Cluster) -> None:
    """Each configless node registers dynamically with its pool as feature and partition, its GPUs as GRES and
    the pool's memory, having fetched the configuration from the head (it has no /etc/slurm of its own)."""
    env = _node_env(real_cluster)
    data = json.loads(real_cluster.scontrol("--json", "show", "node"))
    nodes = {n["name"]: n for n in data["nodes"]}
    assert sorted(nodes) == sorted(h.name for h in real_cluster.nodes)
    for host in real_cluster.nodes:
        node = nodes[host.name]
        assert node["features"] == [env["GB300_SLURM_POOL"]]
        assert node["partitions"] == [real_cluster.files.pool]
        assert node["gres"] == f"gpu:{env['GB300_SLURM_GPUS']}"
        assert node["real_memory"] == int(env["GB300_SLURM_REAL_MEMORY_MIB"])
        assert node["address"] == host.address
        assert "IDLE" in node["state"]
        assert not (host.upper / "etc/slurm").exists()
        assert host.run(["test", "-s", "/run/slurm/conf/slurm.conf"], check=False).returncode == 0


def test_two_node_job_runs_through_the_imex_prolog_and_epilog(real_cluster: Cluster) -> None:
    """A two-node job runs on both nodes; gb300's prolog lists both nodes' addresses for IMEX and starts it
    (READY from the command service), the epilog stops it again."""
    hosts = real_cluster.nodes[:2]
    done = real_cluster.head.run(
        ["srun", "-N2", f"--partition={real_cluster.files.pool}", "--nodelist=" + ",".join(h.name for h in hosts),
         "hostname"], timeout=120,
    )  # fmt: skip
    assert sorted(done.stdout.split()) == sorted(h.name for h in hosts)
    real_cluster.wait("the job's epilog", lambda: not real_cluster.slurm().jobs([h.name for h in hosts]), 60)
    for host in hosts:
        listed = host.run(["cat", "/etc/nvidia-imex/nodes_config.cfg"]).stdout.split()
        assert sorted(listed) == sorted(h.address for h in hosts)
        calls = host.run(["cat", "/var/log/gb300-standin/systemctl.log"]).stdout.splitlines()
        assert calls.index("restart nvidia-imex") < calls.index("stop nvidia-imex")
        assert host.run(["cat", "/var/log/gb300-standin/nvidia-imex-ctl.log"]).stdout.splitlines()[0] == "-q"
        assert host.run(["test", "-e", "/var/lib/gb300/imex/job"], check=False).returncode != 0


def _gpu_indices(cluster: Cluster, job: str) -> list[str]:
    """The GPU indices slurmctld gave ``job`` (``scontrol show job -d``: ``GRES=gpu:2(IDX:0-1)``)."""
    detail = cluster.scontrol("show", "job", "-d", job)
    match = re.search(r"GRES=gpu[^(\s]*\(IDX:([0-9,-]+)\)", detail)
    assert match, detail
    indices: list[str] = []
    for part in match.group(1).split(","):
        low, _, high = part.partition("-")
        indices += [str(i) for i in range(int(low), int(high or low) + 1)]
    return indices


def test_the_prolog_maps_the_jobs_gpus_for_the_dcgm_exporter(real_cluster: Cluster) -> None:
    """gb300's prolog writes one file per GPU Slurm gave the job, named by its index and holding the job id, into
    the DCGM exporter's --hpc-job-mapping-dir; the epilog empties the directory again."""
    host = real_cluster.nodes[0]
    where = "/run/gb300/dcgm-job-map"
    job = real_cluster.head.run(
        ["sbatch", "--parsable", f"--partition={real_cluster.files.pool}", f"--nodelist={host.name}",
         "--gres=gpu:2", "-o", "/dev/null", "--wrap", "sleep 120"],
    ).stdout.strip()  # fmt: skip

    def mapped() -> dict[str, str]:
        listing = host.run(["sh", "-c", f"cd {where} 2>/dev/null && grep -H . [0-9]* || true"]).stdout
        return dict(line.split(":", 1) for line in listing.splitlines())

    real_cluster.wait("the job's GPU mapping", lambda: bool(mapped()), 60)
    indices = _gpu_indices(real_cluster, job)  # the whole node's (partitions are exclusive), not just the two asked
    assert len(indices) >= 2
    assert mapped() == dict.fromkeys(indices, job)
    real_cluster.head.run(["scancel", job])
    real_cluster.wait("the job's epilog", lambda: not real_cluster.slurm().jobs([host.name]), 60)
    real_cluster.wait("the mapping emptied", lambda: not mapped(), 30)
