"""Storage rules: Managed Lustre sizes its SKU allows, Lustre in the GPU pools' zone and squashing root outside
the cluster, private storage accounts.

Written against the pulumi-azure-native shapes: ``storagecache.AmlFilesystem`` (``skuName`` or ``sku.name``,
``storageCapacityTiB``, ``zones``) and ``storage.StorageAccount`` (camelCase inputs). Lustre SKU facts are in
``data/lustre.yaml``, which the storage component reads too.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gb300 import tags as gb300_tags
from gb300.azure import inventory
from gb300.azure.inventory import items, mapping
from gb300.config import netplan
from gb300.facts import sizing
from gb300.findings import Level, Report
from gb300.resources import UNKNOWN, Resource
from gb300.rules.base import RuleContext, resource_rule, short, text
from gb300.rules.security import united

AML = "azure-native:storagecache:AmlFilesystem"
STORAGE_ACCOUNT = "azure-native:storage:StorageAccount"
TYPED_VMSS = inventory.TYPED_VMSS
SUBNET = "azure-native:network:Subnet"


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


def _tied_to_lustre(resources: Sequence[Resource], account_name: str) -> bool:
    """Whether an Azure Managed Lustre filesystem imports from and exports to a container of ``account_name``
    (its ``hsm.settings.container``; a value a preview does not know yet may be this account's)."""
    for fs in inventory.of_type(resources, AML):
        container = text(inventory.dig(fs.inputs, "hsm", "settings", "container"))
        if container == UNKNOWN or (container and f"/storageaccounts/{account_name.lower()}/" in container.lower()):
            return True
    return False


@resource_rule("storage-no-public-access", security=True)
def storage_no_public_access(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """Storage accounts allow no public blob access or shared keys, need TLS 1.2, and are closed to the Internet.

    An account holding data (its storage purpose tag says ``data``, or it has none) with any public reach (default
    action Allow, IP rules, bypass, resource instance rules) is an error; an account tagged ``node-payload`` may be
    reachable with shared keys off and no anonymous access, reported as an info with the reason.

    One exception, because Azure requires it: an account an Azure Managed Lustre filesystem is tied to must allow
    account key access (amlfs-prerequisites, "Blob integration prerequisites"): an info finding says so, so the
    trade is visible in every plan without failing a stack that chose it (gb300:storage.lustre.blobIntegration).
    """
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
        if _is_true(shared) and _tied_to_lustre(resources, name):
            yield Report(
                Level.INFO,
                account.urn,
                f"{where}: allowSharedKeyAccess is true because the Lustre filesystem is tied to it, and Azure's blob "
                "integration requires account key access (the Lustre service signs its own SAS tokens); the nodes "
                "still use Entra ID only. The stack opted in (gb300:storage.lustre.blobIntegration.enabled: true); to "
                "keep keys off, remove that key before the filesystem is first deployed (no tie is the default). A "
                "deployed filesystem keeps its tie: removing it replaces the filesystem, which `gb300 plan --state "
                "FILE` (FILE from `pulumi stack export`) reports as storage-data-loss "
                "(docs/storage.md#tying-a-deployed-filesystem-to-blob).",
            )
        elif not _is_false(shared):
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
        yield from _public_network(account, where)


# What opens the account's public endpoint, besides the default action and the IP rules: ``bypass`` values other
# than None let Azure's trusted services (AzureServices) or anyone reading logs and metrics (Logging, Metrics) in.
_CLOSED_BYPASS = frozenset({"", "none"})


def public_reach(inputs: Mapping[str, Any]) -> list[str]:
    """What reaches a storage account's public endpoint, one phrase each; empty when nothing does.

    ``publicNetworkAccess: Disabled`` closes it whatever the rule set says (Azure then ignores IP rules and
    exceptions). Otherwise a default action other than Deny (unset is Allow) admits every address; IP rules are
    united as address sets (:func:`gb300.rules.security.united`, the SSH rule's union); ``bypass`` and
    ``resourceAccessRules`` admit Azure services and resource instances by name. VNet rules reach it only from a
    subnet, so they are not public.
    """
    if str(inputs.get("publicNetworkAccess")).lower() == "disabled":
        return []
    rule_set = mapping(inputs.get("networkRuleSet"))
    reach: list[str] = []
    default_action = text(rule_set.get("defaultAction"))
    if (default_action or "").lower() != "deny":
        reach.append(f"networkRuleSet.defaultAction {default_action or 'unset (Allow)'}: every address")
    ranges = [
        text(mapping(r).get("iPAddressOrRange")) or text(mapping(r).get("value")) or ""
        for r in items(rule_set.get("ipRules"))
        if str(mapping(r).get("action", "Allow")).lower() == "allow"
    ]
    addresses = united(r for r in ranges if r)
    if not addresses.empty:
        reach.append(f"ipRules admitting {addresses.describe()}")
    bypass = [b.strip() for b in str(rule_set.get("bypass") or "").split(",")]
    opened = [b for b in bypass if b.lower() not in _CLOSED_BYPASS]
    if opened:
        reach.append(f"bypass {', '.join(opened)}")
    instances = items(rule_set.get("resourceAccessRules"))
    if instances:
        ids = sorted({text(mapping(r).get("resourceId")) or "?" for r in instances})
        reach.append(f"resourceAccessRules for {len(instances)} resource instance(s) ({', '.join(ids)})")
    return reach


def _public_network(account: Resource, where: str) -> Iterator[Report]:
    inputs = account.inputs
    reach = public_reach(inputs)
    if not reach:
        return
    network_access = inputs.get("publicNetworkAccess")
    state = "unset, which Azure treats as Enabled" if network_access is None else repr(network_access)
    got = f"publicNetworkAccess {state} with {'; '.join(reach)}"
    purpose = gb300_tags.storage_purpose_of(inputs.get("tags"))
    if purpose != gb300_tags.STORAGE_PURPOSE_NODE_PAYLOAD:
        holds = f"tag {gb300_tags.STORAGE_PURPOSE}: {purpose}" if purpose else f"no {gb300_tags.STORAGE_PURPOSE} tag"
        yield _error(
            account.urn,
            f"{where}: holds data ({holds}), so its public endpoint must be closed: publicNetworkAccess Disabled, or "
            f"defaultAction Deny with no IP rules, bypass None and no resourceAccessRules (got {got}). Reach it "
            "through its private endpoint; node payloads go to the payload account, which gb300 keeps apart "
            "(docs/node-payload.md).",
        )
        return
    keyless = _is_false(inputs.get("allowSharedKeyAccess"))
    private_blobs = _is_false(inputs.get("allowBlobPublicAccess"))
    if keyless and private_blobs:
        yield Report(
            Level.INFO,
            account.urn,
            f"{where}: public network access allowed ({got}): it holds only signed node payloads (tag "
            f"{gb300_tags.STORAGE_PURPOSE}: {gb300_tags.STORAGE_PURPOSE_NODE_PAYLOAD}), no data and no secrets, "
            "and with shared keys off and no anonymous access every request needs an Entra ID token.",
        )
        return
    missing = [k for k, ok in (("allowSharedKeyAccess", keyless), ("allowBlobPublicAccess", private_blobs)) if not ok]
    yield _error(
        account.urn,
        f"{where}: a node payload account may be reachable from the Internet only with allowSharedKeyAccess and "
        f"allowBlobPublicAccess false (got {', '.join(missing)} not false; {got}). Set both to false, or close "
        "its public endpoint.",
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


def _nid_span(nid: str) -> tuple[ipaddress.IPv4Address, ipaddress.IPv4Address] | None:
    """The first and last address of a Lustre NID or NID range (``10.0.[0-127].[0-255]@tcp``); None when it is
    not that form (a list ``[1,3]``, a step, another network type are not something gb300 writes)."""
    address, at, _lnet = nid.strip().partition("@")
    parts = address.split(".")
    if not at or len(parts) != 4:
        return None
    lows: list[int] = []
    highs: list[int] = []
    for part in parts:
        match = re.fullmatch(r"(\d{1,3})|\[(\d{1,3})-(\d{1,3})\]", part)
        if match is None:
            return None
        low, high = (match[1], match[1]) if match[1] is not None else (match[2], match[3])
        if not int(low) <= int(high) <= 255:
            return None
        lows.append(int(low))
        highs.append(int(high))
    first = ipaddress.IPv4Address(".".join(map(str, lows)))
    last = ipaddress.IPv4Address(".".join(map(str, highs)))
    return first, last


@resource_rule("lustre-root-squash", security=True)
def lustre_root_squash(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """Managed Lustre squashes root on every client outside the cluster's GPU and head subnets."""
    del ctx
    trusted: list[ipaddress.IPv4Network] = []
    for s in inventory.of_type(resources, SUBNET):
        if s.inputs.get("subnetName") in netplan.LUSTRE_CLIENT_ROLES:
            try:
                trusted.append(ipaddress.IPv4Network(str(s.inputs.get("addressPrefix")), strict=False))
            except ValueError:
                continue  # not an IPv4 prefix (unknown in a preview): trusts nothing
    for fs in inventory.of_type(resources, AML):
        where = f"Lustre filesystem {short(fs)}"
        squash = mapping(fs.inputs.get("rootSquashSettings"))
        mode = text(squash.get("mode"))
        if mode == UNKNOWN:
            continue
        if mode is None or mode == "None":
            yield Report(
                Level.ERROR,
                fs.urn,
                f"{where}: rootSquashSettings.mode must be RootOnly or All (got {mode or 'nothing'}): root on any "
                "VM that reaches the filesystem (a peered network, a jump box) reads and writes every user's files. "
                "The storage component sets it; restore it.",
            )
            continue
        if squash.get("squashUID") in (0, "0") or squash.get("squashGID") in (0, "0"):
            yield Report(Level.ERROR, fs.urn, f"{where}: root must be squashed to a uid and gid other than 0.")
        for nid in str(squash.get("noSquashNidLists") or "").split(";"):
            if not nid.strip():
                continue
            span = _nid_span(nid)
            inside = span is not None and any(span[0] in net and span[1] in net for net in trusted)
            if not inside:
                yield Report(
                    Level.ERROR,
                    fs.urn,
                    f"{where}: trusted clients (noSquashNidLists) must lie in the GPU or head subnets "
                    f"(got {nid.strip()!r}): root there is not squashed.",
                )
