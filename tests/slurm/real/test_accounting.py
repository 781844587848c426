"""Job accounting (``gb300:head.slurmdbd``) on real slurmdbd and MariaDB, set up by the head's own
gb300-slurmdbd-setup step: a finished job is in ``sacct --json``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.real_slurm.cluster import Cluster
from tests.support.real_slurm.fixtures import cluster_fixture
from tests.support.real_slurm.root import SUITES


@pytest.fixture(scope="module", params=list(SUITES), ids=[f"{s}-{v}" for s, v in SUITES.items()])
def accounting_cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """The dev stack with accounting on: MariaDB and slurmdbd on the head, two GPU nodes."""
    yield from cluster_fixture(request, accounting=True)


def test_slurm_conf_sends_accounting_to_the_head(accounting_cluster: Cluster) -> None:
    """With gb300:head.slurmdbd the rendered slurm.conf stores accounting in slurmdbd on the head, and the running
    controller uses it."""
    config = accounting_cluster.scontrol("show", "config")
    assert "accounting_storage/slurmdbd" in config
    assert f"AccountingStorageHost   = {accounting_cluster.head.name}" in config


def test_sacct_reports_a_finished_two_node_job(accounting_cluster: Cluster) -> None:
    """A two-node job that ran is in ``sacct --json`` from slurmdbd: completed, on both nodes, in our cluster."""
    head = accounting_cluster.head
    pool = accounting_cluster.files.pool
    job = head.run(["sbatch", "--parsable", "-N2", f"--partition={pool}", "--wrap=srun hostname"]).stdout.strip()

    def recorded() -> dict[str, object] | None:
        done = head.run(["sacct", "--json", f"--jobs={job}"], check=False)
        jobs = json.loads(done.stdout or "{}").get("jobs") or [] if done.returncode == 0 else []
        finished = [j for j in jobs if "COMPLETED" in j["state"]["current"]]
        return finished[0] if finished else None

    accounting_cluster.wait("sacct shows the job completed", lambda: recorded() is not None, 60)
    record = recorded()
    assert record is not None
    assert record["cluster"] == accounting_cluster.files.cluster
    assert record["partition"] == pool
    hosts = head.run(["scontrol", "show", "hostnames", str(record["nodes"])]).stdout.split()
    assert sorted(hosts) == sorted(h.name for h in accounting_cluster.nodes)
    assert not [line for line in accounting_cluster.errors(head, "slurmctld") if "accounting" in line.lower()]
