"""Render Slurm's configuration files for one cluster from a frozen description of its GPU pools.

``render(SlurmCluster(...))`` returns ``{"slurm.conf": ..., "gres.conf": ..., "cgroup.conf": ...,
"plugstack.conf": ...}``, the contents the head node places in ``/etc/slurm/`` (configless Slurm serves
them to the GPU nodes). Templates live in ``templates/slurm/`` and render with ``StrictUndefined``.

GPU node host names are ``<node_prefix><index>`` with the index zero-padded to ``index_width`` digits,
starting at ``first_index``, or the explicit ``names`` of a pool: slurm.conf lists them statically, so the
nodes must boot with exactly those host names (see :func:`uniform_scale_set_names` for scale-set names).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import jinja2

from gb300.paths import TEMPLATES_DIR
from gb300.slurm.hostlist import compress

TEMPLATE_DIR = TEMPLATES_DIR / "slurm"
FILES = ("slurm.conf", "gres.conf", "cgroup.conf", "plugstack.conf")
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_HOST = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


class SlurmConfigError(ValueError):
    """A Slurm cluster description that cannot be rendered; the message names the field."""


@dataclass(frozen=True)
class SlurmPool:
    """One GPU pool: one Slurm partition of identical nodes.

    ``memory_mib`` is RealMemory, the memory Slurm may schedule: slurmd drains a node that reports less,
    so pass the VM's memory less an OS reserve (see :func:`real_memory_mib`).
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
    names: tuple[str, ...] = ()

    def hostnames(self) -> tuple[str, ...]:
        """The pool's node host names in order: ``names`` when given, else prefix + zero-padded index."""
        if self.names:
            return self.names
        last = self.first_index + self.count
        return tuple(f"{self.node_prefix}{i:0{self.index_width}d}" for i in range(self.first_index, last))

    @property
    def hostlist(self) -> str:
        return compress(self.hostnames())


@dataclass(frozen=True)
class SlurmCluster:
    """What slurm.conf needs to know about the cluster; ``topology_populated`` turns on topology/block."""

    cluster_name: str
    head_hostname: str
    pools: tuple[SlurmPool, ...]
    topology_populated: bool = False
    accounting_host: str | None = None
    health_check_interval: int = 300
    prolog_timeout: int = 180
    sbin_dir: str = "/usr/local/sbin"
    pyxis_plugin: str = "/usr/local/lib/slurm/spank_pyxis.so"


def uniform_scale_set_names(computer_name_prefix: str, count: int) -> tuple[str, ...]:
    """Host names a Uniform scale set gives its first ``count`` instances: prefix + instance id in base 36.

    Azure appends six base-36 characters (``000000``, ..., ``00000h``). Status unverified: the letter case
    Azure uses and whether names survive instance replacement (a new instance id) are not confirmed.
    """
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"

    def base36(value: int) -> str:
        text = ""
        while True:
            value, rest = divmod(value, 36)
            text = digits[rest] + text
            if value == 0:
                return text.rjust(6, "0")

    return tuple(f"{computer_name_prefix}{base36(i)}" for i in range(count))


def real_memory_mib(memory_gib: float, reserve_fraction: float = 0.05) -> int:
    """RealMemory for a VM of ``memory_gib``: what the OS leaves after its reserve, in MiB, rounded down."""
    return int(memory_gib * 1024 * (1 - reserve_fraction))


def _problems(cluster: SlurmCluster) -> list[str]:
    problems: list[str] = []
    if not _NAME.match(cluster.cluster_name):
        problems.append(f"'cluster_name' must be 1-40 lowercase letters, digits or '_' (got {cluster.cluster_name!r})")
    if not _HOST.match(cluster.head_hostname):
        problems.append(f"'head_hostname' must be a lowercase host name (got {cluster.head_hostname!r})")
    if not cluster.pools:
        problems.append("'pools' must hold at least one GPU pool (got none)")
    seen: set[str] = set()
    for index, pool in enumerate(cluster.pools):
        where = f"pools[{index}]"
        if not _NAME.match(pool.name):
            problems.append(f"'{where}.name' must be lowercase letters, digits or '_' (got {pool.name!r})")
        if pool.name in seen:
            problems.append(f"'{where}.name' must be unique (got {pool.name!r} twice)")
        seen.add(pool.name)
        if not _HOST.match(pool.node_prefix + "0"):
            problems.append(f"'{where}.node_prefix' must start a lowercase host name (got {pool.node_prefix!r})")
        for name in ("count", "gpus_per_node", "cpus", "memory_mib", "index_width"):
            value = getattr(pool, name)
            if value < 1:
                problems.append(f"'{where}.{name}' must be at least 1 (got {value!r})")
        if pool.names and len(pool.names) != pool.count:
            problems.append(f"'{where}.names' must hold 'count' = {pool.count} host names (got {len(pool.names)})")
        bad = [name for name in pool.names if not _HOST.match(name)]
        if bad:
            problems.append(f"'{where}.names' must be lowercase host names (got {bad[0]!r})")
        if not pool.names and pool.count >= 1 and len(str(pool.first_index + pool.count - 1)) > pool.index_width:
            problems.append(
                f"'{where}.index_width' must fit the last index {pool.first_index + pool.count - 1} "
                f"(got {pool.index_width})"
            )
    return problems


def _environment(template_dir: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(template_dir),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # noqa: S701 - Slurm configuration files, not HTML
    )


def render(cluster: SlurmCluster, template_dir: Path = TEMPLATE_DIR) -> dict[str, str]:
    """File name -> content of Slurm's configuration for ``cluster``; raises SlurmConfigError when invalid."""
    problems = _problems(cluster)
    if problems:
        raise SlurmConfigError("\n".join(problems))
    environment = _environment(template_dir)
    return {name: environment.get_template(f"{name}.j2").render(cluster=cluster) for name in FILES}
