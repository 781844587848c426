"""The stack configuration contract (namespace ``gb300``), as typed, validated models.

A stack file's ``config:`` block becomes a :class:`StackConfig`. Every problem is reported at once,
one line per key path (``gb300:gpuPools[0].racks: must be at least 1 (got 0)``), via
:class:`gb300.errors.ConfigError`. Syntax and ranges live here; checks that need the declared
resources (subnet room, quota, rack alignment) are rules in :mod:`gb300.rules`. Each section has a module:
:mod:`~gb300.config.cluster` (cluster, access, network), :mod:`~gb300.config.compute` (GPU pools, head),
:mod:`~gb300.config.storage`, :mod:`~gb300.config.monitoring` (monitoring, health),
:mod:`~gb300.config.remediation`, :mod:`~gb300.config.policy` (policy, allowDestroy, cost), with the field types
they share in :mod:`~gb300.config.fields`; this module joins them into :class:`StackConfig` and re-exports their
models, so ``from gb300.config.models import X`` keeps working. Every model derives from
:class:`gb300.config.base.ConfigModel`.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from gb300 import tags as gb300_tags
from gb300.config.base import Checks, ConfigModel
from gb300.config.checks import PathError
from gb300.config.cluster import AccessSettings, ClusterSettings, NetworkSettings
from gb300.config.compute import GpuPool, HeadSettings
from gb300.config.cpu_pool import CpuPool
from gb300.config.fields import AzureName, Cidr, ImageReference, Name, PoolName, TagKey, TagValue, UserName, Zone
from gb300.config.hooks import Hook
from gb300.config.login import EntraSettings, LoginSettings, UserLimits
from gb300.config.monitoring import (
    AlertSettings,
    BootstrapAlertSettings,
    GrafanaSettings,
    HealthSettings,
    LogsSettings,
    MonitoringSettings,
    PrometheusSettings,
)
from gb300.config.policy import AllowDestroy, CostSettings, PolicySettings, RuleId, Suppression
from gb300.config.remediation import RemediationSettings
from gb300.config.resource_ids import zone_names
from gb300.config.slurm import ExtraPartition, SettingGroup, SlurmSettings
from gb300.config.storage import StorageSettings
from gb300.config.text import text_limit

__all__ = [
    "AccessSettings",
    "AlertSettings",
    "AllowDestroy",
    "AzureName",
    "BootstrapAlertSettings",
    "Cidr",
    "ClusterSettings",
    "CostSettings",
    "CpuPool",
    "EntraSettings",
    "ExtraPartition",
    "GpuPool",
    "GrafanaSettings",
    "HeadSettings",
    "HealthSettings",
    "Hook",
    "ImageReference",
    "LoginSettings",
    "LogsSettings",
    "MonitoringSettings",
    "Name",
    "NetworkSettings",
    "PolicySettings",
    "PoolName",
    "PrometheusSettings",
    "RuleId",
    "SlurmSettings",
    "StackConfig",
    "Suppression",
    "TagKey",
    "TagValue",
    "UserLimits",
    "UserName",
    "Zone",
]


class StackConfig(ConfigModel):
    """The whole ``gb300`` namespace of a stack file."""

    cluster: ClusterSettings
    """The cluster's identity: its name, region, zone and tags."""
    access: AccessSettings
    """Who logs in, and from where."""
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    """The VNet gb300 carves its subnets from."""
    gpu_pools: Annotated[list[GpuPool], Field(min_length=1)]
    """GPU pools; each is one InfiniBand fabric of whole NVLink domains (racks)."""
    cpu_pools: list[CpuPool] = Field(default_factory=list)
    """CPU pools for data preparation and evaluation: a scale set each, in the GPU nodes' subnet without InfiniBand,
    joined to Slurm as dynamic nodes in a partition named after the pool (docs/customize.md#cpu-pools)."""
    head: HeadSettings = Field(default_factory=HeadSettings)
    """The Slurm controller: one VM in the head subnet (and the login node too, without gb300:login)."""
    login: LoginSettings | None = None
    """Login nodes apart from the controller, where users sign in with Entra ID and submit jobs (docs/access.md);
    unset: users log in on the head."""
    slurm: SlurmSettings = Field(default_factory=SlurmSettings)
    """Slurm options and extra partitions of your own, rendered into slurm.conf with gb300's (docs/customize.md), and
    accounts, QoS and fair share (docs/accounts.md)."""
    hooks: list[Hook] = Field(default_factory=list)
    """Bootstrap hooks: scripts of your repository run on the nodes before Slurm starts, after the health gate
    passes, or at each job's prolog and epilog, shipped in the signed node payload (docs/customize.md)."""
    storage: StorageSettings = Field(default_factory=StorageSettings)
    """Shared storage for datasets and checkpoints: Azure Managed Lustre and a storage account (docs/storage.md)."""
    monitoring: MonitoringSettings = Field(default_factory=MonitoringSettings)
    """Azure Monitor, managed Prometheus, Grafana, alerts; every piece is on unless disabled (docs/monitoring.md)."""
    health: HealthSettings = Field(default_factory=HealthSettings)
    """The GPU node health gate (docs/health.md)."""
    remediation: RemediationSettings = Field(default_factory=RemediationSettings)
    """The self-healing loop: drain, reboot, reimage, replace, revalidate and return nodes (docs/self-healing.md)."""
    policy: PolicySettings = Field(default_factory=PolicySettings)
    """Which findings fail the plan, which rules are suppressed, and what the rules check against
    (docs/rules.md#settings-gb300policy).
    """
    software: dict[
        Annotated[str, Field(max_length=text_limit("componentName"))],
        Annotated[str, Field(max_length=text_limit("componentName"))],
    ] = Field(default_factory=dict)
    """Override pinned node software versions: component name (from `data/versions.yaml`) to version
    (docs/node-bootstrap.md#pinning-software-gb300software).
    """
    cost: CostSettings = Field(default_factory=CostSettings)
    """How `gb300 plan` prices the cluster: currency, discount, reservation term (docs/cost.md)."""
    allow_destroy: list[AllowDestroy] = Field(default_factory=list)
    """Consent to expected deletions, replacements or subnet moves of deployed resources: `gb300 plan --state` reports
    them as warnings instead of `destroys-deployed` errors (docs/day2.md).
    """

    def check_unique_pool_names(self) -> None:
        """No two pools, GPU or CPU, share a name (each is a Slurm partition, a node feature and host names)."""
        seen: dict[str, str] = {}
        pools = [("gpuPools", i, p.name) for i, p in enumerate(self.gpu_pools)]
        pools += [("cpuPools", i, p.name) for i, p in enumerate(self.cpu_pools)]
        for key, i, name in pools:
            if name in seen:
                raise PathError(
                    (key, i, "name"), f"duplicates {seen[name]}.name (got {name!r}); pool names must be unique"
                )
            seen[name] = f"{key}[{i}]"

    def check_no_mount_over_the_admin_home(self) -> None:
        """No storage is mounted in the admin user's home, where Azure writes its SSH keys as root."""
        # Azure's agent writes the admin's authorized_keys into /home/<adminUsername>/.ssh as root, and the admin
        # may sudo: a container every job can write, mounted there, would hand root on every node to any job.
        home = f"/home/{self.access.admin_username}"
        for loc, path in self.storage.mounts():
            if path == home or path.startswith(home + "/"):
                raise PathError(
                    loc,
                    f"must not be in {home}, the admin user's home (got {path!r}): Azure writes its authorized_keys "
                    "there as root and the admin may sudo, so whoever writes the storage would log in as root. Use "
                    "a directory of its own such as '/lustre' or '/mnt/data'",
                )

    def check_hub_zones_in_an_existing_vnet(self) -> None:
        """In an existing VNet, the hub's private DNS zones are given for every private endpoint."""
        # gb300 may link no zone of its own to a landing zone's VNet: a second privatelink.blob zone there breaks the
        # resolution of every other private endpoint the hub registers (docs/landing-zone.md).
        if self.network.existing_vnet_id is None:
            return
        blob = self.storage.blob
        needed = ["blob", "vault"] + (["dfs"] if blob is not None and blob.hierarchical_namespace else [])
        given = self.network.private_dns_zones.ids()
        for group in needed:
            if group not in given:
                raise PathError(
                    ("network", "privateDnsZones", group),
                    f"is required with gb300:network.existingVnetId: the id of the hub's {zone_names()[group]} zone, "
                    f"which gb300's {group} private endpoint joins (gb300 links no zone of its own to an existing "
                    "VNet)",
                )

    def check_payload_ranges_need_public_access(self) -> None:
        """Upload source ranges are given only for a payload account whose public endpoint is open."""
        payload = self.storage.node_payload
        if payload.upload_source_ranges and not payload.is_public(
            landing_zone=self.network.existing_vnet_id is not None
        ):
            raise PathError(
                ("storage", "nodePayload", "uploadSourceRanges"),
                "needs the payload account's public endpoint, which is closed (gb300:storage.nodePayload.publicAccess "
                "is false, or unset in a landing zone); set publicAccess: true or remove the ranges",
            )

    def check_partitions_name_pools(self) -> None:
        """Extra partitions name GPU or CPU pools that exist, and none takes a pool's name (its partition's)."""
        kinds = {pool.name: "GPU" for pool in self.gpu_pools} | {pool.name: "CPU" for pool in self.cpu_pools}
        for i, part in enumerate(self.slurm.partitions):
            if part.name in kinds:
                raise PathError(
                    ("slurm", "partitions", i, "name"),
                    f"is {kinds[part.name]} pool {part.name!r}'s own partition; choose another name",
                )
            for j, name in enumerate(part.pools or ()):
                if name not in kinds:
                    raise PathError(
                        ("slurm", "partitions", i, "pools", j),
                        f"names no GPU or CPU pool (got {name!r}; pools: {', '.join(kinds)})",
                    )

    def check_hooks(self) -> None:
        """Hook names are unique and a hook's pools name GPU pools that exist."""
        pools = [pool.name for pool in self.gpu_pools]
        seen: dict[str, int] = {}
        for i, hook in enumerate(self.hooks):
            if hook.name in seen:
                msg = f"duplicates hooks[{seen[hook.name]}].name (got {hook.name!r}); hook names must be unique"
                raise PathError(("hooks", i, "name"), msg)
            seen[hook.name] = i
            for j, name in enumerate(hook.pools):
                if name not in pools:
                    msg = f"names no GPU pool (got {name!r}; pools: {', '.join(pools)})"
                    raise PathError(("hooks", i, "pools", j), msg)

    def check_qos_needs_accounting(self) -> None:
        """A partition's QoS keys need accounting: without slurmdbd there is no QoS, and slurmctld 26.05 will not
        start ("Partition <p> has an invalid AllowQOS ... We have no QOS on the system", measured on Debian sid)."""
        if self.accounting:
            return
        for loc, _, settings in self.slurm_setting_groups():
            for key in settings:
                if key.lower() in ("qos", "allowqos", "denyqos"):
                    raise PathError(
                        (*loc, key),
                        "needs job accounting, which holds the QoS: declare the QoS in gb300:slurm.qos (or set "
                        "gb300:head.slurmdbd: true and create it with sacctmgr)",
                    )

    def check_accounts_keep_accounting(self) -> None:
        """Declared accounts or QoS turn job accounting on; gb300:head.slurmdbd set to false contradicts them."""
        if self.slurm.declares_accounts and "slurmdbd" in self.head.model_fields_set and not self.head.slurmdbd:
            key = "accounts" if self.slurm.accounts else "qos"
            raise PathError(
                ("head", "slurmdbd"),
                f"is false, but gb300:slurm.{key} needs job accounting (slurmdbd holds accounts and QoS); remove "
                "gb300:head.slurmdbd (declared accounts turn it on) or the accounts",
            )

    def check_gpu_limits_within_the_cluster(self) -> None:
        """No account or QoS GPU limit exceeds the GPUs of every pool together: a limit no job can reach is a typo."""
        gpus = sum(pool.vms * pool.sku.gpus for pool in self.gpu_pools)
        limits: list[tuple[tuple[str | int, ...], int | None]] = []
        for i, account in enumerate(self.slurm.accounts):
            limits.append((("slurm", "accounts", i, "gpuLimit"), account.gpu_limit))
        for i, qos in enumerate(self.slurm.qos):
            limits += [(("slurm", "qos", i, "gpuLimit"), qos.gpu_limit)]
            limits += [(("slurm", "qos", i, "maxGpusPerUser"), qos.max_gpus_per_user)]
        for loc, limit in limits:
            if limit is not None and limit > gpus:
                raise PathError(
                    loc,
                    f"must be at most {gpus}, the GPUs of every GPU pool together (got {limit}); raise the pools' "
                    "racks or lower the limit",
                )

    def check_login_reachable(self) -> None:
        """Login nodes have a way in: a Bastion (gb300's or, in a landing zone, the hub's) and Entra sign-in groups."""
        if self.login is None:
            return
        if not self.network.bastion and self.network.existing_vnet_id is None:
            raise PathError(
                ("network", "bastion"),
                "is false, but gb300:login needs a Bastion: the login nodes have no public address; set "
                "gb300:network.bastion: true",
            )
        if self.access.entra is None:
            raise PathError(
                ("access", "entra", "userGroups"),
                "is required with gb300:login: the Entra group object IDs whose members sign in to the login nodes "
                "(the admin key does not log in there)",
            )

    def check_entra_needs_login(self) -> None:
        """Entra sign-in groups are granted on login nodes: declaring them without gb300:login grants nothing."""
        if self.access.entra is not None and self.login is None:
            raise PathError(
                ("access", "entra"),
                "needs gb300:login: Entra sign-in is installed on the login nodes only (the head stays the "
                "controller); declare gb300:login",
            )

    CHECKS: ClassVar[Checks] = (
        check_unique_pool_names,
        check_no_mount_over_the_admin_home,
        check_hub_zones_in_an_existing_vnet,
        check_payload_ranges_need_public_access,
        check_partitions_name_pools,
        check_hooks,
        check_qos_needs_accounting,
        check_accounts_keep_accounting,
        check_gpu_limits_within_the_cluster,
        check_login_reachable,
        check_entra_needs_login,
    )

    @property
    def accounting(self) -> bool:
        """Whether job accounting runs (slurmdbd on the head): gb300:head.slurmdbd, or accounts or QoS declared."""
        return self.head.slurmdbd or self.slurm.declares_accounts

    def slurm_setting_groups(self) -> list[SettingGroup]:
        """Every mapping of custom Slurm settings, with its key path and kind (slurm.conf, a partition line)."""
        groups: list[SettingGroup] = [(("slurm", "settings"), "slurm_conf", self.slurm.settings)]
        for i, pool in enumerate(self.gpu_pools):
            groups.append((("gpuPools", i, "partitionSettings"), "partition_line", pool.partition_settings))
        for i, cpu in enumerate(self.cpu_pools):
            groups.append((("cpuPools", i, "partitionSettings"), "partition_line", cpu.partition_settings))
        for i, part in enumerate(self.slurm.partitions):
            groups.append((("slurm", "partitions", i, "settings"), "partition_line", part.settings))
        return groups

    @property
    def tags(self) -> dict[str, str]:
        """Tags on every taggable resource: the user's plus the toolkit's own."""
        return gb300_tags.cluster(self.cluster.tags, self.cluster.name)
