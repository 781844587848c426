"""Render Slurm's configuration files for one cluster from a frozen description of its GPU pools.

``render(SlurmCluster(...))`` returns ``{"slurm.conf": ..., "gres.conf": ..., "cgroup.conf": ...,
"plugstack.conf": ...}``, the contents the head node places in ``/etc/slurm/`` (configless Slurm serves
them to the GPU nodes). With an ``accounting_host`` (``gb300:head.slurmdbd``), :func:`render_accounting`
returns ``slurmdbd.conf`` and the MariaDB drop-in for the accounting database on the head node.
Templates live in ``templates/slurm/`` and render with ``StrictUndefined``.

GPU nodes are Slurm dynamic nodes (Slurm 22.05+): slurm.conf lists none of them. Each GPU node starts
``slurmd -Z --conf "CPUs=.. RealMemory=.. Gres=gpu:N Feature=<pool>"`` (``gb300-slurmd-setup``) and
registers under its own host name, so a Uniform scale set's instance names (``<prefix><6 base-36 chars>``,
new ones after an instance is replaced) need no change here. slurm.conf holds ``MaxNodeCount`` (the GPU
nodes plus :func:`default_spare_nodes`), one ``Nodeset=<pool> Feature=<pool>`` and one ``PartitionName=<pool>
Nodes=<pool>`` per pool.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from gb300.errors import Gb300Error
from gb300.io.quoting import shown
from gb300.node import paths as node_paths
from gb300.node import templating
from gb300.slurm.accounts import SlurmAccounts, accounting_tres, render_accounts, slurm_conf_lines

FILES = ("slurm.conf", "gres.conf", "cgroup.conf", "plugstack.conf")
ACCOUNTING_FILES = ("slurmdbd.conf", "mariadb-slurmdbd.cnf")
ACCOUNTS_FILE = "slurm-accounts.tsv"
"""The accounts, QoS and users gb300-slurm-accounts applies (:func:`gb300.slurm.accounts.render_accounts`)."""
ACCOUNTING_DB = "slurm_acct_db"
"""slurmdbd.conf's ``StorageLoc``: the MariaDB database gb300-slurmdbd-setup creates (Slurm's default name)."""
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}\Z")
_HOST = re.compile(r"^[a-z][a-z0-9-]{0,62}\Z")
RACK_NODES = 18
"""VMs per NVLink domain (NVL72 rack) of ND GB300 v6; the unit :func:`default_spare_nodes` rounds up to."""
SPARE_FRACTION = 0.10
"""Share of the GPU nodes added to MaxNodeCount for node records that outlive their VM (see default_spare_nodes)."""


class SlurmConfigError(Gb300Error, ValueError):
    """A Slurm cluster description (or a node's Slurm inputs) that cannot be rendered; the message names the field."""


@dataclass(frozen=True)
class SlurmPool:
    """One GPU pool, or one CPU pool (``gpus_per_node`` 0): one Slurm partition (and node set) of identical dynamic
    nodes.

    ``memory_mib`` is RealMemory, the memory Slurm may schedule: slurmd drains a node that reports less,
    so pass the VM's memory less an OS reserve (see :func:`real_memory_mib`). ``node_prefix`` is the pool's
    host-name prefix, only written as a comment (nodes register under whatever host name they have).
    ``first_index`` and ``index_width`` are deprecated and ignored: they numbered static node names.
    ``sockets``, ``cores_per_socket`` and ``threads_per_core`` are the VM size's CPU layout (skus.yaml
    ``cpuLayout``), registered by the node with its CPUs: Slurm reads ``CPUs=`` alone as that many one-core
    sockets. None leaves the layout out (a size the catalog has none for); when set, they must multiply to ``cpus``.
    """

    name: str
    node_prefix: str
    count: int
    vm_size: str
    gpus_per_node: int
    cpus: int
    memory_mib: int
    first_index: int = 1
    index_width: int = 3
    sockets: int | None = None
    cores_per_socket: int | None = None
    threads_per_core: int | None = None
    partition_settings: tuple[tuple[str, str], ...] = ()  # the pool's PartitionName= keys of the user's own
    features: tuple[str, ...] = ()  # a CPU pool's node features (its name first); a GPU pool's is its name

    @property
    def layout(self) -> tuple[int, int, int] | None:
        """(sockets, cores per socket, threads per core), or None when any is unset."""
        if self.sockets is None or self.cores_per_socket is None or self.threads_per_core is None:
            return None
        return self.sockets, self.cores_per_socket, self.threads_per_core


@dataclass(frozen=True)
class SlurmPartition:
    """An extra partition (``gb300:slurm.partitions``): its nodes are GPU pools' node sets (``pools``) or the nodes of
    a ``feature`` (a node set of its own, named after it); ``settings`` are its keys."""

    name: str
    pools: tuple[str, ...] = ()
    feature: str | None = None
    settings: tuple[tuple[str, str], ...] = ()

    @property
    def node_spec(self) -> str:
        """The partition's ``Nodes=`` value."""
        if self.pools:
            return ",".join(self.pools)
        return self.name


@dataclass(frozen=True)
class SlurmCluster:
    """What slurm.conf needs to know about the cluster; ``topology_populated`` turns on topology/block.

    ``spare_nodes`` is added to the pools' node count for ``MaxNodeCount``; None picks
    :func:`default_spare_nodes` of the GPU node count. ``accounting_host`` is where slurmdbd runs (the head
    node); None keeps accounting off (``accounting_storage/none``).
    """

    cluster_name: str
    head_hostname: str
    pools: tuple[SlurmPool, ...]
    topology_populated: bool = False
    spare_nodes: int | None = None
    max_nodes: int | None = None  # MaxNodeCount as given (the GPU subnet's room), instead of pools + spare
    accounting_host: str | None = None
    health_check_interval: int = 300
    prolog_timeout: int = 180
    sbin_dir: str = node_paths.SBIN
    pyxis_plugin: str = node_paths.PYXIS_PLUGIN
    settings: tuple[tuple[str, str], ...] = ()  # slurm.conf keys of the user's own (gb300:slurm.settings)
    partitions: tuple[SlurmPartition, ...] = ()
    accounts: SlurmAccounts | None = None  # gb300:slurm.accounts and .qos; needs an accounting_host
    metrics: bool = True  # MetricsType=metrics/openmetrics: only for a pinned release that knows it (25.11+)


def default_spare_nodes(gpu_nodes: int) -> int:
    """Default MaxNodeCount headroom: 10% of ``gpu_nodes``, at least one rack, rounded up to whole racks.

    A replaced scale-set instance registers under a new host name while the old name stays a (DOWN) node
    record until ``scontrol delete nodename=<old>``; a pool scaled out before slurm.conf is re-rendered
    needs room too. Slurm refuses a dynamic registration beyond MaxNodeCount.
    """
    racks = max(1, math.ceil(gpu_nodes * SPARE_FRACTION / RACK_NODES))
    return racks * RACK_NODES


def max_node_count(cluster: SlurmCluster) -> int:
    """slurm.conf's ``MaxNodeCount``: ``max_nodes`` when set, else every GPU node of every pool plus spares."""
    if cluster.max_nodes is not None:
        return max(cluster.max_nodes, sum(pool.count for pool in cluster.pools))
    nodes = sum(pool.count for pool in cluster.pools)
    spare = default_spare_nodes(nodes) if cluster.spare_nodes is None else cluster.spare_nodes
    return nodes + spare


def real_memory_mib(memory_gib: float, reserve_fraction: float = 0.05) -> int:
    """RealMemory for a VM of ``memory_gib``: what the OS leaves after its reserve, in MiB, rounded down."""
    return int(memory_gib * 1024 * (1 - reserve_fraction))


def _problems(cluster: SlurmCluster) -> list[str]:
    problems: list[str] = []
    if not _NAME.match(cluster.cluster_name):
        problems.append(
            f"'cluster_name' must be 1-40 lowercase letters, digits or '_' (got {shown(cluster.cluster_name)})"
        )
    if not _HOST.match(cluster.head_hostname):
        problems.append(f"'head_hostname' must be a lowercase host name (got {shown(cluster.head_hostname)})")
    if not cluster.pools:
        problems.append("'pools' must hold at least one GPU pool (got none)")
    seen: set[str] = set()
    for index, pool in enumerate(cluster.pools):
        where = f"pools[{index}]"
        if pool.name in seen:
            problems.append(f"'{where}.name' must be unique (got {shown(pool.name)} twice)")
        seen.add(pool.name)
        problems.extend(_pool_problems(pool, where))
    problems.extend(_accounting_problems(cluster))
    if cluster.spare_nodes is not None and cluster.spare_nodes < 0:
        problems.append(f"'spare_nodes' must be at least 0 (got {cluster.spare_nodes!r})")
    return problems


def _pool_problems(pool: SlurmPool, where: str) -> list[str]:
    problems: list[str] = []
    if not _NAME.match(pool.name):
        problems.append(f"'{where}.name' must be lowercase letters, digits or '_' (got {shown(pool.name)})")
    if pool.name == "all":
        problems.append(f"'{where}.name' must not be 'all', Slurm's keyword for every node (got {shown(pool.name)})")
    if not _HOST.match(pool.node_prefix + "0"):
        problems.append(f"'{where}.node_prefix' must start a lowercase host name (got {shown(pool.node_prefix)})")
    for name in ("count", "cpus", "memory_mib"):
        value = getattr(pool, name)
        if value < 1:
            problems.append(f"'{where}.{name}' must be at least 1 (got {value!r})")
    if pool.gpus_per_node < 0:
        got = pool.gpus_per_node
        problems.append(f"'{where}.gpus_per_node' must be at least 0, 0 for a CPU pool (got {got!r})")
    if pool.features and pool.features[0] != pool.name:
        got_features = shown(",".join(pool.features))
        problems.append(f"'{where}.features' must start with the pool's name (got {got_features})")
    problems.extend(_layout_problems(pool, where))
    return problems


def _accounting_problems(cluster: SlurmCluster) -> list[str]:
    if cluster.accounting_host is None:
        return ["'accounts' need an 'accounting_host': slurmdbd holds accounts and QoS"] if cluster.accounts else []
    if not _HOST.match(cluster.accounting_host):
        return [f"'accounting_host' must be a lowercase host name (got {shown(cluster.accounting_host)})"]
    return []


def _layout_problems(pool: SlurmPool, where: str) -> list[str]:
    names = ("sockets", "cores_per_socket", "threads_per_core")
    values = [getattr(pool, name) for name in names]
    if all(value is None for value in values):
        return []
    if pool.layout is None:
        return [f"'{where}.{names}' must be set together (got {tuple(values)!r})"]
    problems = [
        f"'{where}.{n}' must be at least 1 (got {v!r})" for n, v in zip(names, pool.layout, strict=True) if v < 1
    ]
    sockets, cores, threads = pool.layout
    if not problems and sockets * cores * threads != pool.cpus:
        problems.append(
            f"'{where}.sockets' x cores_per_socket x threads_per_core must equal cpus {pool.cpus} "
            f"(got {sockets} x {cores} x {threads})"
        )
    return problems


def render(cluster: SlurmCluster) -> dict[str, str]:
    """File name -> content of Slurm's configuration for ``cluster``; raises SlurmConfigError when invalid."""
    problems = _problems(cluster)
    if problems:
        raise SlurmConfigError("\n".join(problems))
    context = {
        "cluster": cluster,
        "max_node_count": max_node_count(cluster),
        "gpu_counts": sorted({pool.gpus_per_node for pool in cluster.pools if pool.gpus_per_node}),
        "pool_partitions": [
            _partition_line(pool.name, pool.name, index == 0, pool.partition_settings)
            for index, pool in enumerate(cluster.pools)
        ],
        "custom_marker": CUSTOM_MARKER,
        "extra_partitions": [_partition_line(p.name, p.node_spec, False, p.settings) for p in cluster.partitions],
        "account_lines": slurm_conf_lines(cluster.accounts) if cluster.accounts is not None else (),
        "accounting_tres": accounting_tres(),
    }
    files = {name: templating.render(f"slurm/{name}.j2", **context) for name in FILES}
    files["slurm.conf"] = _settings_replace_defaults(files["slurm.conf"], cluster.settings)
    return files


def _partition_line(name: str, nodes: str, default: bool, settings: tuple[tuple[str, str], ...]) -> str:
    """A ``PartitionName=`` line: gb300's keys, each replaced by the user's value of the same key, then the user's
    other keys in their order."""
    keys = {"Nodes": nodes, "Default": "YES" if default else "NO", "MaxTime": "INFINITE", "State": "UP"}
    keys["OverSubscribe"] = "EXCLUSIVE"
    lower = {key.lower(): key for key in keys}
    for key, value in settings:
        keys[lower.get(key.lower(), key)] = value
    return f"PartitionName={name} " + " ".join(f"{key}={value}" for key, value in keys.items())


def _settings_replace_defaults(text: str, settings: tuple[tuple[str, str], ...]) -> str:
    """slurm.conf without gb300's own line of a key the user sets (``gb300:slurm.settings`` is rendered last)."""
    if not settings:
        return text
    keys = {key.lower() for key, _ in settings}
    head, marker, tail = text.partition(CUSTOM_MARKER)
    kept = [line for line in head.splitlines(keepends=True) if line.split("=", 1)[0].lower() not in keys]
    return "".join(kept) + marker + tail


CUSTOM_MARKER = "# Settings of the stack's own (gb300:slurm.settings)"
"""The comment slurm.conf's custom settings follow; gb300's own line of a key set there is left out."""


def render_accounting(cluster: SlurmCluster) -> dict[str, str]:
    """``slurmdbd.conf`` and ``mariadb-slurmdbd.cnf`` for ``cluster``'s accounting host, and ``slurm-accounts.tsv``
    when it declares accounts; empty when accounting is off.

    slurmdbd runs on ``accounting_host`` (``DbdHost``, the host slurm.conf's ``AccountingStorageHost`` names)
    and stores into MariaDB on the same VM over its unix socket, so neither file holds a password.
    Raises SlurmConfigError when ``cluster`` is invalid.
    """
    problems = _problems(cluster)
    if problems:
        raise SlurmConfigError("\n".join(problems))
    if cluster.accounting_host is None:
        return {}
    context = {"cluster": cluster, "dbd_host": cluster.accounting_host, "database": ACCOUNTING_DB}
    files = {name: templating.render(f"slurm/{name}.j2", **context) for name in ACCOUNTING_FILES}
    if cluster.accounts is not None:
        files[ACCOUNTS_FILE] = render_accounts(cluster.cluster_name, cluster.accounts)
    return files
