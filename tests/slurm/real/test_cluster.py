"""Real Slurm (Debian's 24.11 and 26.05) on gb300's rendered configuration: the controller starts, the dynamic GPU
nodes register as their pool's SKU, a two-node job runs through gb300's prolog and epilog, and the job examples
shipped to users (examples/*.sbatch) run (the last test turns the block topology on where the release allows)."""

from __future__ import annotations

import json
import re

from gb300.facts import slurm_releases
from gb300.paths import REPO_ROOT
from gb300.slurm.options import release_of
from tests.support.real_slurm.adapt import SLURM_CONF_ADAPTATIONS, without_newer_keys
from tests.support.real_slurm.cluster import Cluster
from tests.support.real_slurm.host import Host


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
    # The prolog writes one file at a time: the first may be there before the last.
    real_cluster.wait("every GPU of the job mapped", lambda: mapped() == dict.fromkeys(indices, job), 30)
    real_cluster.head.run(["scancel", job])
    real_cluster.wait("the job's epilog", lambda: not real_cluster.slurm().jobs([host.name]), 60)
    real_cluster.wait("the mapping emptied", lambda: not mapped(), 30)


# --- The job examples shipped to users (examples/*.sbatch), submitted with real sbatch ---

JOBS = "/root/jobs"
"""Where the examples are submitted from: on the head (sbatch reads the script there) and on every node (the job's
working directory, where `--output=%x-%j.out` lands), as a user's home would be on shared storage."""
STANDINS = "/opt/gpu-standins/bin"
TORCHRUN = """#!/bin/bash
# Stand-in for PyTorch's torchrun (no GPU here): says where it runs, with what, and exits 0.
echo "torchrun on $SLURMD_NODENAME task $SLURM_PROCID MASTER_ADDR=$MASTER_ADDR NCCL_MNNVL_ENABLE=$NCCL_MNNVL_ENABLE $*"
"""
ALL_REDUCE = """#!/bin/bash
# Stand-in for nccl-tests' all_reduce_perf (no GPU here): rank 0 prints a recorded healthy rack's result, as the MPI
# build prints from rank 0 only.
[ "${SLURM_PROCID:-0}" != 0 ] || cat /opt/gpu-standins/all_reduce_perf.txt
"""


def _put(host: Host, path: str, text: str, mode: str = "0644") -> None:
    """Write ``text`` to ``path`` on ``host`` (a running machine of the cluster)."""
    host.run(["bash", "-c", 'mkdir -p "$(dirname "$1")" && printf "%s" "$2" >"$1" && chmod "$3" "$1"', "put", path,
              text, mode])  # fmt: skip


def _shipped(cluster: Cluster) -> None:
    """The examples on the head, the job directory on every node, and on the nodes the GPU programs' stand-ins
    (torchrun, all_reduce_perf) on a PATH of their own, plus nccl-eval.py where the rack check looks for it."""
    for name in ("train-segment.sbatch", "nccl-rack-check.sbatch", "nccl-eval.py"):
        _put(cluster.head, f"{JOBS}/examples/{name}", (REPO_ROOT / "examples" / name).read_text())
    recorded = (REPO_ROOT / "tests/fixtures/slurm/all_reduce_perf.rack-ok.txt").read_text()
    for node in cluster.nodes:
        _put(node, f"{JOBS}/examples/nccl-eval.py", (REPO_ROOT / "examples" / "nccl-eval.py").read_text())
        _put(node, f"{STANDINS}/torchrun", TORCHRUN, "0755")
        _put(node, f"{STANDINS}/all_reduce_perf", ALL_REDUCE, "0755")
        _put(node, "/opt/gpu-standins/all_reduce_perf.txt", recorded)


def _submit(cluster: Cluster, script: str, *args: str, env: tuple[str, ...] = ()) -> str:
    """``sbatch`` the shipped ``script`` from the job directory on the head, the cluster's two nodes in place of the
    racks the script asks for; returns the job id once the job has ended."""
    nodes = len(cluster.nodes)
    done = cluster.head.run(
        ["env", f"PATH={STANDINS}:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", *env,
         "bash", "-c", 'cd "$1" && shift && sbatch "$@"', "submit", JOBS, "--parsable",
         f"--partition={cluster.files.pool}", f"--nodes={nodes}", f"--segment={nodes}", f"examples/{script}", *args],
    )  # fmt: skip
    job = done.stdout.strip().split(";")[0]
    cluster.wait(f"job {job} ({script}) ends", lambda: _job(cluster, job)["JobState"] not in {"PENDING", "RUNNING",
                 "CONFIGURING", "COMPLETING"}, 180)  # fmt: skip
    return job


def _job(cluster: Cluster, job: str) -> dict[str, str]:
    """``scontrol show job``'s ``Key=Value`` words (the record stays MinJobAge after the job ends)."""
    text = cluster.scontrol("show", "job", "-o", job)
    return dict(word.split("=", 1) for word in text.split() if "=" in word)


def test_the_shipped_training_job_runs(real_cluster: Cluster) -> None:
    """examples/train-segment.sbatch, submitted with real sbatch (CONTAINER_IMAGE="" for the host's Python, as its
    header says; pyxis is absent here), is accepted with its #SBATCH options, launches torchrun once per node with the
    job's first node as MASTER_ADDR and gb300's NCCL settings, ends COMPLETED and writes train-<job>.out in the
    directory it was submitted from. torchrun is a stand-in on PATH: no GPU here."""
    _shipped(real_cluster)
    job = _submit(real_cluster, "train-segment.sbatch", "train.py", "--config", "my.yaml", env=("CONTAINER_IMAGE=",))
    record = _job(real_cluster, job)
    assert (record["JobState"], record["ExitCode"]) == ("COMPLETED", "0:0"), record
    assert record["JobName"] == "train"
    assert record["StdOut"] == f"{JOBS}/train-{job}.out"
    assert record["NumNodes"] == str(len(real_cluster.nodes))
    assert int(record["NumCPUs"]) >= 96 * len(real_cluster.nodes)  # --cpus-per-task=96, one task per node
    first = real_cluster.nodes[0]
    out = first.run(["cat", record["StdOut"]]).stdout
    launched = sorted(line for line in out.splitlines() if line.startswith("torchrun on "))
    nodes = sorted(h.name for h in real_cluster.nodes)
    assert [line.split()[2] for line in launched] == nodes, out
    for line in launched:
        assert f" MASTER_ADDR={first.name} NCCL_MNNVL_ENABLE=1 --nnodes={len(nodes)} --nproc-per-node=4 " in line
        assert line.endswith(f"--rdzv-id={job} train.py --config my.yaml"), line


def test_the_shipped_rack_nccl_check_runs(real_cluster: Cluster) -> None:
    """examples/nccl-rack-check.sbatch, submitted with real sbatch (BLOCK_SIZE= the cluster's two nodes), is accepted
    with its #SBATCH options, records every node's physical host and looks for whole racks in Slurm's topology. Where
    the release takes a two-node block (26.05; 24.11 refuses a block smaller than BlockSizes,
    data/slurm_releases.yaml), the head's topology refresh makes the two nodes one rack and the check runs
    all_reduce_perf there with `srun --mpi=pmix`: with Slurm's PMIx plugin it judges the result against the node's
    health.env, writes the rack's report and ends COMPLETED; Debian sid's 26.05 packages have no PMIx plugin, so
    there srun refuses the step and the check exits 2 finding no result. On 24.11's flat topology it exits 2 with its
    own message naming --segment. all_reduce_perf is a stand-in on PATH printing a recorded healthy rack's result."""
    _shipped(real_cluster)
    blocks = not slurm_releases.shows("blockSmallerThanFirstIsFatal", release_of(real_cluster.version))
    if blocks:
        _one_rack(real_cluster)
    nodes, first = len(real_cluster.nodes), real_cluster.nodes[0]
    listed = first.run(["srun", "--mpi=list"], check=False)  # the MPI plugins this release's Slurm has
    pmix = "pmix" in listed.stdout + listed.stderr
    job = _submit(real_cluster, "nccl-rack-check.sbatch", env=(f"BLOCK_SIZE={nodes}", f"NCCL_TESTS={STANDINS}"))
    record = _job(real_cluster, job)
    assert record["StdOut"] == f"{JOBS}/nccl-rack-check-{job}.out"
    out = first.run(["cat", record["StdOut"]]).stdout
    hosts = first.run(["cat", f"{JOBS}/nccl-report-{job}/physical-hosts.txt"]).stdout
    assert sorted(line.split()[0] for line in hosts.splitlines()) == sorted(h.name for h in real_cluster.nodes)
    if not blocks:
        assert (record["JobState"], record["ExitCode"]) == ("FAILED", "2:0"), out
        assert f"no whole block (rack of {nodes}) in this allocation: run with --segment={nodes}" in out
        return
    assert f"rack block001: {nodes} nodes" in out
    rack = first.run(["cat", f"{JOBS}/nccl-report-{job}/block001.rack.txt"]).stdout
    if not pmix:
        assert (record["JobState"], record["ExitCode"]) == ("FAILED", "2:0"), out
        assert "Invalid MPI type 'pmix'" in rack
        assert "block001.rack.txt: no all_reduce_perf result" in out
        return
    assert (record["JobState"], record["ExitCode"]) == ("COMPLETED", "0:0"), out + rack
    report = json.loads(first.run(["cat", f"{JOBS}/nccl-report-{job}/block001.rack.json"]).stdout)
    assert report["level"] == "OK"
    assert report["hosts"] == sorted(h.name for h in real_cluster.nodes)


UUID = "5e797fc6-0f46-421a-8724-0e102c0f723c"
RESTART = '#!/bin/bash\nif [ "$*" = "restart slurmctld" ]; then /usr/sbin/slurmctld; fi\n'


def _one_rack(cluster: Cluster) -> None:
    """The nodes publish one NVLink identity and the head's gb300-topology-refresh turns topology/block on with their
    block (its ``systemctl restart slurmctld`` is a stand-in that starts slurmctld: no systemd on the head here)."""
    _put(cluster.head, "/usr/local/sbin/systemctl", RESTART, "0755")
    for host in cluster.nodes:
        cluster.scontrol("update", f"nodename={host.name}", f"extra=gb300-nvlink:{UUID}:32766")
    cluster.head.run(
        ["env", "PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin", "GB300_RECONFIGURE_WAIT=30",
         "/usr/local/sbin/gb300-topology-refresh"], timeout=240,
    )  # fmt: skip
    cluster.wait("the rack's block", lambda: "BlockName=block001 " in cluster.scontrol("show", "topology"), 60)
