"""Ids of Azure resources a landing zone's hub owns and gb300 only uses: the VNet it carves its subnets in, the
``privatelink.*`` DNS zones its private endpoints join, the Log Analytics and Azure Monitor workspaces its telemetry
goes to (docs/landing-zone.md).

An id is parsed, never guessed: ``/subscriptions/<guid>/resourceGroups/<group>/providers/<namespace>/<type>/<name>``,
with the namespace and type the key expects (compared without case, as ARM compares them). Resource group names
follow Azure's rule (letters, digits, ``_ - . ( )``, up to 90, not ending in a period; "Naming rules and
restrictions for Azure resources", Microsoft.Resources/resourcegroups).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from gb300.facts import storage_facts

VNET = ("Microsoft.Network", "virtualNetworks", "a virtual network")
DNS_ZONE = ("Microsoft.Network", "privateDnsZones", "a private DNS zone")
LOG_ANALYTICS = ("Microsoft.OperationalInsights", "workspaces", "a Log Analytics workspace")
MONITOR_WORKSPACE = ("Microsoft.Monitor", "accounts", "an Azure Monitor workspace")

VAULT_ZONE = "privatelink.vaultcore.azure.net"
"""Azure's private DNS zone of a Key Vault's ``vault`` sub-resource (learn.microsoft.com private-link/
private-endpoint-dns, "Security": Azure Key Vault)."""

_ID = re.compile(
    r"/subscriptions/(?P<sub>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
    r"/resourceGroups/(?P<rg>[-\w.()]{0,89}[-\w()])"
    r"/providers/(?P<ns>[A-Za-z.]+)/(?P<type>[A-Za-z]+)/(?P<name>[A-Za-z0-9][-A-Za-z0-9_.]{0,259})",
)


@dataclass(frozen=True)
class ResourceId:
    """A parsed top-level resource id."""

    subscription: str
    resource_group: str
    name: str


def zone_names() -> dict[str, str]:
    """Private endpoint sub-resource (``blob``, ``dfs``, ``vault``) -> the private DNS zone name it resolves in."""
    return {**storage_facts.private_link_zones(), "vault": VAULT_ZONE}


def parse(value: str) -> ResourceId:
    """The parts of an id already checked by :func:`check`."""
    match = _ID.fullmatch(value)
    if match is None:  # pragma: no cover - a config value has passed check()
        raise ValueError(f"not an Azure resource id: {value!r}")
    return ResourceId(match["sub"].lower(), match["rg"], match["name"])


def check(kind: tuple[str, str, str], zone: str | None = None) -> Callable[[str], str]:
    """A field check: ``value`` is the id of a resource of ``kind`` (and, for a DNS zone, of the zone ``zone``)."""
    namespace, collection, what = kind

    def _check(value: str) -> str:
        shape = f"/subscriptions/<subscription-guid>/resourceGroups/<group>/providers/{namespace}/{collection}/<name>"
        match = _ID.fullmatch(value)
        if match is None or (match["ns"].lower(), match["type"].lower()) != (namespace.lower(), collection.lower()):
            shown = value if len(value) <= 200 else value[:197] + "..."
            raise ValueError(f"must be the id of {what}, {shape} (got {shown!r})")
        if zone is not None and match["name"].lower() != zone:
            raise ValueError(f"must be the id of the private DNS zone {zone} (got a zone named {match['name']!r})")
        return value

    return _check
