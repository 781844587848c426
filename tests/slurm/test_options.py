"""Every option gb300 renders into slurm.conf and topology.conf is one the pinned Slurm release accepts."""

from __future__ import annotations

import copy

import pytest

from gb300 import config
from gb300.config import stacks as gb300_stacks
from gb300.facts.software import apply_software_overrides
from gb300.node import context as node_context
from gb300.slurm import config as slurm_config
from gb300.slurm import options
from gb300.slurm.topology import NodeFabric, build

UUID = "7c3f9a12-4b8e-4d21-a6f0-93e5b1c2d478"


def _rendered(raw: dict[str, object]) -> tuple[dict[str, str], str]:
    """slurm.conf (with the block plugin on, as gb300-topology-refresh leaves it) and a populated topology.conf
    for a stack, and the Slurm version that stack pins."""
    cfg = config.parse(copy.deepcopy(raw))
    cluster = node_context.slurm_cluster(cfg)
    populated = slurm_config.SlurmCluster(**{**cluster.__dict__, "topology_populated": True})
    block = cfg.gpu_pools[0].sku.vms_per_nvlink_domain
    fabric = [NodeFabric(f"node{i:03d}", UUID, "1", f"line {i}") for i in range(block)]
    files = {
        "slurm.conf": slurm_config.render(populated)["slurm.conf"],
        "topology.conf": build(fabric, block).render(),
    }
    version = apply_software_overrides(cfg.software).component("slurm").version
    assert version is not None
    return files, version


@pytest.mark.parametrize("stack", gb300_stacks.stack_names())
def test_shipped_stacks_render_only_options_the_pinned_slurm_accepts(stack: str) -> None:
    """slurm.conf and topology.conf of each shipped stack use only options of the Slurm release versions.yaml pins."""
    files, version = _rendered(config.load_stack_file(gb300_stacks.stack_file(stack)))
    assert "BlockSizes=" in files["topology.conf"]
    assert "TopologyPlugin=topology/block" in files["slurm.conf"]
    assert options.release_of(version) == "25.11"
    assert options.problems(files, version) == []


def test_a_23_11_pin_with_block_sizes_is_refused(reference_raw: dict[str, object]) -> None:
    """Pinning Ubuntu's Slurm 23.11 under the same configuration is caught: 23.11 cannot parse BlockSizes."""
    raw = {**copy.deepcopy(reference_raw), "software": {"slurm": "23.11.4-1.2ubuntu5"}}
    files, version = _rendered(raw)
    found = options.problems(files, version)
    assert found == [f"topology.conf line {files['topology.conf'].count(chr(10))}: BlockSizes is not a "
                     "topology/block option in Slurm 23.11"]  # fmt: skip


@pytest.mark.parametrize(
    ("release", "text", "message"),
    [
        ("25.11", "SlurmctldHostt=head\n", "line 1: SlurmctldHostt is not a slurm.conf option in Slurm 25.11"),
        ("25.11", "TopologyPlugin=topology/default\n", "topology/default: Slurm 25.11 has no such plugin"),
        ("23.11", "SwitchType=switch/nvidia_imex\n", "SwitchType=switch/nvidia_imex: Slurm 23.11 has no such plugin"),
        ("23.11", "TopologyParam=BlockAsNodeRank\n", "Slurm 23.11 does not know 'BlockAsNodeRank'"),
        ("25.11", "SlurmctldParameters=enable_configless,cloud_regaddrs\n", "does not know 'cloud_regaddrs'"),
        ("23.11", "PartitionName=gpu ExclusiveTopo=YES\n", "ExclusiveTopo is not a key of a PartitionName line"),
        ("25.11", "#TopologyPlugin=topology/blok\n", "TopologyPlugin=topology/blok: Slurm 25.11 has no such plugin"),
        ("25.11", "ClusterName=a MaxNodeCount=3\n", "one option per line expected"),
    ],
)
def test_an_option_the_release_lacks_is_named(release: str, text: str, message: str) -> None:
    """Each unknown key, plugin, parameter word or line key is one problem naming the line and the release."""
    [found] = options.problems({"slurm.conf": text}, f"{release}.1")
    assert message in found


def test_the_same_options_pass_on_the_release_that_has_them() -> None:
    """25.11 accepts what the 23.11 rows above refuse: block ranking, the IMEX switch plugin, ExclusiveTopo."""
    text = (
        "SwitchType=switch/nvidia_imex\nTopologyParam=BlockAsNodeRank\n"
        "PartitionName=gpu Nodes=gpu ExclusiveTopo=YES\nNodeSet=gpu Feature=gpu\n"
    )
    assert options.problems({"slurm.conf": text}, "25.11.5") == []


def test_a_release_without_an_option_list_is_one_problem() -> None:
    """A Slurm release the data file does not cover cannot be checked, and says how to add it."""
    assert options.problems({"slurm.conf": "ClusterName=a\n"}, "24.05.3") == [
        "Slurm 24.05.3: no option list for release 24.05 in data/slurm_options.yaml (known: 23.11, 25.11); "
        "add it with scripts/slurm-options"
    ]


@pytest.mark.parametrize(("pin", "served"), [("23.11.4-1.2ubuntu5", False), ("24.11.5-1", False), (None, True)])
def test_slurm_metrics_are_asked_for_only_where_the_release_has_them(
    reference_raw: dict[str, object], pin: str | None, served: bool
) -> None:
    """slurm.conf asks for Slurm's own metrics (MetricsType, 25.11+) under the default pin, and leaves the key out
    for an older pinned release, whose slurmctld would stop at it (24.11: "unrecognized key")."""
    raw = copy.deepcopy(reference_raw)
    if pin is not None:
        raw["software"] = {"slurm": pin}
    files, _version = _rendered(raw)
    assert ("MetricsType=metrics/openmetrics" in files["slurm.conf"].splitlines()) is served
