"""Azure Managed Lustre: the cluster's shared filesystem, in its own subnet, optionally tied to a Blob container.

The filesystem holds data that outlives the cluster: it is protected (``protect`` and ``retain_on_delete``) and
marks the inputs whose change means replacement (``replace_on_changes``, from ``data/storage.yaml``), so a new size
or SKU fails ``pulumi up`` on the protection instead of silently making an empty filesystem; only
``gb300:storage.allowReplace: [lustre]`` lifts both (:func:`gb300.components.storage.stateful_options`). It also
carries a ``CanNotDelete`` management lock, which makes Azure refuse to delete its resource group as a whole (the
program protects and retains that group too). Root squash holds for every client outside the cluster's own
subnets.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import authorization, storagecache

from gb300 import tags as gb300_tags
from gb300.components.scope import ClusterScope
from gb300.components.storage import stateful_options
from gb300.facts import sizing, storage_facts

LOCK_NAME = "gb300-keep-data"
EXPORT_JOB = "checkpoints"
LOCK_NOTES = "gb300: the Lustre filesystem holds data; add 'lustre' to gb300:storage.allowReplace to lift"


def lustre_nid_range(cidr: str, lnet: str) -> str:
    """A subnet as one Lustre NID range: ``10.0.128.0/20`` -> ``10.0.[128-143].[0-255]@tcp``. A CIDR block is
    exactly a product of one range per octet, so the range names the subnet's addresses and no others."""
    net = ipaddress.IPv4Network(cidr)
    first = net.network_address.packed
    last = net.broadcast_address.packed
    octets = [str(a) if a == b else f"[{a}-{b}]" for a, b in zip(first, last, strict=True)]
    return ".".join(octets) + f"@{lnet}"


def root_squash(trusted_cidrs: tuple[str, ...]) -> storagecache.AmlFilesystemRootSquashSettingsArgs:
    """Root squash for every client outside ``trusted_cidrs`` (data/storage.yaml ``lustreRootSquash``)."""
    if not trusted_cidrs:
        raise ValueError("root squash needs the cluster's client subnets (trusted_client_cidrs is empty)")
    facts = storage_facts.lustre_root_squash()
    lnet = str(storage_facts.load()["lustreClient"]["lnet"])
    return storagecache.AmlFilesystemRootSquashSettingsArgs(
        mode=storagecache.AmlFilesystemSquashMode(facts["mode"]),
        no_squash_nid_lists=";".join(lustre_nid_range(cidr, lnet) for cidr in trusted_cidrs),
        squash_uid=int(facts["squashUid"]),
        squash_gid=int(facts["squashGid"]),
    )


@dataclass(frozen=True)
class LustreBlobArgs:
    """The filesystem's tie to Blob: the container it imports from and exports to, and what must exist first."""

    container_id: pulumi.Input[str]
    logging_container_id: pulumi.Input[str]
    import_prefix: str
    export_prefix: str
    ready: tuple[pulumi.Resource, ...] = ()
    """Created before the filesystem: the Lustre service's roles and the account's private endpoint (Azure fails the
    creation when the filesystem cannot reach the container)."""


@dataclass(frozen=True)
class LustreArgs:
    """Inputs of :class:`Lustre`."""

    scope: ClusterScope
    """Where (the filesystem goes in the scope's ``storage`` subnet and zone) and its tags."""
    sku: str
    capacity_tib: int
    maintenance_day: str
    maintenance_time_utc: str
    allow_replace: bool = False
    # The subnets of the cluster's own Lustre clients (GPU nodes, head): root there stays root; root anywhere
    # else that reaches the filesystem is squashed (data/storage.yaml lustreRootSquash).
    trusted_client_cidrs: tuple[str, ...] = ()
    # gb300:storage.checkpoint, carried onto the filesystem as tags where rule lustre-checkpoint-throughput reads it
    checkpoint_parameters: float | None = None
    checkpoint_minutes: float | None = None
    checkpoint_bytes_per_parameter: float | None = None
    checkpoint_interval_minutes: float | None = None
    blob: LustreBlobArgs | None = None
    """The tie to Blob (gb300:storage.lustre.blobIntegration), fixed at creation; None: an untied filesystem."""

    @property
    def all_tags(self) -> dict[str, str]:
        """The filesystem's tags: the cluster's plus the checkpoint's (:func:`gb300.tags.checkpoint`)."""
        tags = self.scope.tags
        if self.checkpoint_parameters is None or self.checkpoint_minutes is None:
            return dict(tags)
        per = self.checkpoint_bytes_per_parameter
        return {
            **tags,
            **gb300_tags.checkpoint(
                sizing.fmt_count(self.checkpoint_parameters),
                f"{self.checkpoint_minutes:g}",
                f"{per:g}" if per is not None else None,
                f"{self.checkpoint_interval_minutes:g}" if self.checkpoint_interval_minutes is not None else None,
            ),
        }


class Lustre(pulumi.ComponentResource):
    """An Azure Managed Lustre filesystem in its own subnet; clients mount ``<mgs_address>@tcp:/lustrefs``.

    Tied to Blob (``args.blob``), the filesystem's ``hsm.settings`` name the container it imports ``import_prefix``
    from at creation and the logging container (pulumi-azure-native 3.29 ``storagecache.AmlFilesystemHsmSettingsArgs``:
    ``container``, ``logging_container``, ``import_prefix``), and an ``AutoExportJob`` (the same SDK's
    ``storagecache.AutoExportJob``, API 2024-07-01) exports every file written under ``export_prefix`` to that
    container, continuously. Azure takes the hsm settings only at creation.
    """

    id: pulumi.Output[str]
    mgs_address: pulumi.Output[str]

    def __init__(self, name: str, args: LustreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gb300:storage:Lustre", name, None, opts)
        scope = args.scope
        fs = storagecache.AmlFilesystem(
            f"{name}-amlfs",
            aml_filesystem_name=f"{name}-amlfs",
            resource_group_name=scope.resource_group_name,
            location=scope.location,
            sku=storagecache.SkuNameArgs(name=args.sku),
            storage_capacity_ti_b=args.capacity_tib,
            zones=scope.zones,
            filesystem_subnet=scope.subnet_id("storage"),
            maintenance_window=storagecache.AmlFilesystemMaintenanceWindowArgs(
                day_of_week=storagecache.MaintenanceDayOfWeekType(args.maintenance_day),
                time_of_day_utc=args.maintenance_time_utc,
            ),
            hsm=self._hsm(args.blob),
            root_squash_settings=root_squash(args.trusted_client_cidrs),
            tags=args.all_tags,
            opts=pulumi.ResourceOptions.merge(
                stateful_options(storagecache.AmlFilesystem, self, allow_replace=args.allow_replace),
                pulumi.ResourceOptions(depends_on=list(args.blob.ready) if args.blob else None),
            ),
        )
        if args.blob is not None:
            storagecache.AutoExportJob(
                f"{name}-export",
                auto_export_job_name=EXPORT_JOB,
                aml_filesystem_name=fs.name,
                resource_group_name=scope.resource_group_name,
                location=scope.location,
                auto_export_prefixes=[args.blob.export_prefix],
                admin_status=storagecache.AutoExportJobAdminStatus.ENABLE,
                tags=scope.tags,
                opts=pulumi.ResourceOptions(parent=self),
            )
        if not args.allow_replace:
            # Azure refuses to delete a resource group that holds a resource with a delete lock, so neither
            # `az group delete` nor a replaced group takes the filesystem with it. Not protected in Pulumi's state:
            # allowReplace drops the lock from the program, and Pulumi must be able to delete it then.
            authorization.ManagementLockByScope(
                f"{name}-lock",
                lock_name=LOCK_NAME,
                scope=fs.id,
                level=authorization.LockLevel.CAN_NOT_DELETE,
                notes=LOCK_NOTES,
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.id = fs.id
        self.mgs_address = fs.client_info.apply(lambda info: (info.mgs_address if info else None) or "")
        self.register_outputs({"id": fs.id, "mgsAddress": self.mgs_address})

    @staticmethod
    def _hsm(blob: LustreBlobArgs | None) -> storagecache.AmlFilesystemHsmArgs | None:
        if blob is None:
            return None
        return storagecache.AmlFilesystemHsmArgs(
            settings=storagecache.AmlFilesystemHsmSettingsArgs(
                container=blob.container_id,
                logging_container=blob.logging_container_id,
                import_prefix=blob.import_prefix,
            )
        )
