"""``gb300:slurm``: Slurm options gb300 did not think of, and extra partitions (docs/customize.md).

The models hold the syntax: a setting is a Slurm key and one scalar value, a partition selects its nodes one way.
Whether a key is one the pinned Slurm release knows, gb300 leaves to the user, and its value's type, is checked
against the option catalog (``data/slurm_options.yaml``, :mod:`gb300.facts.slurm_settings`) by
:func:`catalog_problems` once the whole stack has parsed (the release depends on ``gb300:software``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field, WithJsonSchema

from gb300.config.accounts import Accounts
from gb300.config.base import Checks, ConfigModel
from gb300.config.checks import PathError, format_path
from gb300.config.fields import PoolName
from gb300.errors import Problem
from gb300.facts import slurm_settings

__all__ = [
    "ExtraPartition",
    "NodeFeature",
    "SettingGroup",
    "SettingKey",
    "SettingValue",
    "Settings",
    "SlurmSettings",
    "catalog_problems",
]

_VALUE_MAX = 1024


def check_setting_value(value: object) -> str | int | bool:
    """A setting's value is one scalar: text, a whole number, or true/false."""
    if isinstance(value, bool | int):
        return value
    if isinstance(value, str):
        if not value or len(value) > _VALUE_MAX:
            raise ValueError(f"must be 1 to {_VALUE_MAX} characters (got {len(value)})")
        return value
    raise ValueError(f"must be a string, a whole number or true/false (got {value!r})")


SettingKey = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z][A-Za-z0-9]*$")]
SettingValue = Annotated[
    Any,
    BeforeValidator(check_setting_value),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}]}),
]
Settings = dict[SettingKey, SettingValue]
NodeFeature = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]
"""A Slurm node feature (``Feature=``) as gb300 lets a stack name one."""
PartitionName = Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[a-z][a-z0-9_]*$")]
_RESERVED_PARTITIONS = ("all", "default")


class ExtraPartition(ConfigModel):
    """One entry of ``gb300:slurm.partitions``: a partition beside the GPU pools' own, over nodes chosen one way."""

    name: PartitionName
    """The partition's name: lowercase letters, digits and `_`; not a GPU or CPU pool's name (each pool has its own)."""
    pools: list[PoolName] | None = None
    """The GPU or CPU pools whose nodes the partition holds (their node sets)."""
    feature: NodeFeature | None = None
    """A node feature: the partition holds every node that registers with it (a GPU node's features are its pool's
    name; a CPU node's, its pool's name and its pool's `features`)."""
    settings: Settings = Field(default_factory=dict)
    """Keys of the `PartitionName=` line (limits, QoS, priority: `MaxTime`, `MaxNodes`, `QOS`, `AllowQos`, ...),
    checked against the pinned Slurm release (docs/customize.md)."""

    def check_one_node_selection(self) -> None:
        """The partition's nodes are chosen by exactly one of pools and feature (not a host list: GPU nodes are dynamic
        nodes, and slurmctld will not start with a partition naming nodes it does not have yet, "Invalid node names in
        partition", measured on Debian trixie 24.11)."""
        given = [key for key in ("pools", "feature") if getattr(self, key) is not None]
        if len(given) != 1:
            raise PathError(
                (),
                f"must choose its nodes by exactly one of pools or feature (got {', '.join(given) or 'none'})",
                relative=True,
            )
        if self.pools is not None and not self.pools:
            raise PathError(("pools",), "must name at least one GPU pool (got [])", relative=True)

    CHECKS: ClassVar[Checks] = (check_one_node_selection,)


class SlurmSettings(Accounts):
    """``gb300:slurm``: slurm.conf options and partitions of the user's own, rendered with gb300's, and the accounts,
    QoS and users gb300-slurm-accounts applies with sacctmgr (:class:`~gb300.config.accounts.Accounts`)."""

    settings: Settings = Field(default_factory=dict)
    """slurm.conf keys and their values (`SchedulerParameters`, `PriorityType`, `MaxArraySize`, ...), checked against
    the pinned Slurm release; keys gb300 renders itself are refused with the gb300 key to use (docs/customize.md)."""
    partitions: list[ExtraPartition] = Field(default_factory=list)
    """Extra partitions, by pool or feature, each with its own limits (and QoS, with job accounting)
    (docs/customize.md)."""

    def check_unique_partitions(self) -> None:
        """No two extra partitions share a name, and none takes a name Slurm reserves."""
        seen: dict[str, int] = {}
        for i, part in enumerate(self.partitions):
            if part.name in _RESERVED_PARTITIONS:
                raise PathError(("partitions", i, "name"), f"is a Slurm keyword (got {part.name!r})", relative=True)
            if part.name in seen:
                raise PathError(
                    ("partitions", i, "name"),
                    f"duplicates partitions[{seen[part.name]}].name (got {part.name!r})",
                    relative=True,
                )
            seen[part.name] = i

    CHECKS: ClassVar[Checks] = (check_unique_partitions,)


SettingGroup = tuple[tuple[str | int, ...], str, Settings]
"""One mapping of settings: its key path (without ``gb300:``), its kind (``slurm_conf``, ``partition_line``), itself."""


def _slurm_release(software: Mapping[str, str]) -> tuple[str, str | None]:
    """The pinned Slurm version and its release (None: not a Slurm version)."""
    from gb300.facts.software import apply_software_overrides  # noqa: PLC0415 - the bootstrap reads its data lazily

    version = apply_software_overrides(software).component("slurm").version or ""
    return version, slurm_settings.release_of(version)


def catalog_problems(software: Mapping[str, str], groups: Iterable[SettingGroup]) -> list[Problem]:
    """Every custom Slurm setting of ``groups`` the Slurm release ``software`` pins does not accept as gb300 renders
    it (``StackConfig.slurm_setting_groups``)."""
    groups = [group for group in groups if group[2]]
    if not groups:
        return []
    version, release = _slurm_release(software)
    if release not in slurm_settings.catalog_releases():
        known = ", ".join(slurm_settings.catalog_releases())
        return [
            Problem(
                format_path(loc),
                f"cannot be checked: data/slurm_options.yaml has no option list for Slurm {version!r} (has {known}); "
                "add the release with scripts/slurm-options",
            )
            for loc, _, _ in groups
        ]
    return [
        Problem(format_path((*loc, key)), message)
        for loc, line, settings in groups
        for key, message in slurm_settings.problems(line, settings, release)
    ]
