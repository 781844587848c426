"""``gb300:cpuPools``: each mistake is one key-path line (exit 2 from the CLI), a CPU pool's name is its own among all
pools, and extra partitions may name CPU pools."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300 import cli, config
from gb300.facts import catalog
from tests.support.config_errors import error_lines

ARM = "Standard_D16pds_v5"
X64_IMAGE = "canonical:ubuntu-24_04-lts:server:latest"
ARM_IMAGE = "canonical:ubuntu-24_04-lts:server-arm64:latest"


def _with_pools(dev_raw: dict[str, Any], *pools: dict[str, Any], **sections: Any) -> dict[str, Any]:
    raw = copy.deepcopy(dev_raw)
    raw["cpuPools"] = list(pools)
    raw.update(sections)
    return raw


@pytest.mark.parametrize(
    ("pool", "line"),
    [
        ({"name": "train", "count": 2},
         "gb300:cpuPools[0].name: duplicates gpuPools[0].name (got 'train'); pool names must be unique"),
        ({"name": "head", "count": 2},
         "gb300:cpuPools[0].name: is a name gb300 gives its own resources (got 'head'); choose another, such as "
         "'train' (reserved: head, node, mon, lustre, blob, rg)"),
        ({"name": "prep", "count": 0},
         "gb300:cpuPools[0].count: must be at least 1 (got 0)"),
        ({"name": "prep"},
         "gb300:cpuPools[0].count: is required"),
        ({"name": "prep", "count": 2, "vmSize": "Standard_ND128isr_GB300_v6"},
         "gb300:cpuPools[0].vmSize: is not a CPU size in the catalog (got 'Standard_ND128isr_GB300_v6'); known: "
         + ", ".join(sorted(n for n, s in catalog.load().skus.items() if not s.is_gpu))),
        ({"name": "prep", "count": 2, "vmSize": ARM},
         f"gb300:cpuPools[0].image: must boot arm64 like {ARM} (got '{X64_IMAGE}', an x64 image); the VMs would not "
         "boot. Choose an arm64 image (data/images.yaml) or an x64 size"),
        ({"name": "prep", "count": 2, "image": ARM_IMAGE},
         f"gb300:cpuPools[0].image: must boot x64 like Standard_D32ds_v5 (got '{ARM_IMAGE}', an arm64 image); the VMs "
         "would not boot. Choose an x64 image (data/images.yaml) or an arm64 size"),
        ({"name": "prep", "count": 2, "features": ["cpu", "cpu"]},
         "gb300:cpuPools[0].features[1]: is listed twice (got 'cpu')"),
        ({"name": "prep", "count": 2, "features": ["prep"]},
         "gb300:cpuPools[0].features[0]: is the pool's name, which its nodes have already (got 'prep')"),
        ({"name": "prep", "count": 2, "racks": 1},
         "gb300:cpuPools[0].racks: is not a known key"),
    ],
)  # fmt: skip
def test_a_cpu_pool_mistake_is_one_key_path_line(dev_raw: dict[str, Any], pool: dict[str, Any], line: str) -> None:
    """A name another pool or gb300 has, a count below 1 or missing, a GPU size, an image of the other architecture, a
    repeated feature and a GPU pool's key are each one line at their key path."""
    [got] = error_lines(_with_pools(dev_raw, pool))
    assert got.startswith(line), got


def test_two_cpu_pools_of_one_name_are_refused(dev_raw: dict[str, Any]) -> None:
    """Two CPU pools of one name are one line at the second one's name, naming the first."""
    raw = _with_pools(dev_raw, {"name": "prep", "count": 1}, {"name": "prep", "count": 2})
    assert error_lines(raw) == [
        "gb300:cpuPools[1].name: duplicates cpuPools[0].name (got 'prep'); pool names must be unique"
    ]


def test_an_arm64_pool_with_an_arm64_image_parses(dev_raw: dict[str, Any]) -> None:
    """An arm64 size with an arm64 image, its zone and its features parse; its nodes' features start with its name."""
    pool = {"name": "eval", "count": 3, "vmSize": ARM, "image": ARM_IMAGE, "zone": 2, "features": ["cpu", "arm"]}
    cfg = config.parse(_with_pools(dev_raw, pool))
    [parsed] = cfg.cpu_pools
    assert (parsed.vm_size, parsed.count, parsed.zone) == (ARM, 3, "2")
    assert parsed.node_features == ("eval", "cpu", "arm")


def test_extra_partitions_may_name_cpu_pools(dev_raw: dict[str, Any]) -> None:
    """An extra partition over a GPU and a CPU pool parses; one over a pool that does not exist names both kinds."""
    part = {"name": "mixed", "pools": ["train", "prep"]}
    cfg = config.parse(_with_pools(dev_raw, {"name": "prep", "count": 1}, slurm={"partitions": [part]}))
    assert cfg.slurm.partitions[0].pools == ["train", "prep"]
    bad = {"name": "mixed", "pools": ["train", "nope"]}
    assert error_lines(_with_pools(dev_raw, {"name": "prep", "count": 1}, slurm={"partitions": [bad]})) == [
        "gb300:slurm.partitions[0].pools[1]: names no GPU or CPU pool (got 'nope'; pools: train, prep)"
    ]


def test_an_extra_partition_may_not_take_a_cpu_pools_name(dev_raw: dict[str, Any]) -> None:
    """A CPU pool's partition is its own: an extra partition of the same name is refused, naming the pool's kind."""
    part = {"name": "prep", "feature": "cpu"}
    assert error_lines(_with_pools(dev_raw, {"name": "prep", "count": 1}, slurm={"partitions": [part]})) == [
        "gb300:slurm.partitions[0].name: is CPU pool 'prep''s own partition; choose another name"
    ]


def test_a_cpu_pools_partition_settings_are_checked_against_slurm(dev_raw: dict[str, Any]) -> None:
    """A misspelt key of a CPU pool's partitionSettings is one line at its key path, as a GPU pool's is."""
    [line] = error_lines(_with_pools(dev_raw, {"name": "prep", "count": 1, "partitionSettings": {"MaxTme": "30"}}))
    assert line.startswith("gb300:cpuPools[0].partitionSettings.MaxTme: ")
    assert "MaxTime" in line


def test_a_cpu_pool_mistake_exits_two_without_a_traceback(
    dev_raw: dict[str, Any], write_stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gb300 plan` of a stack whose CPU pool has a GPU size exits 2 with the key-path line."""
    path = write_stack(_with_pools(dev_raw, {"name": "prep", "count": 2, "vmSize": "Standard_ND96isr_H100_v5"}))
    assert cli.main(["plan", "--stack-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert "gb300:cpuPools[0].vmSize: is not a CPU size in the catalog" in err
    assert "Traceback" not in err
