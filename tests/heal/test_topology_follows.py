"""Racks that lose nodes keep working: the topology follows every drain and return, partial racks included."""

from __future__ import annotations

import re

from gb300.slurm.hostlist import expand

from .conftest import SCENARIOS, simulate


def _blocks(rendered: str) -> dict[str, list[str]]:
    return {m[0]: expand(m[1]) for m in re.findall(r"^BlockName=(\S+) Nodes=(\S+)$", rendered, re.M)}


def test_partial_rack_keeps_its_healthy_nodes_schedulable() -> None:
    """While two of a rack's nodes are repaired its block lists the other 16, none of them drained; every node
    is back in a full block at the end."""
    result = simulate(SCENARIOS / "partial-racks.yaml")
    sizes = []
    for _, rendered in result.world.topology_history:
        rack1 = next(hosts for hosts in _blocks(rendered).values() if hosts[0].startswith("r0001"))
        sizes.append(len(rack1))
        assert not any(result.world.nodes[h].drained for h in rack1)
    assert min(sizes) == 16  # never fewer: the rails repair two of the rack's nodes at a time
    assert 17 in sizes or sizes.count(16) > 1
    final = _blocks(result.world.topology)
    assert sorted(len(h) for h in final.values()) == [18, 18]
    assert "BlockSizes=18" in result.world.topology


def test_drained_node_leaves_its_block_and_returns() -> None:
    """A repaired node leaves its rack's block when drained (17 nodes) and is back in it after its return."""
    result = simulate(SCENARIOS / "xid-fatal-idle.yaml")
    sizes = [len(_blocks(r)["block001"]) for _, r in result.world.topology_history]
    assert sizes[0] == 18
    assert 17 in sizes
    assert sizes[-1] == 18
    assert "r0001-05" in _blocks(result.world.topology)["block001"]
