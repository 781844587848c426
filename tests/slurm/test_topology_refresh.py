"""The controller's topology refresh and the nodes' fabric publishing (cloud-init/slurm)."""

from __future__ import annotations

import json

import pytest

from gb300.slurm.config import SlurmCluster, SlurmPool, render
from gb300.slurm.hostlist import expand

from .conftest import REPO, Sandbox

pytestmark = pytest.mark.slow  # every test runs a node script in a sandbox (subprocesses)

PLUGIN = "TopologyPlugin=topology/block"
UUIDS = ["5e797fc6-0f46-421a-8724-0e102c0f723c", "5e797fc6-0f46-421a-8724-0e102c0f721e"]
ENV = {"GB300_LIB": str(REPO / "infra")}


def controller(sandbox: Sandbox, nodes: int = 36) -> None:
    """A head node with gb300's rendered slurm.conf (topology off, no GPU node listed) and slurmctld having
    registered the dynamic nodes gpu-001 .. gpu-<nodes>."""
    pool = SlurmPool("gpu", "gpu-", 36, "Standard_ND128isr_GB300_v6", 4, 128, 840000)
    conf = render(SlurmCluster("ref", "head", (pool,)))["slurm.conf"]
    assert "\nNodeName=" not in conf
    sandbox.write("etc/slurm/slurm.conf", conf)
    sandbox.answer("sinfo", "".join(f"gpu-{i:03d}\n" for i in range(1, nodes + 1)))


def publish(sandbox: Sandbox, first: int, last: int, rack: int) -> None:
    for i in range(first, last + 1):
        identity = {"ClusterUUID": UUIDS[rack], "CliqueId": 32766 + rack}
        sandbox.write(f"shared/gb300/fabric/gpu-{i:03d}.json", json.dumps(identity))


def slurm_conf(sandbox: Sandbox) -> str:
    return (sandbox.root / "etc/slurm/slurm.conf").read_text()


def test_first_complete_rack_switches_block_plugin_on(sandbox: Sandbox) -> None:
    """The first full rack writes its block, enables topology/block, restarts slurmctld and reconfigures."""
    controller(sandbox)
    publish(sandbox, 1, 18, rack=0)
    result = sandbox.run("gb300-topology-refresh", env=ENV)
    assert result.returncode == 0, result.stderr
    topology = (sandbox.root / "etc/slurm/topology.conf").read_text()
    assert "BlockName=block001 Nodes=gpu-[001-018]\n" in topology
    assert "BlockSizes=18\n" in topology
    assert f"\n{PLUGIN}\n" in slurm_conf(sandbox)
    assert sandbox.calls("systemctl") == ["restart slurmctld"]
    assert sandbox.calls("scontrol") == ["reconfigure"]


def test_partial_rack_keeps_plugin_off(sandbox: Sandbox) -> None:
    """With only 12 of 18 nodes reported the block plugin stays commented and slurmctld is left alone."""
    controller(sandbox)
    publish(sandbox, 1, 12, rack=0)
    result = sandbox.run("gb300-topology-refresh", env=ENV)
    assert result.returncode == 0, result.stderr
    assert f"\n#{PLUGIN}\n" in slurm_conf(sandbox)
    assert sandbox.calls("systemctl") == []
    report = (sandbox.root / "var/lib/gb300/topology/report.txt").read_text()
    assert "partial NVLink domain, 12 of 18 nodes" in report


def test_unchanged_fabric_changes_nothing(sandbox: Sandbox) -> None:
    """A second run over the same fabric files restarts and reconfigures nothing."""
    controller(sandbox)
    publish(sandbox, 1, 18, rack=0)
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    (sandbox.path / "calls.log").unlink()
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    assert sandbox.calls("systemctl") == []
    assert sandbox.calls("scontrol") == []


def test_new_rack_reconfigures_without_restart(sandbox: Sandbox) -> None:
    """A rack joining later adds a block and only needs scontrol reconfigure."""
    controller(sandbox)
    publish(sandbox, 1, 18, rack=0)
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    (sandbox.path / "calls.log").unlink()
    publish(sandbox, 19, 36, rack=1)
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    assert "BlockName=block002 Nodes=gpu-[019-036]" in (sandbox.root / "etc/slurm/topology.conf").read_text()
    assert sandbox.calls("systemctl") == []
    assert sandbox.calls("scontrol") == ["reconfigure"]


def test_a_failed_reconfigure_is_retried_on_the_next_run(sandbox: Sandbox) -> None:
    """topology.conf already replaced but scontrol reconfigure failed: the next run reconfigures again, then stops."""
    controller(sandbox)
    publish(sandbox, 1, 18, rack=0)
    (sandbox.path / "rc" / "scontrol").write_text("1")
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 1
    (sandbox.path / "rc" / "scontrol").unlink()
    (sandbox.path / "calls.log").unlink()
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    assert sandbox.calls("scontrol") == ["reconfigure"]
    (sandbox.path / "calls.log").unlink()
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    assert sandbox.calls("scontrol") == []


def test_unregistered_nodes_are_left_out(sandbox: Sandbox) -> None:
    """Fabric files of hosts slurmctld has not registered (not yet, or deleted) stay out of the topology."""
    controller(sandbox, nodes=18)
    publish(sandbox, 1, 36, rack=0)
    result = sandbox.run("gb300-topology-refresh", env=ENV)
    assert result.returncode == 0, result.stderr
    topology = (sandbox.root / "etc/slurm/topology.conf").read_text()
    assert "BlockName=block001 Nodes=gpu-[001-018]\n" in topology
    assert any("gpu-019" in call for call in sandbox.calls("logger"))


def test_scale_set_names_registered_later_join_their_block(sandbox: Sandbox) -> None:
    """A rack of scale-set host names forms its block on the first run after all 18 have registered."""
    controller(sandbox, nodes=0)
    names = [f"ref-gpu-r0001-{i:06x}" for i in range(18)]
    for name in names:
        sandbox.write(f"shared/gb300/fabric/{name}.json", json.dumps({"ClusterUUID": UUIDS[0], "CliqueId": 32766}))
    sandbox.answer("sinfo", "".join(f"{name}\n" for name in names[:17]))
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    assert f"\n#{PLUGIN}\n" in slurm_conf(sandbox)
    sandbox.answer("sinfo", "".join(f"{name}\n" for name in names))
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    topology = (sandbox.root / "etc/slurm/topology.conf").read_text()
    [block] = [line for line in topology.splitlines() if line.startswith("BlockName=block001 ")]
    assert sorted(expand(block.split("Nodes=", 1)[1])) == names
    assert f"\n{PLUGIN}\n" in slurm_conf(sandbox)


def test_fabric_publish_copies_identity_once(sandbox: Sandbox) -> None:
    """A node publishes fabric.json under its host name, and a second run copies nothing."""
    sandbox.write("var/lib/gb300/fabric.json", json.dumps({"ClusterUUID": UUIDS[0], "CliqueId": 32766}))
    env = {"GB300_NODENAME": "gpu-005"}
    assert sandbox.run("gb300-fabric-publish", env=env).returncode == 0
    published = sandbox.root / "shared/gb300/fabric/gpu-005.json"
    assert json.loads(published.read_text())["CliqueId"] == 32766
    before = published.stat().st_mtime_ns
    assert sandbox.run("gb300-fabric-publish", env=env).returncode == 0
    assert published.stat().st_mtime_ns == before


def test_fabric_publish_fails_without_fabric_json(sandbox: Sandbox) -> None:
    """Without the bootstrap's fabric.json the step fails with the missing path."""
    result = sandbox.run("gb300-fabric-publish", env={"GB300_NODENAME": "gpu-005"})
    assert result.returncode == 1
    assert "fabric.json missing" in result.stderr
