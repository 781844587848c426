"""Real slurmctld (Debian trixie 24.11, sid 26.05) accepts the example stack's own Slurm settings, extra partitions
and CPU pool's partition (examples/custom-slurm, docs/customize.md), and `scontrol` reports them as the stack set
them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gb300 import config
from gb300.paths import REPO_ROOT
from tests.support.real_slurm.cluster import Cluster
from tests.support.real_slurm.fixtures import cluster_fixture
from tests.support.real_slurm.root import SUITES

pytestmark = pytest.mark.slow

EXAMPLE = REPO_ROOT / "examples" / "custom-slurm" / "Pulumi.custom.yaml"


def _example() -> dict[str, Any]:
    return config.load_stack_file(EXAMPLE)


@pytest.fixture(scope="module", params=list(SUITES), ids=[f"{s}-{v}" for s, v in SUITES.items()])
def custom_cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """The dev stack's cluster with the example's GPU pools (their partition settings), CPU pool and gb300:slurm."""
    example = _example()
    overrides = {"gpuPools": example["gpuPools"], "cpuPools": example["cpuPools"], "slurm": example["slurm"]}
    yield from cluster_fixture(request, overrides=overrides)


def _fields(text: str) -> dict[str, str]:
    """``Key=Value`` words of scontrol's text output (``show config`` lines ``Key = Value`` included)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if " = " in line:
            key, _, value = line.partition(" = ")
            out[key.strip()] = value.strip()
            continue
        for word in line.split():
            key, sep, value = word.partition("=")
            if sep:
                out[key] = value
    return out


def test_slurmctld_reports_the_stacks_own_slurm_conf_settings(custom_cluster: Cluster) -> None:
    """`scontrol show config` shows each gb300:slurm.settings value the stack set."""
    shown = _fields(custom_cluster.scontrol("show", "config"))
    settings = _example()["slurm"]["settings"]
    assert shown["MaxArraySize"] == str(settings["MaxArraySize"])
    assert shown["MinJobAge"] == f"{settings['MinJobAge']} sec"
    assert shown["SchedulerParameters"] == settings["SchedulerParameters"]
    assert shown["DisableRootJobs"].lower() == "yes"


def _partition(cluster: Cluster, name: str) -> dict[str, str]:
    return _fields(cluster.scontrol("--all", "show", "partition", name))


def test_the_pools_partition_carries_its_partition_settings(custom_cluster: Cluster) -> None:
    """The GPU pool's own partition has gb300's keys and the stack's partitionSettings."""
    [pool] = _example()["gpuPools"]
    shown = _partition(custom_cluster, pool["name"])
    assert shown["DefaultTime"] == pool["partitionSettings"]["DefaultTime"]
    assert shown["PriorityTier"] == str(pool["partitionSettings"]["PriorityTier"])
    assert shown["Default"] == "YES"


def _names(cluster: Cluster, pool: str) -> list[str]:
    """The registered hosts of ``pool`` (its name is in theirs: ``<cluster>-<pool>-<index>``)."""
    return sorted(host.name for host in cluster.nodes if f"-{pool}-" in host.name)


def test_extra_partitions_hold_the_pools_nodes_with_their_own_limits(custom_cluster: Cluster) -> None:
    """Both extra partitions (by pools, by feature) exist with their limits and hold the registered nodes: the
    pools' partition the GPU and the CPU pool's nodes, the feature's only the GPU pool's."""
    debug, batch = _example()["slurm"]["partitions"]
    held = [name for pool in debug["pools"] for name in _names(custom_cluster, pool)]
    shown = _partition(custom_cluster, debug["name"])
    assert shown["MaxTime"] == "00:30:00"
    assert shown["MaxNodes"] == str(debug["settings"]["MaxNodes"])
    assert shown["PriorityTier"] == str(debug["settings"]["PriorityTier"])
    assert shown["GraceTime"] == str(debug["settings"]["GraceTime"])
    assert shown["TotalNodes"] == str(len(held))
    shown = _partition(custom_cluster, batch["name"])
    assert shown["MaxTime"] == batch["settings"]["MaxTime"]
    assert shown["Hidden"] == "YES"
    assert shown["TotalNodes"] == str(len(_names(custom_cluster, batch["feature"])))


def test_the_cpu_pools_partition_carries_its_partition_settings(custom_cluster: Cluster) -> None:
    """The CPU pool's own partition exists (not the default) with its partitionSettings and holds the pool's nodes
    (none registers here: see docs/customize.md#cpu-pools for why a CPU node's slurmd cannot start yet)."""
    [pool] = _example()["cpuPools"]
    shown = _partition(custom_cluster, pool["name"])
    assert shown["PartitionName"] == pool["name"]
    assert shown["Default"] == "NO"
    assert shown["MaxTime"] == "1-00:00:00"
    assert shown["OverSubscribe"] == pool["partitionSettings"]["OverSubscribe"]
    assert shown["TotalNodes"] == str(len(_names(custom_cluster, pool["name"])))


def test_26_05_reads_oversubscribe_exclusive_as_exclusive_node(custom_cluster: Cluster) -> None:
    """The catalog's 26.05 deprecation holds: gb300's OverSubscribe=EXCLUSIVE reads as Exclusive=NODE there, and as
    itself on 24.11 (data/slurm_options.yaml settings.deprecated)."""
    [pool] = _example()["gpuPools"]
    shown = _partition(custom_cluster, pool["name"])
    if custom_cluster.version.startswith("26.05"):
        assert (shown["Exclusive"], shown["OverSubscribe"]) == ("NODE", "NO")
    else:
        assert shown["OverSubscribe"] == "EXCLUSIVE"
