"""Shared storage: a private storage account for datasets and checkpoints, and what gb300's accounts share.

The account and the Azure Managed Lustre filesystem (:mod:`gb300.components.lustre`) hold data that outlives the
cluster, so both are protected (``protect`` and ``retain_on_delete``) and mark the inputs whose change means
replacement (``replace_on_changes``, from ``data/storage.yaml``; :func:`stateful_options`): a new Lustre size or
SKU then fails ``pulumi up`` on the protection instead of silently making an empty filesystem. A stack lifts both
guards for one store only through ``gb300:storage.allowReplace``. See docs/azure-resources.md for why the account
has no lock (the filesystem has one).

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
from dataclasses import dataclass
from typing import Literal

import pulumi
from pulumi_azure_native import storage

from gb300 import tags as gb300_tags
from gb300.components.private_link import PrivateLinkArgs, private_endpoint
from gb300.components.scope import ClusterScope
from gb300.facts import roles, storage_facts

ROLE_FOR_ACCESS = {"read": "Storage Blob Data Reader", "readWrite": "Storage Blob Data Contributor"}
VERSION_RULE = "version-delete-after-days"
LUSTRE_SERVICE_ROLES = ("Storage Account Contributor", "Storage Blob Data Contributor")


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


@dataclass(frozen=True)
class ContainerAccess:
    """One container and what the nodes may do in it."""

    name: str
    access: Literal["read", "readWrite"]


@dataclass(frozen=True)
class BlobStoreArgs:
    """Inputs of :class:`BlobStore`: the scope (with its network: the endpoints go in its endpoints subnet, and join
    the hub's private DNS zones when the scope names them) and the account's settings."""

    scope: ClusterScope
    containers: list[ContainerAccess]
    node_principal_id: pulumi.Input[str]
    soft_delete_days: int
    hierarchical_namespace: bool = False
    versioning: bool = True
    previous_version_retention_days: int = 7
    """Days before the lifecycle policy deletes a previous blob version (with ``versioning`` only)."""
    allow_replace: bool = False
    allow_replace_containers: bool = False
    account_name: str | None = None  # gb300:storage.blob.accountName; None: see account_name()
    lustre: LustreServiceAccess | None = None
    """What the Lustre filesystem's tie to Blob needs of the account; None: no tie."""


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
    cluster = args.scope.cluster_name
    seed = f"gb300/{subscription_id.lower()}/{cluster}/{args.scope.location}"
    digest = hashlib.sha256(seed.encode()).hexdigest()[:8]
    return f"{cluster.replace('-', '')}st{digest}"


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
    scope: ClusterScope,
    purpose: str,
    public_network_access: Literal["Enabled", "Disabled"],
    network_rule_set: storage.NetworkRuleSetArgs,
    opts: pulumi.ResourceOptions,
    shared_key_access: bool = False,
    hierarchical_namespace: bool | None = None,
) -> storage.StorageAccount:
    """A gb300 storage account (the data account here, the payload account in :mod:`gb300.components.node_payload`):
    StorageV2, Standard LRS, hot tier, no anonymous blob access, Entra ID by default
    (``defaultToOAuthAuthentication``), TLS 1.2, HTTPS only, no cross-tenant replication, in the scope's resource
    group and location, tagged with its tags and ``purpose`` (:func:`gb300.tags.storage_account`). What the
    accounts differ in is an argument: their public endpoint, account keys (off unless ``shared_key_access``) and
    the hierarchical namespace (None leaves it undeclared)."""
    return storage.StorageAccount(
        name,
        account_name=account_name,
        resource_group_name=scope.resource_group_name,
        location=scope.location,
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
        tags=gb300_tags.storage_account(scope.tags, purpose),
        opts=opts,
    )


def soft_deleting_blob_service(
    name: str,
    account: storage.StorageAccount,
    scope: ClusterScope,
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
        resource_group_name=scope.resource_group_name,
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
        scope = args.scope
        public_access, rule_set = closed_network()
        account = storage_account(
            f"{name}-account",
            account_name=pulumi.Output.from_input(scope.subscription_id).apply(lambda sub: account_name(args, sub)),
            scope=scope,
            purpose=gb300_tags.STORAGE_PURPOSE_DATA,
            public_network_access=public_access,
            network_rule_set=rule_set,
            # Azure's Lustre blob integration requires account key access (amlfs-prerequisites, "Blob integration
            # prerequisites": "Access keys ... set to Enabled"); the nodes still use Entra ID only.
            shared_key_access=args.lustre is not None,
            hierarchical_namespace=args.hierarchical_namespace,
            opts=stateful_options(storage.StorageAccount, self, allow_replace=args.allow_replace),
        )
        service = soft_deleting_blob_service(
            f"{name}-blob-service", account, scope, args.soft_delete_days, pulumi.ResourceOptions(parent=self),
            versioning=args.versioning,
        )  # fmt: skip
        if args.versioning:
            self._expire_previous_versions(name, args, account)
        self.container_ids = {}
        for container in args.containers:
            self._container(name, args, container, account, service)
        self.lustre_ready: list[pulumi.Resource] = []
        if args.lustre is not None:
            self._lustre_access(name, args, args.lustre, account, service)
        self.zone_ids = {}
        self._endpoints(name, args, account)
        self.id = account.id
        self.name = account.name
        self.blob_endpoint = account.primary_endpoints.apply(lambda e: (e.blob if e else None) or "")
        self.register_outputs({"id": account.id, "name": account.name, "containerIds": self.container_ids})

    def _container(
        self,
        name: str,
        args: BlobStoreArgs,
        container: ContainerAccess,
        account: storage.StorageAccount,
        service: storage.BlobServiceProperties,
    ) -> None:
        """One data container and the nodes' role on it."""
        container_opts = stateful_options(storage.BlobContainer, self, allow_replace=args.allow_replace_containers)
        blob_container = storage.BlobContainer(
            f"{name}-{container.name}",
            container_name=container.name,
            account_name=account.name,
            resource_group_name=args.scope.resource_group_name,
            public_access=storage.PublicAccess.NONE,
            # Created after soft delete is on, so a container is never unprotected.
            opts=pulumi.ResourceOptions.merge(container_opts, pulumi.ResourceOptions(depends_on=[service])),
        )
        self.container_ids[container.name] = blob_container.id
        roles.assign(
            f"{name}-{container.name}-nodes",
            role=ROLE_FOR_ACCESS[container.access],
            scope=blob_container.id,
            principal_id=args.node_principal_id,
            parent=self,
        )

    def _endpoints(self, name: str, args: BlobStoreArgs, account: storage.StorageAccount) -> None:
        """The account's private endpoints (blob; dfs too on a hierarchical namespace) and their DNS."""
        for group, zone_name in storage_facts.private_link_zones().items():
            if group == "dfs" and not args.hierarchical_namespace:
                continue  # only BlobFuse2's adls component (an HNS account) uses dfs; a flat account is reached by blob
            link = private_endpoint(
                f"{name}-{group}",
                PrivateLinkArgs(group=group, zone_name=zone_name, service_id=account.id, scope=args.scope),
                parent=self,
            )
            self.zone_ids[group] = link.zone_id
            if group == "blob":
                self.lustre_ready += [link.endpoint, link.zone_group]

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
            resource_group_name=args.scope.resource_group_name,
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
            resource_group_name=args.scope.resource_group_name,
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
