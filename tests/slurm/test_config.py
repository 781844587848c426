"""Rendered Slurm configuration (gb300.slurm.config), parsed back and checked the way slurmctld reads it."""

from __future__ import annotations

import re
from pathlib import Path

import jinja2
import pytest

from gb300.node import templating
from gb300.slurm.config import (
    SlurmCluster,
    SlurmConfigError,
    SlurmPool,
    default_spare_nodes,
    real_memory_mib,
    render,
    render_accounting,
)
from tests.support.files import assert_golden

GOLDEN = Path(__file__).with_name("golden")
"""The reviewed expected outputs of this file's tests (GB300_UPDATE_GOLDEN=1 rewrites them)."""

GB300 = "Standard_ND128isr_GB300_v6"
TRAIN = SlurmPool("train", "gpu-", 72, GB300, 4, 128, real_memory_mib(864))
DEV = SlurmPool("dev", "dev-", 18, GB300, 4, 128, real_memory_mib(864), first_index=0, index_width=2)
CLUSTER = SlurmCluster("gb300ref", "head", (TRAIN, DEV))
D32 = "Standard_D32ds_v5"
PREP = SlurmPool("prep", "ref-prep-", 4, D32, 0, 32, real_memory_mib(128), sockets=1, cores_per_socket=16,
                 threads_per_core=2, features=("prep", "cpu"))  # fmt: skip

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


def test_no_gpu_node_is_listed_statically() -> None:
    """slurm.conf and gres.conf name no GPU node: GPU nodes register themselves as dynamic nodes."""
    files = render(CLUSTER)
    assert by_first_key(parse(files["slurm.conf"]), "NodeName") == []
    assert by_first_key(parse(files["gres.conf"]), "NodeName") == []
    assert "gpu-001" not in files["slurm.conf"]


def test_max_node_count_covers_every_gpu_node_plus_spare_racks() -> None:
    """MaxNodeCount is the 90 GPU nodes plus one spare rack of 18; dynamic nodes need no fanout."""
    cfg = settings(parse(render(CLUSTER)["slurm.conf"]))
    assert cfg["MaxNodeCount"] == "108"
    assert cfg["TreeWidth"] == "65533"
    assert cfg["SelectType"] == "select/cons_tres"


@pytest.mark.parametrize(
    ("gpu_nodes", "spare"),
    [(18, 18), (180, 18), (198, 36), (1152, 126), (1389 * 18, 2502)],
    ids=["one-rack", "ten-racks", "eleven-racks", "64-racks", "1389-racks"],
)
def test_default_spare_is_a_tenth_in_whole_racks(gpu_nodes: int, spare: int) -> None:
    """The default headroom is 10% of the GPU nodes rounded up to whole racks, never less than one rack."""
    assert default_spare_nodes(gpu_nodes) == spare


def test_explicit_spare_nodes_set_the_headroom() -> None:
    """A cluster's spare_nodes replaces the default headroom, zero included."""
    cluster = SlurmCluster("gb300ref", "head", (TRAIN, DEV), spare_nodes=0)
    assert settings(parse(render(cluster)["slurm.conf"]))["MaxNodeCount"] == "90"


def test_one_nodeset_and_exclusive_partition_per_pool() -> None:
    """Each pool is a Nodeset of its feature under one exclusive partition; the first pool is the default."""
    records = parse(render(CLUSTER)["slurm.conf"])
    assert [(n["Nodeset"], n["Feature"]) for n in by_first_key(records, "Nodeset")] == [
        ("train", "train"),
        ("dev", "dev"),
    ]
    partitions = by_first_key(records, "PartitionName")
    assert [(p["PartitionName"], p["Nodes"], p["Default"]) for p in partitions] == [
        ("train", "train", "YES"),
        ("dev", "dev", "NO"),
    ]
    assert {p["OverSubscribe"] for p in partitions} == {"EXCLUSIVE"}


def test_gres_conf_gives_every_node_its_gpu_device_files() -> None:
    """gres.conf names the four GPU device files once, for whichever node registers."""
    gres = parse(render(CLUSTER)["gres.conf"])
    assert gres == [{"Name": "gpu", "File": "/dev/nvidia[0-3]"}]


def test_pools_with_different_gpu_counts_detect_gpus_with_nvml() -> None:
    """When pools differ in GPUs per node, gres.conf has slurmd detect its GPUs instead of listing files."""
    h100 = SlurmPool("h100", "h100-", 18, "Standard_ND96isr_H100_v5", 8, 96, 1)
    gres = parse(render(SlurmCluster("ref", "head", (TRAIN, h100)))["gres.conf"])
    assert gres == [{"AutoDetect": "nvml"}]


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
    assert "JobAcctGatherType" not in cfg  # gathered but not stored: an error line at every slurmctld start


def test_accounting_host_turns_on_slurmdbd() -> None:
    """Naming an accounting host stores accounting in slurmdbd and gathers it per job through cgroups."""
    cluster = SlurmCluster("gb300ref", "head", (TRAIN,), accounting_host="head")
    cfg = settings(parse(render(cluster)["slurm.conf"]))
    assert cfg["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert cfg["AccountingStorageHost"] == "head"
    assert cfg["JobAcctGatherType"] == "jobacct_gather/cgroup"


def test_slurmdbd_conf_stores_over_the_socket_without_a_password() -> None:
    """slurmdbd.conf runs slurmdbd as slurm on the accounting host and stores into local MariaDB with no password."""
    cluster = SlurmCluster("gb300ref", "gb300ref-head", (TRAIN,), accounting_host="gb300ref-head")
    dbd = settings(parse(render_accounting(cluster)["slurmdbd.conf"]))
    assert dbd["AuthType"] == "auth/munge"
    assert dbd["DbdHost"] == cluster.head_hostname
    assert dbd["SlurmUser"] == "slurm"
    assert dbd["StorageType"] == "accounting_storage/mysql"
    assert dbd["StorageHost"] == "localhost"  # the MySQL client library takes "localhost" as the unix socket
    assert re.fullmatch(r"[A-Za-z0-9_]+", dbd["StorageLoc"])
    assert dbd["LogFile"].startswith("/var/log/slurm/")
    assert dbd["PidFile"].startswith("/")
    assert not {key for key in dbd if "pass" in key.lower()}


def test_slurm_conf_points_at_the_slurmdbd_it_renders() -> None:
    """slurm.conf's AccountingStorageHost names the DbdHost of the slurmdbd.conf rendered with it."""
    cluster = SlurmCluster("gb300ref", "gb300ref-head", (TRAIN,), accounting_host="gb300ref-head")
    ctld = settings(parse(render(cluster)["slurm.conf"]))
    dbd = settings(parse(render_accounting(cluster)["slurmdbd.conf"]))
    assert ctld["AccountingStorageHost"] == dbd["DbdHost"]
    assert ctld["SlurmUser"] == dbd["SlurmUser"]  # slurmdbd trusts the controller's SlurmUser


def test_no_accounting_files_without_an_accounting_host() -> None:
    """Without an accounting host no slurmdbd.conf or MariaDB drop-in is rendered."""
    assert render_accounting(CLUSTER) == {}
    assert "slurmdbd.conf" not in render(CLUSTER)


def test_mariadb_dropin_sets_the_innodb_values_slurm_recommends() -> None:
    """The MariaDB drop-in raises the InnoDB buffer pool, redo log and lock wait timeout for slurmdbd."""
    cluster = SlurmCluster("gb300ref", "head", (TRAIN,), accounting_host="head")
    text = render_accounting(cluster)["mariadb-slurmdbd.cnf"]
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert lines[0] == "[mysqld]"
    values = dict(line.split("=", 1) for line in lines[1:])
    assert int(values["innodb_lock_wait_timeout"]) >= 900
    assert int(values["innodb_buffer_pool_size"].removesuffix("M")) >= 4096
    assert int(values["innodb_log_file_size"].removesuffix("M")) > 96  # MariaDB 10.5+'s default is 96M
    assert "source:" in text


def test_plugstack_loads_pyxis_and_cgroup_constrains_devices() -> None:
    """plugstack.conf loads pyxis where it is installed (optional elsewhere) and cgroup.conf confines jobs to their
    GPUs."""
    files = render(CLUSTER)
    lines = [line for line in files["plugstack.conf"].splitlines() if line and not line.startswith("#")]
    assert lines == ["optional /usr/local/lib/slurm/spank_pyxis.so runtime_path=/run/pyxis"]
    assert settings(parse(files["cgroup.conf"]))["ConstrainDevices"] == "yes"


def test_templates_are_strict() -> None:
    """A template that names a field the cluster lacks fails to render instead of writing an empty value."""
    with pytest.raises(jinja2.UndefinedError):
        templating.environment().from_string("{{ cluster.no_such_field }}\n").render(cluster=CLUSTER)


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
    "pool-named-all": (
        SlurmCluster("ref", "head", (SlurmPool("all", "gpu-", 18, GB300, 4, 128, 1),)),
        "'pools[0].name' must not be 'all'",
    ),
    "layout-product": (
        SlurmCluster("ref", "head", (SlurmPool("train", "gpu-", 18, GB300, 4, 128, 1, 1, 3, 2, 32, 1),)),
        "'pools[0].sockets' x cores_per_socket x threads_per_core must equal cpus 128 (got 2 x 32 x 1)",
    ),
    "layout-partial": (
        SlurmCluster("ref", "head", (SlurmPool("train", "gpu-", 18, GB300, 4, 128, 1, sockets=2),)),
        "'pools[0].('sockets', 'cores_per_socket', 'threads_per_core')' must be set together (got (2, None, None))",
    ),
    "accounting-host": (
        SlurmCluster("ref", "head", (TRAIN,), accounting_host="Head.example"),
        "'accounting_host' must be a lowercase host name (got 'Head.example')",
    ),
    "cpu-features": (
        SlurmCluster("ref", "head", (TRAIN, SlurmPool("prep", "p-", 4, D32, 0, 32, 1, features=("cpu", "prep")))),
        "'pools[1].features' must start with the pool's name (got 'cpu,prep')",
    ),
    "negative-gpus": (
        SlurmCluster("ref", "head", (TRAIN, SlurmPool("prep", "p-", 4, D32, -1, 32, 1))),
        "'pools[1].gpus_per_node' must be at least 0, 0 for a CPU pool (got -1)",
    ),
    "negative-spare": (
        SlurmCluster("ref", "head", (TRAIN,), spare_nodes=-1),
        "'spare_nodes' must be at least 0 (got -1)",
    ),
}


def test_a_cpu_pool_gets_its_node_set_and_partition_and_no_gres() -> None:
    """A CPU pool (no GPUs) gets its node set by feature and its own partition after the GPU pools' (not the
    default), counts in MaxNodeCount, and leaves gres.conf as the GPU pools alone make it."""
    alone = render(SlurmCluster("ref", "head", (TRAIN,)))
    files = render(SlurmCluster("ref", "head", (TRAIN, PREP)))
    records = parse(files["slurm.conf"])
    assert {"Nodeset": "prep", "Feature": "prep"} in by_first_key(records, "Nodeset")
    [prep] = [r for r in by_first_key(records, "PartitionName") if r["PartitionName"] == "prep"]
    assert (prep["Nodes"], prep["Default"]) == ("prep", "NO")
    [train] = [r for r in by_first_key(records, "PartitionName") if r["PartitionName"] == "train"]
    assert train["Default"] == "YES"
    comments = [line for line in files["slurm.conf"].splitlines() if line.startswith("# CPU pool prep")]
    assert comments == [f"# CPU pool prep (gb300:cpuPools): {D32} (ref-prep-*), 32 CPUs, RealMemory={PREP.memory_mib}, "
                        "features prep,cpu"]  # fmt: skip
    max_nodes = int(settings(records)["MaxNodeCount"])
    assert max_nodes == int(settings(parse(alone["slurm.conf"]))["MaxNodeCount"]) + PREP.count
    assert files["gres.conf"] == alone["gres.conf"]


@pytest.mark.parametrize(("cluster", "message"), BAD.values(), ids=BAD.keys())
def test_invalid_cluster_names_the_field(cluster: SlurmCluster, message: str) -> None:
    """An invalid description raises SlurmConfigError naming the field, expectation and value."""
    with pytest.raises(SlurmConfigError, match=re.escape(message)):
        render(cluster)


def test_slurm_conf_golden() -> None:
    """The reference slurm.conf matches the reviewed golden file (GB300_UPDATE_GOLDEN=1 rewrites it)."""
    assert_golden(GOLDEN / "slurm.conf", render(CLUSTER)["slurm.conf"])


def test_large_cluster_config_stays_small() -> None:
    """1,389 racks render the same few lines as one: slurm.conf does not grow with the node count."""
    big = SlurmPool("train", "ref-train-r0001-", 1389 * 18, GB300, 4, 128, 1)
    small = SlurmPool("train", "ref-train-r0001-", 18, GB300, 4, 128, 1)
    sizes = [len(render(SlurmCluster("ref", "head", (pool,)))["slurm.conf"]) for pool in (small, big)]
    assert sizes[1] - sizes[0] < 16


def test_deprecated_index_fields_are_accepted_and_ignored() -> None:
    """A pool built with the old index_width still renders, identically to one without it."""
    plain = SlurmCluster("ref", "head", (SlurmPool("train", "gpu-", 18, GB300, 4, 128, 1),))
    old = SlurmCluster("ref", "head", (SlurmPool("train", "gpu-", 18, GB300, 4, 128, 1, index_width=5),))
    assert render(old) == render(plain)
