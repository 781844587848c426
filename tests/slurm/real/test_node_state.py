"""gb300's Slurm client (gb300.slurm.client, used by rollout and the heal loop) against real slurmctld: drain, resume,
the jobs on a node, and a node's reboot as the controller records it."""

from __future__ import annotations

from gb300.slurm.client import DOWN_STATES, DRAIN_PREFIX
from tests.support.real_slurm.cluster import Cluster


def _runs_on(cluster: Cluster, host: str) -> bool:
    """Whether a one-task job placed on ``host`` starts at once (``--immediate``) and runs there."""
    done = cluster.head.run(
        ["srun", "--immediate=10", f"--partition={cluster.files.pool}", f"--nodelist={host}", "hostname"],
        check=False,
        timeout=60,
    )
    return done.returncode == 0 and done.stdout.strip() == host


def test_drain_keeps_jobs_off_a_node_until_resume(real_cluster: Cluster) -> None:
    """A drain through the client shows as DRAIN with its reason and keeps jobs off the node; resume returns it
    to service and a job runs there again."""
    slurm = real_cluster.slurm()
    host = real_cluster.nodes[0].name
    reason = f"{DRAIN_PREFIX} real-Slurm drain test"
    slurm.drain([host], reason)
    node = slurm.nodes([host])[host]
    assert "DRAIN" in node.states
    assert node.reason == reason
    assert not _runs_on(real_cluster, host)
    slurm.resume([host])
    real_cluster.wait("resume", lambda: "DRAIN" not in slurm.nodes([host])[host].states, 30)
    real_cluster.wait_registered([host])
    assert _runs_on(real_cluster, host)


def test_drain_of_several_nodes_names_them_as_one_hostlist(real_cluster: Cluster) -> None:
    """The client's compressed host list (gb300.slurm.hostlist) drains and resumes exactly the nodes it names."""
    slurm = real_cluster.slurm()
    hosts = [h.name for h in real_cluster.nodes]
    slurm.drain(hosts, f"{DRAIN_PREFIX} both")
    assert all("DRAIN" in n.states for n in slurm.nodes(hosts).values())
    slurm.resume(hosts)
    real_cluster.wait("resume", lambda: all("DRAIN" not in n.states for n in slurm.nodes(hosts).values()), 30)
    assert sorted(slurm.nodes(hosts)) == sorted(hosts)


def test_jobs_names_the_job_running_on_a_node(real_cluster: Cluster) -> None:
    """``jobs`` lists the batch job that holds a node, and none once it is cancelled."""
    slurm = real_cluster.slurm()
    host = real_cluster.nodes[1].name
    other = real_cluster.nodes[0].name
    job = real_cluster.head.run(
        ["sbatch", "--parsable", f"--partition={real_cluster.files.pool}", f"--nodelist={host}", "--wrap=sleep 300"]
    ).stdout.strip()
    real_cluster.wait("the job starts", lambda: slurm.jobs([host]) == [job], 30)
    assert slurm.jobs([other]) == []
    real_cluster.head.run(["scancel", job])
    real_cluster.wait("the job ends", lambda: slurm.jobs([host]) == [], 60)


def test_a_rebooted_node_returns_with_a_new_boot_time(real_cluster: Cluster) -> None:
    """After its VM restarts, a node registers again by itself (ReturnToService=2) with a later boot time, not
    drained and answering, as the heal loop's reboot rung expects."""
    slurm = real_cluster.slurm()
    host = real_cluster.nodes[0]
    before = slurm.nodes([host.name])[host.name]
    real_cluster.reboot(host, down=2)
    real_cluster.wait_registered([host.name])
    after = slurm.nodes([host.name])[host.name]
    assert after.boot_time > before.boot_time
    assert not after.states & (DOWN_STATES | {"DRAIN"})
    assert _runs_on(real_cluster, host.name)
