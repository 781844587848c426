"""Real Slurm (24.11 and 26.05): gb300-topology-refresh on the head with NVLink identities the nodes published.
A topology the controller takes is confirmed before it counts as applied; one a new slurmctld dies on (24.11: a block
smaller than the first, data/slurm_releases.yaml blockSmallerThanFirstIsFatal) is taken back, the controller answers
again and the refresh exits 1. A node registering again under its name after its record was deleted is put back
in its block by the next refresh (issue 47 finding 6). The head has no systemd here: its ``systemctl restart
slurmctld`` is a stand-in that starts slurmctld (what systemd would do), written by this test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gb300.facts import slurm_releases
from gb300.slurm.hostlist import expand
from gb300.slurm.options import release_of
from tests.support.real_slurm.cluster import Cluster
from tests.support.real_slurm.fixtures import cluster_fixture
from tests.support.real_slurm.host import Host
from tests.support.real_slurm.root import SUITES

UUIDS = ("5e797fc6-0f46-421a-8724-0e102c0f723c", "5e797fc6-0f46-421a-8724-0e102c0f721e")
SYSTEMCTL = '#!/bin/bash\nif [ "$*" = "restart slurmctld" ]; then /usr/sbin/slurmctld; fi\n'


@pytest.fixture(params=list(SUITES), ids=[f"{s}-{v}" for s, v in SUITES.items()])
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A fresh cluster of three nodes per test: each test changes the controller's topology."""
    yield from cluster_fixture(request, nodes=3)


def _refresh(cluster: Cluster, racks: list[int]) -> tuple[int, str]:
    """Publish each node's NVLink identity (``racks``: its rack's index) and run the head's refresh once."""
    cluster.head.run(
        ["bash", "-c", f"printf '%s' '{SYSTEMCTL}' >/usr/local/sbin/systemctl; chmod 755 /usr/local/sbin/systemctl"]
    )
    for host, rack in zip(cluster.nodes, racks, strict=True):
        cluster.scontrol("update", f"nodename={host.name}", f"extra=gb300-nvlink:{UUIDS[rack]}:{32766 + rack}")
    done = cluster.head.run(
        ["env", "PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin", "GB300_RECONFIGURE_WAIT=30",
         "/usr/local/sbin/gb300-topology-refresh"],
        check=False, timeout=240,
    )  # fmt: skip
    return done.returncode, done.stderr


def test_a_topology_the_controller_takes_is_confirmed_and_applied(cluster: Cluster) -> None:
    """One rack of three nodes: the refresh switches topology/block on with a reconfigure, slurmctld answers and
    lists the block, and the file is recorded as applied. On 24.11 a block below BlockSizes (3 of 18) is refused by
    the same fatal, so there the refresh takes it back and the controller answers on the old files."""
    rc, err = _refresh(cluster, [0, 0, 0])
    if slurm_releases.shows("blockSmallerThanFirstIsFatal", release_of(cluster.version)):
        assert rc == 1
        assert cluster.controller_up()
        assert "children count lower than bblock_node_cnt" in cluster.log(cluster.head, "slurmctld")
        return
    assert rc == 0, err
    assert cluster.controller_up()
    assert "BlockName=block001 " in cluster.scontrol("show", "topology")
    applied = cluster.head.run(["cat", "/var/lib/gb300/topology/topology.conf.applied"]).stdout
    assert applied == cluster.head.run(["cat", "/etc/slurm/topology.conf"]).stdout


def test_a_topology_a_new_slurmctld_dies_on_is_taken_back(cluster: Cluster) -> None:
    """Two racks of two and one node: where the release refuses a block smaller than the first (24.11), the new
    slurmctld dies, the refresh restores the previous files, the controller answers again, and it exits 1 without
    recording the file as applied; where the release accepts it (26.05), it is applied."""
    refused = slurm_releases.shows("blockSmallerThanFirstIsFatal", release_of(cluster.version))
    rc, err = _refresh(cluster, [0, 0, 1])
    assert cluster.controller_up()
    if not refused:
        assert rc == 0, err
        assert "BlockName=block002 " in cluster.scontrol("show", "topology")
        return
    assert rc == 1
    assert "slurmctld runs on the previous topology.conf again" in err
    assert cluster.head.run(["test", "-e", "/etc/slurm/topology.conf"], check=False).returncode != 0
    assert "#TopologyPlugin=topology/block" in cluster.head.run(["cat", "/etc/slurm/slurm.conf"]).stdout
    assert cluster.head.run(["test", "-e", "/var/lib/gb300/topology/topology.conf.applied"], check=False).returncode
    assert "children count lower than bblock_node_cnt" in cluster.log(cluster.head, "slurmctld")


def _blocks(cluster: Cluster) -> dict[str, set[str]]:
    """The blocks slurmctld has loaded (``scontrol show topology``) and the nodes in each."""
    out: dict[str, set[str]] = {}
    for line in cluster.scontrol("show", "topology", check=False).splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "BlockName" in fields:
            out[fields["BlockName"]] = set(expand(fields["Nodes"])) if fields.get("Nodes") else set()
    return out


def _register_again(cluster: Cluster, host: Host) -> None:
    """What replacing a node's Slurm record under the same name does: slurmd stops, the record is deleted
    (``scontrol delete nodename=``), slurmd registers afresh (slurmd -Z) and the node publishes its identity again
    (gb300-fabric-publish), all between two runs of the refresh."""
    extra = cluster.scontrol("show", "node", host.name, "-o").split(" Extra=", 1)[1].split()[0]
    host.stop("slurmd")
    cluster.scontrol("delete", f"nodename={host.name}")
    cluster.start_node(host)
    cluster.wait_registered([host.name])
    cluster.scontrol("update", f"nodename={host.name}", f"extra={extra}")


def test_a_node_registered_again_under_its_name_is_back_in_its_block(cluster: Cluster) -> None:
    """A node whose record was deleted and created again by its next registration (same name, same NVLink
    identity, so topology.conf is unchanged) is back in its block after the next refresh, as slurmctld lists it.
    The rack is a full block here (BlockSizes=3). On 24.11 a configless slurmd dies on topology/block (its own node
    alone is a block smaller than the base size: data/slurm_releases.yaml blockSmallerThanFirstIsFatal), so there
    the node registering again cannot start slurmd at all."""
    cluster.head.run(["sed", "-i", "s/^GB300_BLOCK_SIZE=.*/GB300_BLOCK_SIZE=3/", "/etc/gb300/slurm.env"])
    rc, err = _refresh(cluster, [0, 0, 0])
    assert rc == 0, err
    names = {h.name for h in cluster.nodes}
    assert _blocks(cluster) == {"block001": names}
    host, release = cluster.nodes[2], release_of(cluster.version)
    if slurm_releases.shows("blockSmallerThanFirstIsFatal", release):
        host.stop("slurmd")
        cluster.scontrol("delete", f"nodename={host.name}")
        before = len(cluster.log(host, "slurmd"))
        cluster.start_node(host)
        fatal = "children count lower than bblock_node_cnt"
        cluster.wait(f"{host.name}'s slurmd dies", lambda: fatal in cluster.log(host, "slurmd")[before:], 60)
        assert host.name not in cluster.scontrol("show", "node", "-o")
        return
    _register_again(cluster, host)
    outside = host.name not in _blocks(cluster)["block001"]  # Slurm's part: the new record is in no block
    assert outside == slurm_releases.shows("recreatedNodeOutsideItsBlock", release)
    rc, err = _refresh(cluster, [0, 0, 0])
    assert rc == 0, err
    assert cluster.controller_up()
    assert _blocks(cluster) == {"block001": names}
