"""Real Slurm (24.11 and 26.05): a GPU node that fails its boot health check stays out of service, whether it
registers for the first time (no record yet: slurmd runs HealthCheckProgram before the record exists, so the gate's
own drain is refused) or comes back to a record it already has (the gate drains the record).

slurmd is started here as systemd would start it from gb300's drop-in: ``SLURMD_OPTIONS`` from its
``Environment=``, replaced by the boot gate's ``/run/gb300/slurmd-gate.env`` (``EnvironmentFile=``) when the gate
wrote one (read with tests/support/systemd_env.py, which says what it cannot show).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.support.real_slurm import layout
from tests.support.real_slurm.cluster import Cluster
from tests.support.real_slurm.fixtures import cluster_fixture
from tests.support.real_slurm.host import Host
from tests.support.real_slurm.root import SUITES
from tests.support.systemd_env import environment_file, exec_words

GATE = "/usr/local/sbin/gb300-health-check"


@pytest.fixture(scope="module", params=list(SUITES), ids=[f"{s}-{v}" for s, v in SUITES.items()])
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Its own cluster: these tests delete and re-register a node."""
    yield from cluster_fixture(request)


def _skips(node: Host) -> list[str]:
    return node.run(["bash", "-c", ". /etc/gb300/health.env; echo $GB300_SKIP_BOOT"]).stdout.split()


def _gate_checks_gpus(node: Host, on: bool, skips: list[str]) -> None:
    """Let the gate's GPU check run (it fails: there is no nvidia-smi here) or skip it again, boot and periodic."""
    words = " ".join(w for w in skips if w != "gpus" or not on)
    line = f"GB300_SKIP_BOOT='{words}'\nGB300_SKIP_PERIODIC='{words}'\n"
    node.run(["bash", "-c", f"printf '%s' \"{line}\" >>/etc/gb300/health.env"])


def _slurmd_options(node: Host) -> list[str]:
    """The slurmd options systemd would start with: the drop-in's, or the boot gate's environment file's."""
    dropin = node.upper / layout.DROPIN
    options = layout.dropin_options(dropin, "SLURMD_OPTIONS")
    for line in dropin.read_text().splitlines():
        if line.startswith("EnvironmentFile="):
            path = line.removeprefix("EnvironmentFile=").lstrip("-")
            found = node.run(["cat", path], check=False)
            if found.returncode == 0:
                options = exec_words(environment_file(found.stdout)["SLURMD_OPTIONS"])
    return options


def _boot(cluster: Cluster, node: Host) -> None:
    """The node's boot: the gate's boot unit (--boot), then slurmd as systemd starts it."""
    node.run([GATE, "--boot"], check=False, timeout=120)
    unit = cluster.root / "usr/lib/systemd/system/slurmd.service"
    node.start("slurmd", layout.unit_command(unit, {"SLURMD_OPTIONS": _slurmd_options(node)}))


def _record(cluster: Cluster, name: str) -> tuple[frozenset[str], str] | None:
    found = cluster.slurm().nodes([name]).get(name)
    return (found.states, found.reason) if found else None


def _pending_job(cluster: Cluster, keep_off: Host) -> str:
    """A one-node job that can only start on a node other than ``keep_off`` (drained for the test)."""
    cluster.scontrol("update", f"nodename={keep_off.name}", "state=drain", "reason=test: elsewhere")
    out = cluster.head.run(["sbatch", "--parsable", f"--partition={cluster.files.pool}", "-N1", "--wrap", "hostname"])
    return out.stdout.strip().split(";")[0]


def _job_state(cluster: Cluster, job: str) -> str:
    return cluster.head.run(["squeue", "-h", "-j", job, "-o", "%T %N"], check=False).stdout.strip()


def _restore(cluster: Cluster, node: Host, other: Host, job: str, skips: list[str]) -> None:
    cluster.head.run(["scancel", job], check=False)
    cluster.scontrol("update", f"nodename={other.name}", "state=resume", check=False)
    _gate_checks_gpus(node, on=False, skips=skips)
    node.stop("slurmd")
    _boot(cluster, node)  # the gate passes: slurmd's own check resumes the gate's drain
    cluster.wait(f"{node.name} back in service", lambda: "DRAIN" not in ((_record(cluster, node.name) or ({""},))[0]))


def test_a_node_failing_its_first_boot_gate_registers_drained_and_takes_no_job(cluster: Cluster) -> None:
    """A node with no record that fails its boot gate is created drained with the gate's reason, and a job waiting
    for a node does not start on it; the gate's own drain at slurmd start is not even tried."""
    node, other = cluster.nodes[1], cluster.nodes[0]
    skips = _skips(node)
    node.stop("slurmd")
    cluster.scontrol("delete", f"nodename={node.name}")
    job = _pending_job(cluster, other)
    try:
        _gate_checks_gpus(node, on=True, skips=skips)
        _boot(cluster, node)
        cluster.wait(f"{node.name} registered", lambda: _record(cluster, node.name) is not None)
        states, reason = _record(cluster, node.name) or (frozenset(), "")
        assert "DRAIN" in states
        assert reason.startswith("gb300: boot check: gpus: ")
        time.sleep(5)  # the scheduler runs on a registration; give it the time to place the job, if it would
        assert _job_state(cluster, job).split()[0] == "PENDING"
        assert "DRAIN" in (_record(cluster, node.name) or (frozenset(),))[0]
        assert not [e for e in cluster.errors(cluster.head, "slurmctld") if f'node "{node.name}"' in e]
    finally:
        _restore(cluster, node, other, job, skips)


def test_a_node_failing_its_gate_on_a_known_record_is_drained_before_it_registers(cluster: Cluster) -> None:
    """A node slurmctld knows (down while it reboots) that fails its boot gate is drained by the gate's check at
    slurmd start, before it registers, and a waiting job does not start on it."""
    node, other = cluster.nodes[1], cluster.nodes[0]
    skips = _skips(node)
    node.stop("slurmd")
    cluster.scontrol("update", f"nodename={node.name}", "state=down", "reason=test: rebooting")
    job = _pending_job(cluster, other)
    try:
        _gate_checks_gpus(node, on=True, skips=skips)
        _boot(cluster, node)
        cluster.wait(f"{node.name} drained", lambda: "DRAIN" in (_record(cluster, node.name) or (frozenset(),))[0])
        reason = (_record(cluster, node.name) or ((), ""))[1]
        assert reason.startswith("gb300: ")
        assert "gpus: nvidia-smi -q failed" in reason
        time.sleep(5)
        assert _job_state(cluster, job).split()[0] == "PENDING"
    finally:
        _restore(cluster, node, other, job, skips)
