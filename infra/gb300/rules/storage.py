"""Storage rules: Managed Lustre sizes its SKU allows, Lustre in the GPU pools' zone, private storage accounts.

Written against the pulumi-azure-native shapes: ``storagecache.AmlFilesystem`` (``skuName`` or ``sku.name``,
``storageCapacityTiB``, ``zones``) and ``storage.StorageAccount`` (camelCase inputs). Lustre SKU facts are in
``data/lustre.yaml``, which the storage component reads too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from gb300 import tags as gb300_tags
from gb300.azure import inventory
from gb300.azure.inventory import Resource, items, mapping
from gb300.facts import sizing
from gb300.findings import Level, Report
from gb300.rules.base import UNKNOWN, RuleContext, resource_rule, short, text

AML = "azure-native:storagecache:AmlFilesystem"
STORAGE_ACCOUNT = "azure-native:storage:StorageAccount"
TYPED_VMSS = inventory.TYPED_VMSS


def _lustre_sku(resource: Resource) -> str | None:
    return text(resource.inputs.get("skuName")) or text(mapping(resource.inputs.get("sku")).get("name"))


@resource_rule("lustre-capacity-valid")
def lustre_capacity_valid(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """Managed Lustre capacity meets its SKU's minimum and increment (and notes sizes above the documented maximum)."""
    del ctx
    table = sizing.lustre_skus()
    for fs in inventory.of_type(resources, AML):
        sku_name = _lustre_sku(fs)
        capacity = fs.inputs.get("storageCapacityTiB")
        where = f"Lustre filesystem {short(fs)}"
        if sku_name is None:
            continue
        sku = table.get(sku_name)
        if sku is None:
            yield Report(
                Level.ERROR,
                fs.urn,
                f"{where}: SKU must be one of {', '.join(sorted(table))} (got {sku_name!r}). "
                "Set gb300:storage.lustre.sku.",
            )
            continue
        if not isinstance(capacity, int | float) or isinstance(capacity, bool):
            continue
        tib = float(capacity)
        fix = f"Set gb300:storage.lustre.capacityTiB to a multiple of {sku.increment_tib} TiB, at least {sku.min_tib}."
        if tib < sku.min_tib:
            yield Report(
                Level.ERROR,
                fs.urn,
                f"{where} ({sku.name}): capacity must be at least {sku.min_tib} TiB (got {capacity:g} TiB). {fix}",
            )
        elif tib % sku.increment_tib:
            down = int(tib // sku.increment_tib * sku.increment_tib)
            up = down + sku.increment_tib
            yield Report(
                Level.ERROR,
                fs.urn,
                f"{where} ({sku.name}): capacity must be a multiple of {sku.increment_tib} TiB (got {capacity:g} TiB); "
                f"use {max(down, sku.min_tib)} or {up} TiB. Size cannot change after creation.",
            )
        elif sku.max_tib.value is not None and tib > sku.max_tib.value:
            alt = sku.max_alternative
            larger = f" another gives {alt} TiB;" if alt and alt != sku.max_tib.value else ""
            yield Report(
                Level.INFO,
                fs.urn,
                f"{where} ({sku.name}): {capacity:g} TiB is above the documented maximum of {sku.max_tib.value} TiB "
                f"(one Azure document;{larger} status {sku.max_tib.status}). Larger filesystems need Azure's approval: "
                "confirm with Azure support before deploying.",
            )


def _pool_zones(resources: Sequence[Resource]) -> dict[str, set[str]]:
    """GPU pool -> the zones its scale sets are placed in: their top-level ``zones``, the only placement Azure
    honours (a tag places nothing)."""
    out: dict[str, set[str]] = {}
    for ss in inventory.scale_sets(resources):
        out.setdefault(ss.pool or ss.name, set()).update(ss.zones)
    return out


@resource_rule("zone-consistent")
def zone_consistent(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """Managed Lustre sits in the same availability zone as the GPU pools that mount it."""
    del ctx
    pools = _pool_zones(resources)
    for fs in inventory.of_type(resources, AML):
        fs_zones = {str(z) for z in items(fs.inputs.get("zones"))}
        if not fs_zones:
            continue
        for pool, zones in sorted(pools.items()):
            where = f"Lustre filesystem {short(fs)} (zone {', '.join(sorted(fs_zones))})"
            if not zones:
                yield Report(
                    Level.WARNING,
                    fs.urn,
                    f"{where}: GPU pool {pool}'s scale sets carry no zones, so its VMs may land in another zone and "
                    "cross zones for every read. Set gb300:cluster.zone.",
                )
            elif not zones <= fs_zones:
                yield Report(
                    Level.ERROR,
                    fs.urn,
                    f"{where}: must be in the zone of GPU pool {pool} (got pool zone(s) {', '.join(sorted(zones))}). "
                    "Lustre clients must share its zone; set gb300:cluster.zone once for both.",
                )


def _is_true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _is_false(value: Any) -> bool:
    return value is False or (isinstance(value, str) and value.lower() == "false")


_TLS_ORDER = {"TLS1_0": 0, "TLS1_1": 1, "TLS1_2": 2, "TLS1_3": 3}


@resource_rule("storage-no-public-access", security=True)
def storage_no_public_access(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """Storage accounts allow no public blob access or shared keys, need TLS 1.2, and are closed to the Internet."""
    del ctx
    for account in inventory.of_type(resources, STORAGE_ACCOUNT):
        inputs = account.inputs
        name = text(inputs.get("accountName")) or short(account)
        where = f"storage account {name}"
        public = inputs.get("allowBlobPublicAccess")
        if not _is_false(public):
            got = "unset, which older API versions treat as allowed" if public is None else repr(public)
            yield _error(
                account.urn,
                f"{where}: allowBlobPublicAccess must be false (got {got}); anonymous readers could list checkpoints. "
                "Set allowBlobPublicAccess=False.",
            )
        shared = inputs.get("allowSharedKeyAccess")
        if not _is_false(shared):
            got = "unset, which Azure treats as true" if shared is None else repr(shared)
            yield _error(
                account.urn,
                f"{where}: allowSharedKeyAccess must be false (got {got}); account keys bypass Entra ID and RBAC. "
                "Set allowSharedKeyAccess=False and grant the node identity a Storage Blob Data role.",
            )
        tls = inputs.get("minimumTlsVersion")
        if not isinstance(tls, str) or _TLS_ORDER.get(tls.upper(), -1) < _TLS_ORDER["TLS1_2"]:
            got = "unset, whose default depends on the API version" if tls is None else repr(tls)
            yield _error(
                account.urn,
                f"{where}: minimumTlsVersion must be TLS1_2 or later (got {got}). Set minimumTlsVersion='TLS1_2'.",
            )
        network_access = inputs.get("publicNetworkAccess")
        default_action = text(mapping(inputs.get("networkRuleSet")).get("defaultAction"))
        # The node payload account faces the deploy job on purpose and holds only signed payloads
        # (docs/node-payload.md); every other account must be closed.
        purpose = mapping(inputs.get("tags")).get(gb300_tags.STORAGE_PURPOSE)
        if purpose == gb300_tags.STORAGE_PURPOSE_NODE_PAYLOAD:
            continue
        if str(network_access).lower() != "disabled" and (default_action or "").lower() != "deny":
            got = "unset, which Azure treats as Enabled" if network_access is None else repr(network_access)
            yield Report(
                Level.WARNING,
                account.urn,
                f"{where}: publicNetworkAccess should be Disabled, or networkRuleSet.defaultAction Deny (got {got}, "
                f"default action {default_action or 'unset'}); the endpoint is reachable from the Internet. Reach it "
                "through a private endpoint or a VNet rule.",
            )


def _error(urn: str, message: str) -> Report:
    return Report(Level.ERROR, urn, message)


BLOB_SERVICE = "azure-native:storage:BlobServiceProperties"


@resource_rule("blob-soft-delete")
def blob_soft_delete(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """Every storage account keeps deleted blobs and deleted containers for a while (soft delete on both)."""
    del ctx
    services = inventory.of_type(resources, BLOB_SERVICE)
    for account in inventory.of_type(resources, STORAGE_ACCOUNT):
        name = text(account.inputs.get("accountName")) or short(account)
        # A preview may not know the account name a service names yet (UNKNOWN): it may be this account's.
        mine = [s for s in services if text(s.inputs.get("accountName")) in (name, UNKNOWN)]
        if not mine:
            yield Report(
                Level.ERROR,
                account.urn,
                f"storage account {name}: no blob service properties, so a deleted blob or container is gone at once "
                "(any job with write access can delete checkpoints). Declare storage.BlobServiceProperties with "
                "deleteRetentionPolicy and containerDeleteRetentionPolicy enabled (gb300:storage.blob.softDeleteDays).",
            )
            continue
        for key, what in (("deleteRetentionPolicy", "blob"), ("containerDeleteRetentionPolicy", "container")):
            if not any(mapping(s.inputs.get(key)).get("enabled") in (True, UNKNOWN) for s in mine):
                yield Report(
                    Level.ERROR,
                    account.urn,
                    f"storage account {name}: {key}.enabled must be true (got "
                    f"{mapping(mine[0].inputs.get(key)).get('enabled')!r}); a deleted {what} is gone at once. "
                    "Enable it with a retention in days (gb300:storage.blob.softDeleteDays).",
                )
