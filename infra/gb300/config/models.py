"""The stack configuration contract (namespace ``gb300``), as typed, validated models.

A stack file's ``config:`` block becomes a :class:`StackConfig`. Every problem is reported at once,
one line per key path (``gb300:gpuPools[0].racks: must be at least 1 (got 0)``), via
:class:`gb300.errors.ConfigError`. Syntax and ranges live here; checks that need the declared
resources (subnet room, quota, rack alignment) are rules in :mod:`gb300.rules`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic.alias_generators import to_camel

from gb300.config.checks import (
    _check_address_space,
    _check_cidr,
    _check_container_name,
    _check_email,
    _check_gpu_size,
    _check_image,
    _check_location,
    _check_mount_path,
    _check_name,
    _check_pool_name,
    _check_reason,
    _check_resource_id,
    _check_size,
    _check_ssh_public_key,
    _check_tag_key,
    _check_username,
    _check_webhook,
    _PathError,
    _suppression_from_text,
    _zone_to_str,
    format_path,
)
from gb300.facts import catalog, storage_facts

Name = Annotated[str, Field(min_length=1, max_length=12), AfterValidator(_check_name)]
PoolName = Annotated[str, Field(min_length=1, max_length=10), AfterValidator(_check_pool_name)]
Cidr = Annotated[str, BeforeValidator(_check_cidr)]
Zone = Annotated[Literal["1", "2", "3"], BeforeValidator(_zone_to_str)]
TagKey = Annotated[str, Field(min_length=1, max_length=512, pattern=r"^[^<>%&\\?/]+$"), AfterValidator(_check_tag_key)]
TagValue = Annotated[str, Field(max_length=256)]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, strict=False
    )


class ClusterSettings(_Model):
    """``gb300:cluster``: identity, region and tags of the cluster."""

    name: Name
    location: Annotated[str, AfterValidator(_check_location)]
    zone: Zone | None = None
    tags: dict[TagKey, TagValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _tag_count(self) -> ClusterSettings:
        limits = catalog.load()
        most = int(limits.limit("maxTagsPerResource")) - int(limits.limit("gb300TagReserve"))
        if len(self.tags) > most:
            raise _PathError(
                ("cluster", "tags"),
                f"must hold at most {most} tags (got {len(self.tags)}): Azure allows "
                f"{limits.limit('maxTagsPerResource')} per resource and gb300 adds up to "
                f"{limits.limit('gb300TagReserve')} of its own",
            )
        return self


class AccessSettings(_Model):
    """``gb300:access``: who may log in, and from where."""

    admin_username: Annotated[str, AfterValidator(_check_username)] = "azureuser"
    ssh_public_key: Annotated[str, AfterValidator(_check_ssh_public_key)]
    ssh_source_ranges: list[Cidr] = Field(default_factory=list)
    login_public_ip: bool = False


class NetworkSettings(_Model):
    """``gb300:network``: the address space the toolkit carves its subnets from."""

    address_space: Annotated[Cidr, AfterValidator(_check_address_space)] = "10.40.0.0/16"
    bastion: bool = True
    nat_gateway: bool = True
    gpu_subnet_prefix_length: Annotated[int, Field(ge=8, le=29, strict=True)] | None = None


class GpuPool(_Model):
    """One entry of ``gb300:gpuPools``: one InfiniBand fabric of whole NVLink domains (racks)."""

    name: PoolName
    vm_size: Annotated[str, AfterValidator(_check_gpu_size)] = "Standard_ND128isr_GB300_v6"
    racks: Annotated[int, Field(ge=1, le=2000, strict=True)]
    image: Annotated[str, AfterValidator(_check_image)] = "microsoft-dsvm:ubuntu-hpc:2404-gb:24.04.2026052801"
    os_disk_size_gb: Annotated[int, Field(ge=64, le=4095, strict=True)] = Field(256, alias="osDiskSizeGB")
    capacity_reservation_group_id: Annotated[str, AfterValidator(_check_resource_id)] | None = None
    # Off by default: Azure's GB300 tests say blocks are not needed with dedicated quota (docs/fabric.md).
    interconnect_blocks: Annotated[bool, Field(strict=True)] = False
    # Rack numbers (1..racks) that are not deployed: a failed rack retired without renumbering the others.
    retired_racks: list[Annotated[int, Field(ge=1, strict=True)]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _retired_within_racks(self) -> GpuPool:
        seen: set[int] = set()
        if self.retired_racks and catalog.load().fabric_for(self.sku).scale_set_per != "rack":
            raise _PathError(
                ("retiredRacks",),
                f"applies only to VM sizes with one scale set per rack (GB300, GB200); {self.vm_size} pools are "
                "one scale set: lower racks instead",
                relative=True,
            )
        for i, index in enumerate(self.retired_racks):
            if index > self.racks:
                raise _PathError(
                    ("retiredRacks", i),
                    f"must be a rack number from 1 to racks ({self.racks}) (got {index}); racks counts every "
                    "rack number ever used, retired ones included",
                    relative=True,
                )
            if index in seen:
                raise _PathError(("retiredRacks", i), f"duplicates another entry (got {index})", relative=True)
            seen.add(index)
        if len(seen) >= self.racks:
            raise _PathError(
                ("retiredRacks",), f"must leave at least one rack in service (got all {self.racks})", relative=True
            )
        return self

    @property
    def sku(self) -> catalog.Sku:
        return catalog.load().sku(self.vm_size)

    @property
    def rack_indices(self) -> list[int]:
        """The rack numbers in service: 1..racks without the retired ones (names never renumber)."""
        retired = set(self.retired_racks)
        return [i for i in range(1, self.racks + 1) if i not in retired]

    @property
    def vms(self) -> int:
        return len(self.rack_indices) * self.sku.vms_per_nvlink_domain


class HeadSettings(_Model):
    """``gb300:head``: the Slurm controller and login node."""

    vm_size: Annotated[str, AfterValidator(_check_size)] = "Standard_D16ds_v5"
    image: Annotated[str, AfterValidator(_check_image)] = "canonical:ubuntu-24_04-lts:server:latest"
    os_disk_size_gb: Annotated[int, Field(ge=64, le=4095, strict=True)] = Field(128, alias="osDiskSizeGB")
    # The managed data disk that holds slurmctld's state and the accounting database across reimages.
    state_disk_size_gb: Annotated[int, Field(ge=32, le=4095, strict=True)] = Field(64, alias="stateDiskSizeGB")
    slurmdbd: bool = False


LustreSku = Literal[
    "AMLFS-Durable-Premium-40",
    "AMLFS-Durable-Premium-125",
    "AMLFS-Durable-Premium-250",
    "AMLFS-Durable-Premium-500",
]


_MOUNT_PATH = r"^/[A-Za-z0-9._/-]+$"
_DAYS = Literal["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


MountPath = Annotated[str, Field(pattern=_MOUNT_PATH), AfterValidator(_check_mount_path)]


class MaintenanceWindow(_Model):
    """``gb300:storage.lustre.maintenanceWindow``: when Azure may update the filesystem (30 minutes)."""

    day_of_week: _DAYS = "Sunday"
    time_of_day_utc: Annotated[str, Field(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")] = Field(
        "02:00", alias="timeOfDayUTC"
    )


class LustreSettings(_Model):
    """``gb300:storage.lustre``: an Azure Managed Lustre filesystem, mounted on every node over TCP LNet."""

    sku: LustreSku
    capacity_ti_b: Annotated[int, Field(ge=1, strict=True)] = Field(alias="capacityTiB")
    mount_path: MountPath = "/lustre"
    maintenance_window: MaintenanceWindow = Field(default_factory=MaintenanceWindow)
    # The storage subnet's size. Unset: the prefix Azure documents for the capacity (data/lustre.yaml).
    subnet_prefix_length: Annotated[int, Field(ge=16, le=28, strict=True)] | None = None

    @model_validator(mode="after")
    def _a_subnet_size(self) -> LustreSettings:
        if self.subnet_prefix_length is None and storage_facts.lustre_subnet_prefix(self.capacity_ti_b) is None:
            raise _PathError(
                ("storage", "lustre", "subnetPrefixLength"),
                f"is required for capacityTiB above the sizes Azure documents (got capacityTiB "
                f"{self.capacity_ti_b}); ask Azure for the subnet size this filesystem needs and set it",
            )
        return self

    @property
    def subnet_prefix(self) -> int:
        """The storage subnet's prefix length: ``subnetPrefixLength``, else Azure's documented size."""
        if self.subnet_prefix_length is not None:
            return self.subnet_prefix_length
        return storage_facts.lustre_subnet_prefix(self.capacity_ti_b) or 0


ContainerName = Annotated[str, AfterValidator(_check_container_name)]


class BlobContainer(_Model):
    """One entry of ``gb300:storage.blob.containers``: a container, the nodes' access to it, its mount."""

    name: ContainerName
    access: Literal["read", "readWrite"] = "readWrite"
    mount_path: MountPath | None = None


def _default_containers() -> list[BlobContainer]:
    return [BlobContainer(name="datasets", access="read"), BlobContainer(name="checkpoints", access="readWrite")]


class BlockCache(_Model):
    """``gb300:storage.blob.blockCache``: BlobFuse2 block-cache settings for every mounted container."""

    block_size_mi_b: Annotated[int, Field(ge=1, le=1024, strict=True)] = Field(16, alias="blockSizeMiB")
    memory_mi_b: Annotated[int, Field(ge=256, le=262144, strict=True)] = Field(16384, alias="memoryMiB")
    disk_path: MountPath = "/mnt/resource_nvme/blobfuse2"
    disk_size_gi_b: Annotated[int, Field(ge=1, le=15000, strict=True)] = Field(1024, alias="diskSizeGiB")


class BlobSettings(_Model):
    """``gb300:storage.blob``: a private storage account for datasets and checkpoints.

    Deleted blobs and containers stay recoverable for ``softDeleteDays``; with ``versioning`` every overwrite
    keeps the previous version. Azure offers versioning only without a hierarchical namespace, so the two are
    exclusive (``data/storage.yaml`` ``blobDataProtection``).
    """

    account_name: Annotated[str, Field(pattern=r"^[a-z0-9]{3,24}$")] | None = None
    containers: Annotated[list[BlobContainer], Field(min_length=1)] = Field(default_factory=_default_containers)
    block_cache: BlockCache = Field(default_factory=BlockCache)
    hierarchical_namespace: bool = False
    versioning: bool = True
    soft_delete_days: Annotated[int, Field(ge=1, le=365, strict=True)] = 14

    @model_validator(mode="after")
    def _versioning_needs_flat_namespace(self) -> BlobSettings:
        if self.versioning and self.hierarchical_namespace:
            raise _PathError(
                ("storage", "blob", "versioning"),
                "needs hierarchicalNamespace: false; Azure does not offer blob versioning on accounts with a "
                "hierarchical namespace. Set versioning: false (soft delete still protects deleted blobs) or "
                "hierarchicalNamespace: false",
            )
        return self

    @model_validator(mode="after")
    def _unique_containers(self) -> BlobSettings:
        seen: set[str] = set()
        for i, container in enumerate(self.containers):
            if container.name in seen:
                raise _PathError(
                    ("storage", "blob", "containers", i, "name"),
                    f"duplicates another container (got {container.name!r}); container names must be unique",
                )
            seen.add(container.name)
        return self


class CheckpointSettings(_Model):
    """``gb300:storage.checkpoint``: the model whose checkpoints Lustre must absorb, and how fast."""

    parameters: Annotated[float, Field(gt=0, le=1e15, allow_inf_nan=False)]
    write_minutes: Annotated[float, Field(gt=0, le=1440, allow_inf_nan=False)] | None = None
    interval_minutes: Annotated[float, Field(gt=0, le=10080, allow_inf_nan=False)] | None = None
    bytes_per_parameter: Annotated[float, Field(gt=0, le=64, allow_inf_nan=False)] | None = None

    @model_validator(mode="after")
    def _a_time_budget(self) -> CheckpointSettings:
        if self.write_minutes is None and self.interval_minutes is None:
            raise _PathError(
                ("storage", "checkpoint", "writeMinutes"),
                "is required when intervalMinutes is not given: set the minutes one checkpoint may take to write",
            )
        if (
            self.write_minutes is not None
            and self.interval_minutes is not None
            and self.write_minutes > self.interval_minutes
        ):
            raise _PathError(
                ("storage", "checkpoint", "writeMinutes"),
                f"must be at most intervalMinutes ({self.interval_minutes:g}) (got {self.write_minutes:g})",
            )
        return self

    @property
    def budget_minutes(self) -> float:
        """The minutes one checkpoint may take: writeMinutes, else the whole interval."""
        return self.write_minutes if self.write_minutes is not None else float(self.interval_minutes or 0)


StatefulStore = Literal["lustre", "account", "containers"]


class StorageSettings(_Model):
    """``gb300:storage``: shared storage (Lustre, Blob) for datasets and checkpoints."""

    lustre: LustreSettings | None = None
    blob: BlobSettings | None = None
    checkpoint: CheckpointSettings | None = None
    allow_replace: list[StatefulStore] = Field(default_factory=list)

    @model_validator(mode="after")
    def _mounts_do_not_overlap(self) -> StorageSettings:
        mounts: list[tuple[tuple[str | int, ...], str]] = []
        if self.lustre is not None:
            mounts.append((("storage", "lustre", "mountPath"), self.lustre.mount_path))
        if self.blob is not None:
            for i, container in enumerate(self.blob.containers):
                if container.mount_path is not None:
                    mounts.append((("storage", "blob", "containers", i, "mountPath"), container.mount_path))
            if any(c.mount_path for c in self.blob.containers):
                mounts.append((("storage", "blob", "blockCache", "diskPath"), self.blob.block_cache.disk_path))
        for j, (loc, path) in enumerate(mounts):
            for other_loc, other in mounts[:j]:
                if path == other or path.startswith(other + "/") or other.startswith(path + "/"):
                    raise _PathError(
                        loc,
                        f"overlaps {format_path(other_loc)} ({other}) (got {path!r}); each mount and the block cache "
                        "need their own directory, none inside another",
                    )
        return self

    @model_validator(mode="after")
    def _checkpoint_needs_lustre(self) -> StorageSettings:
        if self.checkpoint is not None and self.lustre is None:
            raise _PathError(
                ("storage", "checkpoint"),
                "needs gb300:storage.lustre: checkpoints are sized against the Lustre filesystem's throughput",
            )
        return self


class BootstrapAlertSettings(_Model):
    """``gb300:monitoring.logs.bootstrapAlert``: a log alert per node whose bootstrap failed (docs/lifecycle.md).

    ``severity``: Azure's alert severity, 0 (critical) to 4 (verbose). The alert notifies the action group of
    ``gb300:monitoring.alerts.emails`` and ``webhooks``.
    """

    enabled: bool = True
    severity: Annotated[int, Field(ge=0, le=4, strict=True)] = 1


class LogsSettings(_Model):
    """``gb300:monitoring.logs``: Log Analytics, the Azure Monitor Agent and the log data collection rules."""

    enabled: bool = True
    retention_days: Annotated[int, Field(ge=30, le=730, strict=True)] = 30
    bootstrap_alert: BootstrapAlertSettings = Field(default_factory=BootstrapAlertSettings)


class PrometheusSettings(_Model):
    """``gb300:monitoring.prometheus``: Azure Monitor workspace; exporters and a remote-writing agent on nodes."""

    enabled: bool = True
    scrape_interval_seconds: Annotated[int, Field(ge=5, le=300, strict=True)] = 30


class GrafanaSettings(_Model):
    """``gb300:monitoring.grafana``: Azure Managed Grafana over the Azure Monitor workspace."""

    enabled: bool = True


class AlertSettings(_Model):
    """``gb300:monitoring.alerts``: Prometheus alert rule groups and who is told."""

    enabled: bool = True
    emails: list[Annotated[str, AfterValidator(_check_email)]] = Field(default_factory=list)
    webhooks: list[Annotated[str, AfterValidator(_check_webhook)]] = Field(default_factory=list)


class MonitoringSettings(_Model):
    """``gb300:monitoring``: Azure Monitor, managed Prometheus and Grafana. Every piece is on unless disabled."""

    logs: LogsSettings = Field(default_factory=LogsSettings)
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    grafana: GrafanaSettings = Field(default_factory=GrafanaSettings)
    alerts: AlertSettings = Field(default_factory=AlertSettings)

    @model_validator(mode="after")
    def _needs_prometheus(self) -> MonitoringSettings:
        if not self.prometheus.enabled:
            for key, piece in (("grafana", self.grafana), ("alerts", self.alerts)):
                if piece.enabled:
                    raise _PathError(
                        ("monitoring", key, "enabled"),
                        "needs gb300:monitoring.prometheus.enabled: true (it reads the Azure Monitor workspace); "
                        "set it to false too",
                    )
        return self


class HealthSettings(_Model):
    """``gb300:health``: the GPU node health gate (``gb300-health-check``, see docs/health.md).

    ``softFailuresToDrain``: how many consecutive failures of a soft check (one that can be transient: a service,
    a mount, an IB port, a temperature) drain the node; hardware faults drain on the first failure regardless.
    """

    soft_failures_to_drain: Annotated[int, Field(ge=1, le=20, strict=True)] = 3


RuleId = Annotated[str, Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]


class Suppression(_Model):
    """One entry of ``gb300:policy.suppress``: a rule id, and why the stack does not want its findings.

    A plain string is a rule id without a reason, enough for rules that are not about security; a security
    rule (``gb300.rules.SECURITY_RULES``) needs ``{rule: ..., reason: ...}``. Every suppression, with its
    reason and the findings it hides, is printed by every ``gb300 plan`` and in the pull request summary.
    """

    rule: RuleId
    reason: Annotated[str, Field(max_length=300), AfterValidator(_check_reason)] | None = None


class PolicySettings(_Model):
    """``gb300:policy``: which findings fail the plan, which rules are suppressed, and what the rules check against.

    ``requiredTags``: tag keys every taggable Azure resource must carry (rule ``required-tags``).
    ``quota``: where ``quota-sufficient`` reads Azure's usage: ``live`` or a saved ``az vm list-usage`` JSON file;
    ``gb300 plan --quota`` overrides it, unset means quota is not checked (an info finding says so).
    ``sshSourceLimitPrefix``: the public SSH sources of one NSG, united, may cover at most one block of this
    prefix length (rule ``no-ssh-from-internet``; default in ``data/skus.yaml`` ``limits``).
    """

    fail_on: Literal["error", "warning", "info"] = "error"
    suppress: list[Annotated[Suppression, BeforeValidator(_suppression_from_text)]] = Field(default_factory=list)
    required_tags: list[TagKey] = Field(default_factory=lambda: ["owner", "gb300-cluster"])
    quota: Annotated[str, Field(min_length=1)] | None = None
    ssh_source_limit_prefix: Annotated[int, Field(ge=1, le=32, strict=True)] = Field(
        default_factory=lambda: int(catalog.load().limit("sshSourceLimitPrefix"))
    )

    @property
    def suppressed(self) -> frozenset[str]:
        """The ids of the suppressed rules."""
        return frozenset(s.rule for s in self.suppress)


class AllowDestroy(_Model):
    """One entry of ``gb300:allowDestroy``: consent to one expected deletion or replacement (docs/day2.md)."""

    resource: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._*?\[\]-]+$")]
    reason: Annotated[str, Field(min_length=1, max_length=500)]


class StackConfig(_Model):
    """The whole ``gb300`` namespace of a stack file."""

    cluster: ClusterSettings
    access: AccessSettings
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    gpu_pools: Annotated[list[GpuPool], Field(min_length=1)]
    head: HeadSettings = Field(default_factory=HeadSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    monitoring: MonitoringSettings = Field(default_factory=MonitoringSettings)
    health: HealthSettings = Field(default_factory=HealthSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    software: dict[str, str] = Field(default_factory=dict)
    allow_destroy: list[AllowDestroy] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_pool_names(self) -> StackConfig:
        seen: dict[str, int] = {}
        for i, pool in enumerate(self.gpu_pools):
            if pool.name in seen:
                raise _PathError(
                    ("gpuPools", i, "name"),
                    f"duplicates gpuPools[{seen[pool.name]}].name (got {pool.name!r}); pool names must be unique",
                )
            seen[pool.name] = i
        return self

    @property
    def tags(self) -> dict[str, str]:
        """Tags on every taggable resource: the user's plus the toolkit's own."""
        return {**self.cluster.tags, "gb300-cluster": self.cluster.name, "managed-by": "gb300"}
