"""The storage models of the stack config: ``gb300:storage`` (Azure Managed Lustre, Blob, checkpoints)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from gb300.config.base import Checks, ConfigModel
from gb300.config.checks import (
    PathError,
    check_cidr,
    check_container_name,
    check_mount_path,
    check_payload_public_key,
    format_path,
)
from gb300.config.text import text_limit
from gb300.facts import storage_facts

LustreSkuName = Literal[
    "AMLFS-Durable-Premium-40",
    "AMLFS-Durable-Premium-125",
    "AMLFS-Durable-Premium-250",
    "AMLFS-Durable-Premium-500",
]


_MOUNT_PATH = r"^/[A-Za-z0-9._/-]+$"
_DAYS = Literal["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


MountPath = Annotated[
    str, Field(max_length=text_limit("filePath"), pattern=_MOUNT_PATH), AfterValidator(check_mount_path)
]


class MaintenanceWindow(ConfigModel):
    """``gb300:storage.lustre.maintenanceWindow``: when Azure may update the filesystem (30 minutes)."""

    day_of_week: _DAYS = "Sunday"
    """Maintenance day."""
    time_of_day_utc: Annotated[str, Field(max_length=5, pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")] = Field(
        "02:00", alias="timeOfDayUTC"
    )
    """Maintenance start, `HH:MM` in UTC."""


_GUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
_PREFIX = r"^/[A-Za-z0-9._/-]*$"


class LustreBlobIntegration(ConfigModel):
    """``gb300:storage.lustre.blobIntegration``: the filesystem tied to a container of the cluster's storage account.

    Azure Managed Lustre's blob integration is set when the filesystem is created and never after: at creation it
    imports the names under `importPrefix` of `container` (contents follow on first read), and an auto-export job
    copies every file written under `exportPrefix` back to the same container, continuously. Adding, changing or
    removing the tie on a deployed filesystem replaces it (a `storage-data-loss` error; docs/storage.md). Needs
    `gb300:storage.blob`; without it the filesystem is not tied.
    """

    enabled: bool = False
    """Tie the filesystem to Blob. Off unless a stack opts in: Azure's blob integration needs account key access on
    the tied account (amlfs-prerequisites, "Blob integration prerequisites"), and gb300 keeps shared keys off on every
    account it creates. Opting in is a visible trade (an info finding of `storage-no-public-access`) and is fixed when
    the filesystem is created (docs/storage.md#tying-a-deployed-filesystem-to-blob).
    """
    container: ContainerName = "checkpoints"
    """The container, one of `gb300:storage.blob.containers`, the filesystem imports from and exports to. Azure ties
    exactly one.
    """
    import_prefix: Annotated[str, Field(pattern=_PREFIX, max_length=1024)] = "/datasets"
    """Blobs under this prefix of `container` are imported (names at creation, contents on first read): stage
    datasets there before the filesystem is created.
    """
    export_prefix: Annotated[str, Field(pattern=_PREFIX, max_length=1024)] = "/checkpoints"
    """Files written under this path of the filesystem (`<mountPath>/checkpoints`) are exported to `container`
    continuously (Azure's auto-export job).
    """
    logging_container: ContainerName = "lustre-logging"
    """A container of its own for import and export logs; Azure requires it to differ from `container`. gb300 creates
    it; the nodes get no role on it.
    """
    service_principal_id: Annotated[str, Field(pattern=_GUID, max_length=36)] | None = None
    """Object id of the `HPC Cache Resource Provider` service principal in your tenant (`az ad sp list
    --display-name "HPC Cache Resource Provider" --query "[0].id" -o tsv`): it gets Storage Account Contributor and
    Storage Blob Data Contributor on the account, as Azure requires. Required when the tie is made.
    """


class LustreSettings(ConfigModel):
    """``gb300:storage.lustre``: an Azure Managed Lustre filesystem, mounted on every node over TCP LNet."""

    sku: LustreSkuName
    """Throughput tier, MB/s per TiB of capacity."""
    capacity_ti_b: Annotated[int, Field(ge=1, strict=True)] = Field(alias="capacityTiB")
    """Capacity in TiB; must meet the SKU's minimum and increment (`data/lustre.yaml`). Size it with `gb300
    size-storage`.
    """
    mount_path: MountPath = "/lustre"
    """Path where every node mounts it (`<mgs>@tcp:/lustrefs`, `noatime,flock`). Every mount path (also
    `containers[].mountPath`, `blockCache.diskPath`) must be its own directory: not in or above `/etc`, `/root`, `/usr`,
    `/boot`, `/var/lib` and the other system trees, nor the trees gb300 runs from or writes as root (`/opt/gb300`,
    `/mnt/resource_nvme/enroot`, ...), nor the admin user's home; not `/`, `/home`, `/mnt`, `/tmp` themselves, and not
    inside another mount (`data/platform.yaml` `reservedMountTrees`, `gb300MountTrees`, `reservedMountPoints`).
    """
    maintenance_window: MaintenanceWindow = Field(default_factory=MaintenanceWindow)
    """When Azure may update the filesystem (30 minutes)."""
    # The storage subnet's size. Unset: the prefix Azure documents for the capacity (data/lustre.yaml).
    blob_integration: LustreBlobIntegration = Field(default_factory=LustreBlobIntegration)
    """The filesystem tied to a container of the cluster's storage account: datasets imported from a prefix,
    checkpoints exported continuously (docs/storage.md#lustre-and-blob).
    """
    subnet_prefix_length: Annotated[int, Field(ge=16, le=28, strict=True)] | None = None
    """Size of the `storage` subnet; unset = the prefix Azure documents for `capacityTiB` (`data/lustre.yaml`), required
    above 400 TiB. Never a live answer (docs/storage-subnet.md).
    """

    def check_subnet_size_known(self) -> None:
        """A filesystem larger than Azure documents a subnet size for names its subnet size."""
        if self.subnet_prefix_length is None and storage_facts.lustre_subnet_prefix(self.capacity_ti_b) is None:
            raise PathError(
                ("storage", "lustre", "subnetPrefixLength"),
                f"is required for capacityTiB above the sizes Azure documents (got capacityTiB "
                f"{self.capacity_ti_b}); ask Azure for the subnet size this filesystem needs and set it",
            )

    CHECKS: ClassVar[Checks] = (check_subnet_size_known,)

    @property
    def subnet_prefix(self) -> int:
        """The storage subnet's prefix length: ``subnetPrefixLength``, else Azure's documented size."""
        if self.subnet_prefix_length is not None:
            return self.subnet_prefix_length
        return storage_facts.lustre_subnet_prefix(self.capacity_ti_b) or 0


ContainerName = Annotated[str, Field(max_length=63), AfterValidator(check_container_name)]


class BlobContainer(ConfigModel):
    """One entry of ``gb300:storage.blob.containers``: a container, the nodes' access to it, its mount."""

    name: ContainerName
    """The container's name."""
    access: Literal["read", "readWrite"] = "readWrite"
    """The nodes' role on this container: Storage Blob Data Reader (`read`) or Contributor (`readWrite`)."""
    mount_path: MountPath | None = None
    """Path where every GPU node mounts it with BlobFuse2 (block cache); unset: not mounted."""


def _default_containers() -> list[BlobContainer]:
    return [BlobContainer(name="datasets", access="read"), BlobContainer(name="checkpoints", access="readWrite")]


class BlockCache(ConfigModel):
    """``gb300:storage.blob.blockCache``: BlobFuse2 block-cache settings for every mounted container."""

    block_size_mi_b: Annotated[int, Field(ge=1, le=1024, strict=True)] = Field(16, alias="blockSizeMiB")
    """Block size, MiB."""
    memory_mi_b: Annotated[int, Field(ge=256, le=262144, strict=True)] = Field(16384, alias="memoryMiB")
    """Memory cache per mount, MiB."""
    disk_path: MountPath = "/mnt/resource_nvme/blobfuse2"
    """Path of the disk cache, on the NVMe RAID."""
    disk_size_gi_b: Annotated[int, Field(ge=1, le=15000, strict=True)] = Field(1024, alias="diskSizeGiB")
    """Disk cache size per mount, GiB."""


class BlobSettings(ConfigModel):
    """``gb300:storage.blob``: a private storage account for datasets and checkpoints.

    Deleted blobs and containers stay recoverable for ``softDeleteDays``; with ``versioning`` every overwrite
    keeps the previous version. Azure offers versioning only without a hierarchical namespace, so the two are
    exclusive (``data/storage.yaml`` ``blobDataProtection``).
    """

    account_name: Annotated[str, Field(max_length=24, pattern=r"^[a-z0-9]{3,24}$")] | None = None
    """Globally unique account name, 3-24 lowercase letters and digits; unset = `<cluster>st<hash of subscription id,
    cluster and region>`, so two subscriptions deploying one stack file do not collide
    (docs/azure-resources.md#names-that-cannot-collide-storage-account-and-role-assignments).
    """
    containers: Annotated[list[BlobContainer], Field(min_length=1)] = Field(default_factory=_default_containers)
    """Containers; the node identity gets one role per container. Default: `datasets` (read) and `checkpoints`
    (readWrite), not mounted.
    """
    block_cache: BlockCache = Field(default_factory=BlockCache)
    """BlobFuse2 block-cache settings for mounted containers."""
    hierarchical_namespace: bool = False
    """ADLS Gen2 namespace (atomic directory renames, POSIX ACLs); Azure offers no blob versioning with it. Fixed at
    creation: changing it replaces the account (a `storage-data-loss` error).
    """
    versioning: bool = True
    """Keep the previous version of every overwritten blob; needs `hierarchicalNamespace: false`."""
    previous_version_retention_days: Annotated[int, Field(ge=1, strict=True)] = 7
    """Age in days after which the account's lifecycle rule `version-delete-after-days` deletes a previous blob
    version (with `versioning`; the deleted version then stays soft-deleted for `softDeleteDays`). Versioning keeps
    every overwritten blob, billed in full: without the rule each multi-terabyte checkpoint written over the last one
    would keep the last one forever.
    """
    soft_delete_days: Annotated[int, Field(ge=1, le=365, strict=True)] = 14
    """Days deleted blobs and deleted containers stay recoverable (`az storage blob undelete`, `az storage container
    restore`).
    """

    def check_versioning_needs_flat_namespace(self) -> None:
        """Blob versioning is asked for only on a flat namespace, where Azure offers it."""
        if self.versioning and self.hierarchical_namespace:
            raise PathError(
                ("storage", "blob", "versioning"),
                "needs hierarchicalNamespace: false; Azure does not offer blob versioning on accounts with a "
                "hierarchical namespace. Set versioning: false (soft delete still protects deleted blobs) or "
                "hierarchicalNamespace: false",
            )

    def check_unique_containers(self) -> None:
        """No two containers share a name."""
        seen: set[str] = set()
        for i, container in enumerate(self.containers):
            if container.name in seen:
                raise PathError(
                    ("storage", "blob", "containers", i, "name"),
                    f"duplicates another container (got {container.name!r}); container names must be unique",
                )
            seen.add(container.name)

    CHECKS: ClassVar[Checks] = (check_versioning_needs_flat_namespace, check_unique_containers)


class CheckpointSettings(ConfigModel):
    """``gb300:storage.checkpoint``: the model whose checkpoints Lustre must absorb, and how fast."""

    parameters: Annotated[float, Field(gt=0, le=1e15, allow_inf_nan=False)]
    """Model parameters, e.g. `1.0e+12`."""
    write_minutes: Annotated[float, Field(gt=0, le=1440, allow_inf_nan=False)] | None = None
    """Minutes one checkpoint may take to write."""
    interval_minutes: Annotated[float, Field(gt=0, le=10080, allow_inf_nan=False)] | None = None
    """Minutes between checkpoints; the budget when `writeMinutes` is absent."""
    bytes_per_parameter: Annotated[float, Field(gt=0, le=64, allow_inf_nan=False)] | None = None
    """Checkpoint bytes per parameter; unset = 16 (mixed-precision Adam, `data/checkpoint.yaml`)."""

    def check_time_budget(self) -> None:
        """A checkpoint has a time to write in (writeMinutes or intervalMinutes), and writes within its interval."""
        if self.write_minutes is None and self.interval_minutes is None:
            raise PathError(
                ("storage", "checkpoint", "writeMinutes"),
                "is required when intervalMinutes is not given: set the minutes one checkpoint may take to write",
            )
        if (
            self.write_minutes is not None
            and self.interval_minutes is not None
            and self.write_minutes > self.interval_minutes
        ):
            raise PathError(
                ("storage", "checkpoint", "writeMinutes"),
                f"must be at most intervalMinutes ({self.interval_minutes:g}) (got {self.write_minutes:g})",
            )

    CHECKS: ClassVar[Checks] = (check_time_budget,)

    @property
    def budget_minutes(self) -> float:
        """The minutes one checkpoint may take: writeMinutes, else the whole interval."""
        return self.write_minutes if self.write_minutes is not None else float(self.interval_minutes or 0)


StatefulStore = Literal["lustre", "account", "containers"]


class NodePayloadSettings(ConfigModel):
    """``gb300:storage.nodePayload``: the node payloads, in a storage account of their own (docs/node-payload.md)."""

    container: ContainerName = "gb300-node-payload"
    """The container of the payload account holding the node payloads: per payload (`head`, `gpu-<pool>`) a
    signed manifest and the content-addressed archive it names. The node identity may read it (Storage Blob Data
    Reader, this container only), the deployer write it (Storage Blob Data Contributor).
    """
    signing_public_key: Annotated[str, Field(max_length=128), AfterValidator(check_payload_public_key)] | None = None
    """Required. The cluster's Ed25519 payload signing key, public half: base64 of its DER SubjectPublicKeyInfo
    (the line `gb300 payload keygen` prints). Nodes take a payload only when its manifest carries a valid
    signature by this key; the private half never enters the stack or Pulumi's state: the upload reads it from
    the variable `GB300_PAYLOAD_SIGNING_KEY` (docs/node-payload.md#signing).
    """
    upload_source_ranges: list[
        Annotated[str, Field(max_length=len("255.255.255.255/32")), BeforeValidator(check_cidr)]
    ] = Field(default_factory=list)
    """Public IPv4 CIDRs the payload account's public endpoint accepts (default action Deny); empty: any address
    (default action Allow), as the shipped deploy jobs on hosted runners need. Entra ID is required either way and
    the account holds nothing but signed payloads; the data account is never opened (docs/node-payload.md).
    """
    public_access: bool | None = None
    """Whether the payload account's public endpoint is open (Entra ID only, `uploadSourceRanges` or any address).
    Unset: open, except in a landing zone (`gb300:network.existingVnetId`), where the account is private (public
    network access disabled, reached through its private endpoint in the hub's `privatelink.blob` zone) and the deploy
    job must run where that endpoint resolves (docs/landing-zone.md#the-payload-account). `true` opens it there too;
    `false` closes it everywhere."""
    deployer_principal_type: Literal["User", "ServicePrincipal", "none"] = "User"
    """Who runs `pulumi up`: the program grants that identity Storage Blob Data Contributor on the payload
    container so it can upload, and Azure refuses a grant of the wrong type (`UnmatchedPrincipalType`). `User`: a
    person signed in with `az login`; set `ServicePrincipal` for stacks the pipelines deploy (deploy.yml,
    azure-pipelines.yml; a test holds every stack they deploy to it). `none`: no grant, the deployer holds a Blob
    data write role already.
    """

    def is_public(self, *, landing_zone: bool) -> bool:
        """Whether the payload account's public endpoint is open: the key, or by default open except in a landing
        zone."""
        return self.public_access if self.public_access is not None else not landing_zone


class StorageSettings(ConfigModel):
    """``gb300:storage``: shared storage (Lustre, Blob) for datasets and checkpoints."""

    lustre: LustreSettings | None = None
    """An Azure Managed Lustre filesystem, mounted on every node over TCP LNet; unset: none."""
    blob: BlobSettings | None = None
    """A private storage account (private endpoints, no shared keys unless Lustre is tied to it, TLS 1.2, blob and
    container soft delete, versioning); unset: none.
    """
    checkpoint: CheckpointSettings | None = None
    """The model whose checkpoints Lustre must absorb: `gb300 plan` warns (`lustre-checkpoint-throughput`) when it
    cannot; unset: not checked.
    """
    node_payload: NodePayloadSettings = Field(default_factory=NodePayloadSettings)
    """The node payloads: their own storage account, container and signing key (docs/node-payload.md)."""
    allow_replace: list[StatefulStore] = Field(default_factory=list)
    """Stateful stores (`lustre`, `account`, `containers`) that may be replaced, losing their data; any other is
    protected, and a replacing change is a `storage-data-loss` error in `gb300 plan --state`.
    """

    def mounts(self) -> list[tuple[tuple[str | int, ...], str]]:
        """Every path the nodes mount storage at (the block cache's disk path included), with its key path."""
        mounts: list[tuple[tuple[str | int, ...], str]] = []
        if self.lustre is not None:
            mounts.append((("storage", "lustre", "mountPath"), self.lustre.mount_path))
        if self.blob is not None:
            for i, container in enumerate(self.blob.containers):
                if container.mount_path is not None:
                    mounts.append((("storage", "blob", "containers", i, "mountPath"), container.mount_path))
            if any(c.mount_path for c in self.blob.containers):
                mounts.append((("storage", "blob", "blockCache", "diskPath"), self.blob.block_cache.disk_path))
        return mounts

    def check_mounts_do_not_overlap(self) -> None:
        """No storage mount is at, in or above another."""
        mounts = self.mounts()
        for j, (loc, path) in enumerate(mounts):
            for other_loc, other in mounts[:j]:
                if path == other or path.startswith(other + "/") or other.startswith(path + "/"):
                    raise PathError(
                        loc,
                        f"overlaps {format_path(other_loc)} ({other}) (got {path!r}); each mount and the block cache "
                        "need their own directory, none inside another",
                    )

    def check_payload_container_is_its_own(self) -> None:
        """The node payload container is none of the data containers."""
        names = [c.name for c in self.blob.containers] if self.blob is not None else []
        if self.node_payload.container in names:
            raise PathError(
                ("storage", "nodePayload", "container"),
                f"must differ from every gb300:storage.blob.containers name (got {self.node_payload.container!r}): "
                "the node payloads get a container of their own, readable by the nodes and nothing else",
            )

    @property
    def lustre_tie(self) -> LustreBlobIntegration | None:
        """The Lustre filesystem's tie to Blob, or None when there is none (no Lustre, no Blob, or disabled)."""
        if self.lustre is None or self.blob is None or not self.lustre.blob_integration.enabled:
            return None
        return self.lustre.blob_integration

    def check_lustre_tie_is_complete(self) -> None:
        """Lustre's Blob integration names a data container, a logging container of its own and the HPC Cache
        service principal."""
        tie = self.lustre_tie
        if tie is None or self.blob is None:
            return
        where = ("storage", "lustre", "blobIntegration")
        names = [c.name for c in self.blob.containers]
        if tie.container not in names:
            raise PathError(
                (*where, "container"),
                f"must be one of gb300:storage.blob.containers ({', '.join(names)}) (got {tie.container!r}); the "
                "filesystem imports from and exports to a container of the cluster's account",
            )
        if tie.logging_container in {*names, self.node_payload.container}:
            raise PathError(
                (*where, "loggingContainer"),
                f"must differ from the data and node payload containers (got {tie.logging_container!r}); Azure keeps "
                "import and export logs in a container of their own",
            )
        if tie.service_principal_id is None:
            raise PathError(
                (*where, "servicePrincipalId"),
                "is required to tie Lustre to Blob (gb300:storage.lustre.blobIntegration.enabled: true): the object "
                "id of the 'HPC Cache Resource Provider' service principal in your tenant, which `az ad sp list "
                '--display-name "HPC Cache Resource Provider" --query "[0].id" -o tsv` prints. Not tying: remove '
                "enabled: true (no tie is the default), unless the filesystem was deployed tied, which keeps its tie "
                "(docs/storage.md#tying-a-deployed-filesystem-to-blob)",
            )

    def check_checkpoint_needs_lustre(self) -> None:
        """Checkpoint sizing has a Lustre filesystem to size against."""
        if self.checkpoint is not None and self.lustre is None:
            raise PathError(
                ("storage", "checkpoint"),
                "needs gb300:storage.lustre: checkpoints are sized against the Lustre filesystem's throughput",
            )

    CHECKS: ClassVar[Checks] = (
        check_mounts_do_not_overlap,
        check_payload_container_is_its_own,
        check_lustre_tie_is_complete,
        check_checkpoint_needs_lustre,
    )
