"""``data/storage.yaml``: which stored data dies with which resource change, private link zones, Lustre's network."""

from __future__ import annotations

import functools
from typing import Any

from gb300.errors import DataError
from gb300.facts.loader import DATA_DIR, data


@functools.cache
def load() -> dict[str, Any]:
    """The storage facts, read once per process."""
    return data("storage.yaml")


def stateful() -> dict[str, Any]:
    """Stateful resource types -> ``{key, what, replaceOn, identifiedBy, source, status}``."""
    result: dict[str, Any] = load()["stateful"]
    return result


def lustre_network_rules() -> list[dict[str, str]]:
    """NSG rules the Azure Managed Lustre subnet needs beyond Azure's defaults (``lustreNetwork.rules``)."""
    rules: list[dict[str, str]] = load()["lustreNetwork"]["rules"]
    return rules


def lustre_root_squash() -> dict[str, Any]:
    """``lustreRootSquash``: the squash mode and the uid and gid root on an untrusted client becomes."""
    result: dict[str, Any] = load()["lustreRootSquash"]
    return result


def private_link_zones() -> dict[str, str]:
    """Private endpoint sub-resource (``blob``, ``dfs``) -> private DNS zone name."""
    return {k: str(v) for k, v in load()["privateLink"].items() if k != "source"}


def key_vault_soft_delete_days() -> int:
    """Days a deleted Key Vault stays recoverable (``keyVaultSoftDelete.days``), within the range Key Vault takes."""
    facts = load()["keyVaultSoftDelete"]
    days, low, high = int(facts["days"]), int(facts["minDays"]), int(facts["maxDays"])
    if not low <= days <= high:
        msg = f"{DATA_DIR / 'storage.yaml'}: keyVaultSoftDelete.days must be from {low} to {high} (got {days})"
        raise DataError(msg)
    return days


def blob_endpoint_suffix() -> str:
    """The Blob service's DNS suffix (``core.windows.net``): accounts are ``<name>.blob.<suffix>``."""
    return str(load()["blobEndpoint"]["suffix"])


def blob_account_url(account: str) -> str:
    """The public Blob endpoint of ``account``, without a trailing slash."""
    return f"https://{account}.blob.{blob_endpoint_suffix()}"


@functools.cache
def _lustre_subnet_table() -> tuple[tuple[float, int], ...]:
    raw: dict[str, Any] = data("lustre.yaml")["subnetPrefix"]
    return tuple((float(row["maxTiB"]), int(row["prefix"])) for row in raw["table"])


def lustre_subnet_prefix(capacity_tib: float) -> int | None:
    """The subnet prefix Azure documents for a Lustre filesystem of ``capacity_tib`` (None: beyond the table)."""
    for max_tib, prefix in _lustre_subnet_table():
        if capacity_tib <= max_tib:
            return prefix
    return None
