"""Rendered Slurm configuration (gb300.slurm.config), parsed back and checked the way slurmctld reads it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import jinja2
import pytest

from gb300.slurm.config import (
    SlurmCluster,
    SlurmConfigError,
    SlurmPool,
    real_memory_mib,
    render,
    uniform_scale_set_names,
)
from gb300.slurm.hostlist import expand

from .conftest import FIXTURES

GB300 = "Standard_ND128isr_GB300_v6"
TRAIN = SlurmPool("train", "gpu-", 72, GB300, 4, 128, real_memory_mib(864))
DEV = SlurmPool("dev", "dev-", 18, GB300, 4, 128, real_memory_mib(864), first_index=0, index_width=2)
CLUSTER = SlurmCluster("gb300ref", "head", (TRAIN, DEV))

Record = dict[str, str]


def parse(text: str) -> list[Record]:
    """Slurm's `Key=Value Key=Value` lines as one dict per line, comments and blank lines dropped."""
    records: list[Record] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        record: Record = {}
        for token in line.split():
            key, sep, value = token.partition("=")
            assert sep, f"not key=value: {token!r} in {raw!r}"
            record[key] = value
        records.append(record)
    return records


def settings(records: list[Record]) -> Record:
    """Single-key lines (the global settings) merged into one dict."""
    return {k: v for r in records if len(r) == 1 for k, v in r.items()}


def by_first_key(records: list[Record], key: str) -> list[Record]:
    return [r for r in records if next(iter(r)) == key]


def test_node_lines_cover_every_pool_node_with_four_gpus() -> None:
    """slurm.conf lists each pool's nodes once, with Gres=gpu:4, 128 CPUs and RealMemory below 864 GiB."""
    nodes = by_first_key(parse(render(CLUSTER)["slurm.conf"]), "NodeName")
    hosts = [host for node in nodes for host in expand(node["NodeName"])]
    assert len(hosts) == len(set(hosts)) == 90
    assert hosts[:2] == ["gpu-001", "gpu-002"]
    assert hosts[-1] == "dev-17"
    for node in nodes:
        assert node["Gres"] == "gpu:4"
        assert node["CPUs"] == "128"
        assert int(node["RealMemory"]) < 864 * 1024


def test_one_exclusive_partition_per_pool() -> None:
    """Each pool is one partition over exactly its nodes; the first is the default; nodes are not shared."""
    partitions = by_first_key(parse(render(CLUSTER)["slurm.conf"]), "PartitionName")
    assert [(p["PartitionName"], p["Nodes"], p["Default"]) for p in partitions] == [
        ("train", "gpu-[001-072]", "YES"),
        ("dev", "dev-[00-17]", "NO"),
    ]
    assert {p["OverSubscribe"] for p in partitions} == {"EXCLUSIVE"}


def test_gres_conf_matches_node_lines() -> None:
    """gres.conf names four GPU device files for exactly the nodes slurm.conf gives Gres=gpu:4."""
    files = render(CLUSTER)
    gres = by_first_key(parse(files["gres.conf"]), "NodeName")
    nodes = by_first_key(parse(files["slurm.conf"]), "NodeName")
    assert [g["NodeName"] for g in gres] == [n["NodeName"] for n in nodes]
    assert {(g["Name"], g["File"]) for g in gres} == {("gpu", "/dev/nvidia[0-3]")}


@pytest.mark.parametrize(("populated", "plugin"), [(False, None), (True, "topology/block")])
def test_block_plugin_only_once_topology_is_populated(populated: bool, plugin: str | None) -> None:
    """TopologyPlugin=topology/block is active only with a populated topology; otherwise it is a comment."""
    cluster = SlurmCluster("gb300ref", "head", (TRAIN,), topology_populated=populated)
    text = render(cluster)["slurm.conf"]
    assert settings(parse(text)).get("TopologyPlugin") == plugin
    assert "TopologyPlugin=topology/block\n" in text  # the line topology-refresh toggles is always there


def test_configless_health_gate_and_imex_hooks() -> None:
    """slurm.conf serves configless nodes and wires the health gate and the IMEX prolog/epilog."""
    cfg = settings(parse(render(CLUSTER)["slurm.conf"]))
    assert cfg["SlurmctldParameters"] == "enable_configless"
    assert cfg["SlurmctldHost"] == "head"
    assert cfg["GresTypes"] == "gpu"
    assert cfg["HealthCheckProgram"] == "/usr/local/sbin/gb300-health-check"
    assert cfg["Prolog"] == "/usr/local/sbin/gb300-imex-prolog"
    assert cfg["Epilog"] == "/usr/local/sbin/gb300-imex-epilog"
    assert cfg["PrologFlags"] == "Alloc,Contain"
    assert cfg["AccountingStorageType"] == "accounting_storage/none"


def test_accounting_host_turns_on_slurmdbd() -> None:
    """Naming an accounting host stores accounting in slurmdbd."""
    cluster = SlurmCluster("gb300ref", "head", (TRAIN,), accounting_host="head")
    cfg = settings(parse(render(cluster)["slurm.conf"]))
    assert cfg["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert cfg["AccountingStorageHost"] == "head"


def test_plugstack_loads_pyxis_and_cgroup_constrains_devices() -> None:
    """plugstack.conf requires pyxis and cgroup.conf confines jobs to their GPUs."""
    files = render(CLUSTER)
    assert (
        files["plugstack.conf"]
        .rstrip()
        .endswith("required /usr/local/lib/slurm/spank_pyxis.so runtime_path=/run/pyxis")
    )
    assert settings(parse(files["cgroup.conf"]))["ConstrainDevices"] == "yes"


def test_templates_are_strict(tmp_path: Path) -> None:
    """A template that names a field the cluster lacks fails to render instead of writing an empty value."""
    for name in ("slurm.conf", "gres.conf", "cgroup.conf", "plugstack.conf"):
        (tmp_path / f"{name}.j2").write_text("{{ cluster.no_such_field }}\n")
    with pytest.raises(jinja2.UndefinedError):
        render(CLUSTER, template_dir=tmp_path)


BAD = {
    "cluster-name": (SlurmCluster("GB300 ref", "head", (TRAIN,)), "'cluster_name' must be 1-40 lowercase"),
    "head-hostname": (
        SlurmCluster("ref", "Head_1", (TRAIN,)),
        "'head_hostname' must be a lowercase host name",
    ),
    "no-pools": (SlurmCluster("ref", "head", ()), "'pools' must hold at least one GPU pool (got none)"),
    "zero-count": (
        SlurmCluster("ref", "head", (SlurmPool("train", "gpu-", 0, GB300, 4, 128, 1),)),
        "'pools[0].count' must be at least 1 (got 0)",
    ),
    "duplicate-pool": (SlurmCluster("ref", "head", (TRAIN, TRAIN)), "'pools[1].name' must be unique"),
    "index-too-wide": (
        SlurmCluster("ref", "head", (SlurmPool("train", "gpu-", 1152, GB300, 4, 128, 1),)),
        "'pools[0].index_width' must fit the last index 1152 (got 3)",
    ),
}


@pytest.mark.parametrize(("cluster", "message"), BAD.values(), ids=BAD.keys())
def test_invalid_cluster_names_the_field(cluster: SlurmCluster, message: str) -> None:
    """An invalid description raises SlurmConfigError naming the field, expectation and value."""
    with pytest.raises(SlurmConfigError, match=re.escape(message)):
        render(cluster)


def test_slurm_conf_golden() -> None:
    """The reference slurm.conf matches the reviewed golden file (GB300_UPDATE_GOLDEN=1 rewrites it)."""
    golden = FIXTURES / "golden" / "slurm.conf"
    text = render(CLUSTER)["slurm.conf"]
    if os.environ.get("GB300_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()


def test_pool_with_explicit_scale_set_names() -> None:
    """A pool can list its host names, such as a Uniform scale set's base-36 instance names."""
    names = uniform_scale_set_names("ref-train-r0001-", 18)
    assert names[9:11] == ("ref-train-r0001-000009", "ref-train-r0001-00000a")
    pool = SlurmPool("train", "unused-", 18, GB300, 4, 128, 1, names=names)
    nodes = by_first_key(parse(render(SlurmCluster("ref", "head", (pool,)))["slurm.conf"]), "NodeName")
    assert [host for node in nodes for host in expand(node["NodeName"])] == list(names)


def test_explicit_names_must_match_count() -> None:
    """Listing fewer names than the pool's count is refused, naming the field."""
    pool = SlurmPool("train", "gpu-", 18, GB300, 4, 128, 1, names=("gpu-a", "gpu-b"))
    with pytest.raises(SlurmConfigError, match=re.escape("'pools[0].names' must hold 'count' = 18 host names (got 2)")):
        render(SlurmCluster("ref", "head", (pool,)))
