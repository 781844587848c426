"""Shared storage: an Azure Managed Lustre filesystem, and a private storage account for datasets and checkpoints.

Both hold data that outlives the cluster, so both are protected (``protect`` and ``retain_on_delete``) and mark
the inputs whose change means replacement (``replace_on_changes``, from ``data/storage.yaml``): a new Lustre size
or SKU then fails ``pulumi up`` on the protection instead of silently making an empty filesystem. A stack lifts
both guards for one store only through ``gb300:storage.allowReplace``. The filesystem also carries a
``CanNotDelete`` management lock, which makes Azure refuse to delete its resource group as a whole (the program
protects and retains that group too); see docs/azure-resources.md for why the account has no lock.

The account is reachable only through private endpoints (blob; dfs too on a hierarchical namespace, which nodes
then mount over) resolved by private DNS zones linked to the VNet: no public network access, ever (the node
payloads live in an account of their own, :mod:`gb300.components.node_payload`), no anonymous blob access, no
shared keys, TLS 1.2. Nodes reach containers with the node identity's role assignments, each scoped to one
container. Every stack has this account: without ``gb300:storage.blob`` it holds no container, and its blob zone
serves the payload account's private endpoint too.

Deleted data stays recoverable: blob and container soft delete for ``soft_delete_days`` and, on a flat namespace,
blob versioning (every overwrite keeps the previous version, which the account's lifecycle policy deletes
once it is ``previous_version_retention_days`` old). Containers are stateful resources too: protected,
retained, and lifted only by ``gb300:storage.allowReplace: [containers]``.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import pulumi
from pulumi_azure_native import authorization, storage, storagecache

from gb300 import tags as gb300_tags
from gb300.components.private_link import PrivateLinkArgs, private_endpoint
from gb300.facts import roles, sizing, storage_facts

ROLE_FOR_ACCESS = {"read": "Storage Blob Data Reader", "readWrite": "Storage Blob Data Contributor"}
LOCK_NAME = "gb300-keep-data"
VERSION_RULE = "version-delete-after-days"
EXPORT_JOB = "checkpoints"
LUSTRE_SERVICE_ROLES = ("Storage Account Contributor", "Storage Blob Data Contributor")
LOCK_NOTES = "gb300: the Lustre filesystem holds data; add 'lustre' to gb300:storage.allowReplace to lift"


def stateful_options(
    cls: type[pulumi.CustomResource], parent: pulumi.Resource, *, allow_replace: bool
) -> pulumi.ResourceOptions:
    """Options of a stateful resource of class ``cls``: protected and retained unless the stack allows replacing it."""
    replace_on = list(storage_facts.stateful()[str(pulumi.get_type_token(cls))]["replaceOn"])
    if allow_replace:
        # Explicitly allowed: Pulumi deletes the old one first (the name is fixed), and its data with it.
        return pulumi.ResourceOptions(
            parent=parent, protect=False, retain_on_delete=False, delete_before_replace=True,
            replace_on_changes=replace_on,
        )  # fmt: skip
    return pulumi.ResourceOptions(parent=parent, protect=True, retain_on_delete=True, replace_on_changes=replace_on)


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

    resource_group_name: pulumi.Input[str]
    location: str
    sku: str
    capacity_tib: int
    subnet_id: pulumi.Input[str]
    maintenance_day: str
    maintenance_time_utc: str
    zone: str | None = None
    allow_replace: bool = False
    tags: dict[str, str] = field(default_factory=dict)
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
        if self.checkpoint_parameters is None or self.checkpoint_minutes is None:
            return dict(self.tags)
        per = self.checkpoint_bytes_per_parameter
        return {
            **self.tags,
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
        fs = storagecache.AmlFilesystem(
            f"{name}-amlfs",
            aml_filesystem_name=f"{name}-amlfs",
            resource_group_name=args.resource_group_name,
            location=args.location,
            sku=storagecache.SkuNameArgs(name=args.sku),
            storage_capacity_ti_b=args.capacity_tib,
            zones=[args.zone] if args.zone else None,
            filesystem_subnet=args.subnet_id,
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
                resource_group_name=args.resource_group_name,
                location=args.location,
                auto_export_prefixes=[args.blob.export_prefix],
                admin_status=storagecache.AutoExportJobAdminStatus.ENABLE,
                tags=args.tags,
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


@dataclass(frozen=True)
class ContainerAccess:
    """One container and what the nodes may do in it."""

    name: str
    access: Literal["read", "readWrite"]


@dataclass(frozen=True)
class BlobStoreArgs:
    """Inputs of :class:`BlobStore`."""

    resource_group_name: pulumi.Input[str]
    location: str
    cluster_name: str
    subscription_id: pulumi.Input[str]
    containers: list[ContainerAccess]
    endpoints_subnet_id: pulumi.Input[str]
    vnet_id: pulumi.Input[str]
    node_principal_id: pulumi.Input[str]
    soft_delete_days: int
    hierarchical_namespace: bool = False
    versioning: bool = True
    previous_version_retention_days: int = 7
    """Days before the lifecycle policy deletes a previous blob version (with ``versioning`` only)."""
    allow_replace: bool = False
    allow_replace_containers: bool = False
    tags: dict[str, str] = field(default_factory=dict)
    account_name: str | None = None  # gb300:storage.blob.accountName; None: see account_name()
    lustre: LustreServiceAccess | None = None
    """What the Lustre filesystem's tie to Blob needs of the account; None: no tie."""
    hub_zone_ids: Mapping[str, str] = field(default_factory=dict)
    """The hub's private DNS zone per sub-resource (``gb300:network.privateDnsZones``): the endpoint joins it and no
    zone of that name is declared."""


@dataclass(frozen=True)
class LustreServiceAccess:
    """The Azure Managed Lustre service's access to the account: its principal and its logging container."""

    principal_id: str
    logging_container: str


def account_name(args: BlobStoreArgs, subscription_id: str) -> str:
    """``gb300:storage.blob.accountName``, else a name from the subscription, cluster name and region (<= 24 chars).

    Account names are global: the subscription id in the hash keeps two deployers of one stack file apart, and
    the name stays the same on every run of one stack in one subscription (nothing random to lose with the state).
    """
    if args.account_name:
        return args.account_name
    seed = f"gb300/{subscription_id.lower()}/{args.cluster_name}/{args.location}"
    digest = hashlib.sha256(seed.encode()).hexdigest()[:8]
    return f"{args.cluster_name.replace('-', '')}st{digest}"


def ip_rules(ranges: tuple[str, ...]) -> list[storage.IPRuleArgs]:
    """Storage IP rules for CIDRs: Azure takes /31 and /32 as single addresses only."""
    rules = []
    for cidr in ranges:
        net = ipaddress.IPv4Network(cidr)
        values = [str(a) for a in net] if net.prefixlen >= 31 else [cidr]
        rules += [storage.IPRuleArgs(i_p_address_or_range=v, action=storage.Action.ALLOW) for v in values]
    return rules


def closed_network() -> tuple[Literal["Disabled"], storage.NetworkRuleSetArgs]:
    """The data account's ``publicNetworkAccess`` and rule set: closed to every public address."""
    return "Disabled", storage.NetworkRuleSetArgs(default_action=storage.DefaultAction.DENY, bypass="None")


def storage_account(
    name: str,
    *,
    account_name: pulumi.Input[str],
    resource_group_name: pulumi.Input[str],
    location: str,
    purpose: str,
    tags: dict[str, str],
    public_network_access: Literal["Enabled", "Disabled"],
    network_rule_set: storage.NetworkRuleSetArgs,
    opts: pulumi.ResourceOptions,
    shared_key_access: bool = False,
    hierarchical_namespace: bool | None = None,
) -> storage.StorageAccount:
    """A gb300 storage account (the data account here, the payload account in :mod:`gb300.components.node_payload`):
    StorageV2, Standard LRS, hot tier, no anonymous blob access, Entra ID by default
    (``defaultToOAuthAuthentication``), TLS 1.2, HTTPS only, no cross-tenant replication, tagged with the cluster's
    tags and ``purpose`` (:func:`gb300.tags.storage_account`). What the accounts differ in is an argument: their
    public endpoint, account keys (off unless ``shared_key_access``) and the hierarchical namespace (None leaves it
    undeclared)."""
    return storage.StorageAccount(
        name,
        account_name=account_name,
        resource_group_name=resource_group_name,
        location=location,
        kind=storage.Kind.STORAGE_V2,
        sku=storage.SkuArgs(name=storage.SkuName.STANDARD_LRS),
        access_tier=storage.AccessTier.HOT,
        is_hns_enabled=hierarchical_namespace,
        allow_blob_public_access=False,
        allow_shared_key_access=shared_key_access,
        default_to_o_auth_authentication=True,
        minimum_tls_version=storage.MinimumTlsVersion.TLS1_2,
        enable_https_traffic_only=True,
        public_network_access=public_network_access,
        network_rule_set=network_rule_set,
        allow_cross_tenant_replication=False,
        tags=gb300_tags.storage_account(tags, purpose),
        opts=opts,
    )


def soft_deleting_blob_service(
    name: str,
    account: storage.StorageAccount,
    resource_group_name: pulumi.Input[str],
    soft_delete_days: int,
    opts: pulumi.ResourceOptions,
    *,
    versioning: bool | None = None,
) -> storage.BlobServiceProperties:
    """An account's blob service with blob and container soft delete for ``soft_delete_days``
    (``gb300:storage.blob.softDeleteDays``, held by the rule blob-soft-delete); ``versioning`` None leaves blob
    versioning undeclared. Containers should depend on it, so none exists before soft delete is on."""
    retention = storage.DeleteRetentionPolicyArgs(enabled=True, days=soft_delete_days)
    return storage.BlobServiceProperties(
        name,
        account_name=account.name,
        resource_group_name=resource_group_name,
        blob_services_name="default",
        delete_retention_policy=retention,
        container_delete_retention_policy=retention,
        is_versioning_enabled=versioning,
        opts=opts,
    )


class BlobStore(pulumi.ComponentResource):
    """A private storage account with containers, private endpoints and the nodes' per-container roles."""

    id: pulumi.Output[str]
    name: pulumi.Output[str]
    blob_endpoint: pulumi.Output[str]
    container_ids: dict[str, pulumi.Output[str]]
    zone_ids: dict[str, pulumi.Output[str]]
    """Private DNS zone id per sub-resource (``blob``, ``dfs``): other accounts' endpoints join these zones."""

    def __init__(self, name: str, args: BlobStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gb300:storage:BlobStore", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        public_access, rule_set = closed_network()
        account = storage_account(
            f"{name}-account",
            account_name=pulumi.Output.from_input(args.subscription_id).apply(lambda sub: account_name(args, sub)),
            resource_group_name=args.resource_group_name,
            location=args.location,
            purpose=gb300_tags.STORAGE_PURPOSE_DATA,
            tags=args.tags,
            public_network_access=public_access,
            network_rule_set=rule_set,
            # Azure's Lustre blob integration requires account key access (amlfs-prerequisites, "Blob integration
            # prerequisites": "Access keys ... set to Enabled"); the nodes still use Entra ID only.
            shared_key_access=args.lustre is not None,
            hierarchical_namespace=args.hierarchical_namespace,
            opts=stateful_options(storage.StorageAccount, self, allow_replace=args.allow_replace),
        )
        service = soft_deleting_blob_service(
            f"{name}-blob-service", account, args.resource_group_name, args.soft_delete_days, child,
            versioning=args.versioning,
        )  # fmt: skip
        if args.versioning:
            self._expire_previous_versions(name, args, account)
        self.container_ids = {}
        for container in args.containers:
            container_opts = stateful_options(storage.BlobContainer, self, allow_replace=args.allow_replace_containers)
            blob_container = storage.BlobContainer(
                f"{name}-{container.name}",
                container_name=container.name,
                account_name=account.name,
                resource_group_name=args.resource_group_name,
                public_access=storage.PublicAccess.NONE,
                # Created after soft delete is on, so a container is never unprotected.
                opts=pulumi.ResourceOptions.merge(container_opts, pulumi.ResourceOptions(depends_on=[service])),
            )
            self.container_ids[container.name] = blob_container.id
            role = ROLE_FOR_ACCESS[container.access]
            roles.assign(
                f"{name}-{container.name}-nodes",
                role=role,
                scope=blob_container.id,
                principal_id=args.node_principal_id,
                parent=self,
            )
        self.lustre_ready: list[pulumi.Resource] = []
        if args.lustre is not None:
            self._lustre_access(name, args, args.lustre, account, service)
        self.zone_ids = {}
        for group, zone_name in storage_facts.private_link_zones().items():
            if group == "dfs" and not args.hierarchical_namespace:
                continue  # only BlobFuse2's adls component (an HNS account) uses dfs; a flat account is reached by blob
            link = private_endpoint(
                f"{name}-{group}",
                PrivateLinkArgs(
                    group=group,
                    zone_name=zone_name,
                    service_id=account.id,
                    resource_group_name=args.resource_group_name,
                    location=args.location,
                    vnet_id=args.vnet_id,
                    subnet_id=args.endpoints_subnet_id,
                    tags=args.tags,
                    hub_zone_id=args.hub_zone_ids.get(group),
                ),
                parent=self,
            )
            self.zone_ids[group] = link.zone_id
            if group == "blob":
                self.lustre_ready += [link.endpoint, link.zone_group]
        self.id = account.id
        self.name = account.name
        self.blob_endpoint = account.primary_endpoints.apply(lambda e: (e.blob if e else None) or "")
        self.register_outputs({"id": account.id, "name": account.name, "containerIds": self.container_ids})

    def _lustre_access(
        self,
        name: str,
        args: BlobStoreArgs,
        lustre: LustreServiceAccess,
        account: storage.StorageAccount,
        service: storage.BlobServiceProperties,
    ) -> None:
        """The Lustre service's logging container and its two roles on the account (Azure Managed Lustre docs,
        amlfs-prerequisites "Access roles for blob integration": Storage Account Contributor and Storage Blob Data
        Contributor for the "HPC Cache Resource Provider" service principal, before the filesystem is created)."""
        logging = storage.BlobContainer(
            f"{name}-{lustre.logging_container}",
            container_name=lustre.logging_container,
            account_name=account.name,
            resource_group_name=args.resource_group_name,
            public_access=storage.PublicAccess.NONE,
            opts=pulumi.ResourceOptions.merge(
                stateful_options(storage.BlobContainer, self, allow_replace=args.allow_replace_containers),
                pulumi.ResourceOptions(depends_on=[service]),
            ),
        )
        self.container_ids[lustre.logging_container] = logging.id
        self.lustre_ready.append(logging)
        for role in LUSTRE_SERVICE_ROLES:
            slug = role.lower().replace(" ", "-")
            self.lustre_ready.append(
                roles.assign(
                    f"{name}-lustre-{slug}",
                    role=role,
                    scope=account.id,
                    principal_id=lustre.principal_id,
                    parent=self,
                )
            )

    def _expire_previous_versions(self, name: str, args: BlobStoreArgs, account: storage.StorageAccount) -> None:
        """The account's lifecycle policy: delete a previous blob version once it is older than
        ``previous_version_retention_days`` (``version.delete.daysAfterCreationGreaterThan``,
        learn.microsoft.com storage/blobs/lifecycle-management-overview); with soft delete on, the deleted version
        stays soft-deleted for ``soft_delete_days`` (storage/blobs/lifecycle-management-policy-delete)."""
        after = storage.DateAfterCreationArgs(days_after_creation_greater_than=args.previous_version_retention_days)
        storage.ManagementPolicy(
            f"{name}-lifecycle",
            account_name=account.name,
            resource_group_name=args.resource_group_name,
            management_policy_name="default",  # an account has one policy, and ARM names it "default"
            policy=storage.ManagementPolicySchemaArgs(
                rules=[
                    storage.ManagementPolicyRuleArgs(
                        name=VERSION_RULE,
                        type=storage.RuleType.LIFECYCLE,
                        enabled=True,
                        definition=storage.ManagementPolicyDefinitionArgs(
                            filters=storage.ManagementPolicyFilterArgs(blob_types=["blockBlob"]),
                            actions=storage.ManagementPolicyActionArgs(
                                version=storage.ManagementPolicyVersionArgs(delete=after)
                            ),
                        ),
                    )
                ]
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
