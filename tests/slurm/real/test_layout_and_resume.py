"""Real Slurm (24.11 and 26.05): what a dynamic GPU node's record says, read through gb300's own readers
(gb300.slurm.client, the head's heal channels): the SKU's socket layout, the reason a resume leaves, the moment a
resumed node registers again, and the heal simulator answering the same scenario as the release does."""

from __future__ import annotations

import json
import time
from typing import Any

from gb300 import config
from gb300.config import stacks
from gb300.facts import slurm_releases
from gb300.heal.head_slurm import SlurmFeed, SlurmProbe, SlurmView
from gb300.heal.ports import HealSlurm
from gb300.heal.scenario import parse
from gb300.heal.world import World
from gb300.slurm.options import release_of
from tests.support.real_slurm.cluster import Cluster


def _release(cluster: Cluster) -> str:
    return release_of(cluster.version)


def _heal_slurm(cluster: Cluster) -> HealSlurm:
    return HealSlurm(via=cluster.slurm().via)


def test_nodes_register_the_skus_socket_layout(real_cluster: Cluster) -> None:
    """Each node's record has the sockets, cores per socket and threads per core of its VM size, not one-core
    sockets."""
    cfg = config.parse(config.load_stack_file(stacks.stack_file("dev")))  # the fixture's stack
    [pool] = [p for p in cfg.gpu_pools if p.name == real_cluster.files.pool]
    layout = pool.sku.cpu_layout
    assert layout is not None
    nodes = {n["name"]: n for n in json.loads(real_cluster.scontrol("--json", "show", "node"))["nodes"]}
    for host in real_cluster.nodes:
        node = nodes[host.name]
        assert (node["sockets"], node["cores"], node["threads"]) == (
            layout.sockets,
            layout.cores_per_socket,
            layout.threads_per_core,
        )
        assert node["cpus"] == layout.cpus


def _drain_and_resume(cluster: Cluster, host: str, reason: str) -> list[Any]:
    """Drain and resume ``host`` through gb300's client; the records read right after the resume, then after the
    recorded blip, each as (drained, drain reason, reason, re-registering)."""
    slurm = _heal_slurm(cluster)
    slurm.drain([host], reason)
    cluster.wait("the drain", lambda: slurm.nodes([host])[host].drained, 20)
    slurm.resume([host])
    first = slurm.nodes([host])[host]
    time.sleep(slurm_releases.not_responding_seconds() * 3)
    later = slurm.nodes([host])[host]
    return [(r.drained, r.drain_reason, r.reason, r.reregistering) for r in (first, later)]


def test_a_resume_leaves_the_reason_the_release_is_recorded_to_leave(real_cluster: Cluster) -> None:
    """After drain and resume the record keeps its old reason exactly where data/slurm_releases.yaml says the release
    does, the node is not drained, and gb300's readers see no drain, no gate failure and no one else's drain."""
    host = real_cluster.nodes[0].name
    reason = "maintenance by alice"
    _, (drained, drain_reason, left, _) = _drain_and_resume(real_cluster, host, reason)
    assert not drained
    assert drain_reason == ""
    assert (left == reason) == slurm_releases.shows("reasonKeptAfterResume", _release(real_cluster))
    slurm = _heal_slurm(real_cluster)
    assert slurm.reason(host) == ""
    view = SlurmView(slurm, slurm._call, reread=(3, slurm_releases.not_responding_seconds()))
    assert [e for e in SlurmFeed(view).poll(time.time()) if e.node == host] == []
    assert SlurmProbe(view).gate_result(host) == "pass"


def test_a_resumed_node_reads_not_responding_for_a_moment_and_the_head_waits_for_it(real_cluster: Cluster) -> None:
    """Right after a resume the node reads NOT_RESPONDING with boot time 0; the head's poll, re-reading while that
    lasts (heal.json slurmReread), reports nothing, where reading once would report it unreachable."""
    host = real_cluster.nodes[1].name
    slurm = _heal_slurm(real_cluster)
    slurm.drain([host], "gb300-heal: test")
    real_cluster.wait("the drain", lambda: slurm.nodes([host])[host].drained, 20)
    slurm.resume([host])
    once = SlurmFeed(SlurmView(slurm, slurm._call)).poll(time.time())
    view = SlurmView(slurm, slurm._call, reread=(3, slurm_releases.not_responding_seconds()))
    waited = SlurmFeed(view).poll(time.time())
    assert [(e.node, e.kind) for e in once if e.node == host] == [(host, "unreachable")]
    assert [e for e in waited if e.node == host] == []
    assert slurm_releases.shows("notRespondingAfterResume", _release(real_cluster))


def test_the_simulator_answers_a_drain_and_resume_as_the_release_does(real_cluster: Cluster) -> None:
    """The same drain and resume through the heal simulator (heal/world.py, told the release) and through the real
    controller: the head reads the same thing right after the resume and once the node answers again."""
    release = _release(real_cluster)
    real = _drain_and_resume(real_cluster, real_cluster.nodes[0].name, "gb300-heal: XID 79")
    scenario, _ = parse({"racks": 1, "duration": 600})
    world = World(scenario, release=release)
    world.advance(100.0)
    sim_slurm = HealSlurm(run=world.slurm)
    sim_slurm.drain(["r0001-00"], "gb300-heal: XID 79")
    sim_slurm.resume(["r0001-00"])
    first = sim_slurm.nodes(["r0001-00"])["r0001-00"]
    world.advance(world.now + slurm_releases.not_responding_seconds() * 3)
    later = sim_slurm.nodes(["r0001-00"])["r0001-00"]
    simulated = [(r.drained, r.drain_reason, r.reason, r.reregistering) for r in (first, later)]
    assert simulated == real
