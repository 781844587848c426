"""vCPU quota, checked before deployment: what the plan asks for against what Azure grants.

Demand is summed from the scale sets the program registers, per region and quota family, plus the
regional total (``cores``). Azure's side comes from a :class:`QuotaSnapshot`, read from

* a file: the JSON ``az vm list-usage --location L -o json`` prints (a list), or the REST body
  (``{"value": [...]}``) of ``GET .../providers/Microsoft.Compute/locations/{L}/usages``; or
* ``live``: gb300's Azure credential (:mod:`gb300.azure.credential`, the azure-native provider's settings) and
  azure-mgmt-compute (``usage.list`` and ``resource_skus.list``), which also tell whether the size is offered in
  the region and zone, and its capabilities (which capacity reservations can hold it:
  ``capacity-reservation-supported``).

Fetching does I/O and never raises for Azure's answers: a 401/403 or a timeout becomes a region marked
*unverified* (a WARNING finding of the rule). No credential at all is :class:`~gb300.azure.credential.CredentialError`
(the CLI exits 2 and says how to sign in). :mod:`gb300.rules.quota` (rule ``quota-sufficient``) turns
demand + snapshot into findings. Family names match case-insensitively, ignoring spaces. Pools that target a
capacity reservation group skip the cores check: the reservation already consumed the quota.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gb300.azure import answers
from gb300.azure import credential as azure_credential
from gb300.azure.inventory import whole
from gb300.azure.machines import machines
from gb300.errors import ConfigError, Gb300Error
from gb300.facts import catalog
from gb300.io import reader
from gb300.resources import Resource

TOTAL = "cores"  # the usage entry of all vCPUs in a region ("Total Regional vCPUs")
LIVE = "live"


class QuotaFileError(Gb300Error):
    """A saved usage file cannot be read or is not a usage list."""


def normalize(name: str) -> str:
    """Family names compare case-insensitively and ignoring spaces."""
    return "".join(name.split()).lower()


@dataclass(frozen=True)
class Usage:
    """One entry of Azure's usage list: a quota family (or ``cores``), in use and limit."""

    name: str
    localized: str
    current: int
    limit: int


@dataclass(frozen=True)
class Restriction:
    """A Resource SKUs API restriction: ``Location`` or ``Zone``, with its reason code."""

    kind: str
    reason: str
    locations: tuple[str, ...] = ()
    zones: tuple[str, ...] = ()


@dataclass(frozen=True)
class SizeOffer:
    """What the Resource SKUs API says of one VM size in one region."""

    name: str
    family: str
    zones: tuple[str, ...]
    restrictions: tuple[Restriction, ...] = ()
    capabilities: tuple[tuple[str, str], ...] = ()
    """The SKU's ``capabilities`` as Azure lists them (``("CapacityReservationSupported", "True")``, ...)."""

    def capability(self, name: str) -> str | None:
        """The value of capability ``name`` (compared case-insensitively), or None when Azure lists none."""
        return next((v for n, v in self.capabilities if n.lower() == name.lower()), None)


@dataclass(frozen=True)
class RegionQuota:
    """Azure's answer for one region, or why there is none (``unverified``)."""

    region: str
    usages: tuple[Usage, ...] = ()
    offers: Mapping[str, SizeOffer] | None = None  # None: not asked (a file source)
    unverified: str | None = None

    def usage(self, family: str) -> Usage | None:
        key = normalize(family)
        return next((u for u in self.usages if key in (normalize(u.name), normalize(u.localized))), None)


@dataclass(frozen=True)
class QuotaSnapshot:
    """Azure's quota per region, from one source (``live`` or a file path)."""

    source: str
    regions: Mapping[str, RegionQuota] = field(default_factory=dict)
    subscription: azure_credential.Subscription | None = None  # live: the subscription asked (None: none found)


@dataclass(frozen=True)
class Demand:
    """vCPUs the plan needs of one quota family in one region."""

    region: str
    family: str
    family_status: str
    vcpus: int
    sizes: tuple[str, ...]
    zones: tuple[str, ...]
    pools: tuple[str, ...]
    urn: str


@dataclass(frozen=True)
class Reserved:
    """A pool whose scale sets draw on a capacity reservation group (cores check skipped)."""

    pool: str
    urn: str
    group: str


def demand(resources: Sequence[Resource]) -> tuple[list[Demand], list[Reserved]]:
    """vCPUs per (region, family) from the registered scale sets and VMs, and the pools a reservation covers."""
    cat = catalog.load()
    acc: dict[tuple[str, str], dict[str, Any]] = {}
    reserved: dict[str, Reserved] = {}
    for m in machines(resources):
        sku = cat.skus.get(m.size)
        if sku is None or m.location is None:
            continue
        owner = m.pool or m.name
        if m.capacity_reservation_group:
            reserved.setdefault(owner, Reserved(owner, m.urn, m.capacity_reservation_group))
            continue
        entry = acc.setdefault(
            (m.location, sku.quota_family.value),
            {
                "vcpus": 0,
                "sizes": set(),
                "zones": set(),
                "pools": set(),
                "urn": m.urn,
                "status": sku.quota_family.status,
            },
        )
        entry["vcpus"] += m.count * sku.vcpus
        entry["sizes"].add(sku.name)
        entry["zones"].update(m.zones)
        entry["pools"].add(owner)
    out = [
        Demand(
            region,
            family,
            e["status"],
            e["vcpus"],
            tuple(sorted(e["sizes"])),
            tuple(sorted(e["zones"])),
            tuple(sorted(e["pools"])),
            e["urn"],
        )
        for (region, family), e in sorted(acc.items())
    ]
    return out, sorted(reserved.values(), key=lambda r: r.pool)


# ---------------------------------------------------------------------------------------------------------
# Sources.


def parse_usages(doc: Any) -> list[Usage]:
    """Usages from ``az vm list-usage -o json`` (a list) or the REST body (``{"value": [...]}``)."""
    entries = doc.get("value") if isinstance(doc, Mapping) else doc
    if not isinstance(entries, list):
        raise QuotaFileError("must be a list of usages (az vm list-usage -o json) or a REST body with 'value'")
    out = []
    for i, entry in enumerate(entries):
        body: Mapping[str, Any] = entry if isinstance(entry, Mapping) else {}
        raw_name = body.get("name")
        name: Mapping[str, Any] = raw_name if isinstance(raw_name, Mapping) else {}
        value, localized = name.get("value"), name.get("localizedValue")
        current, limit = _as_int(body.get("currentValue")), _as_int(body.get("limit"))
        if not isinstance(value, str) or current is None or limit is None:
            raise QuotaFileError(f"entry {i} must have name.value, currentValue and limit (got {_clip(entry)})")
        out.append(Usage(value, localized if isinstance(localized, str) else value, current, limit))
    return out


def _as_int(value: Any) -> int | None:
    """A count as Azure prints it: a whole number, or its text (table transforms print strings)."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return whole(value)


def _clip(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def read_usage_file(path: Path) -> list[Usage]:
    """Read a saved usage list; raises :class:`QuotaFileError` naming the file."""
    try:
        doc = reader.load_json(path, reader.QUOTA)
    except ConfigError as exc:
        raise QuotaFileError(f"quota file {exc}") from None
    try:
        return parse_usages(doc)
    except QuotaFileError as exc:
        raise QuotaFileError(f"quota file {path}: {exc}") from None


def regions_of(resources: Sequence[Resource]) -> dict[str, set[str]]:
    """Region -> zones the plan's scale sets ask for."""
    out: dict[str, set[str]] = defaultdict(set)
    for d in demand(resources)[0]:
        out[d.region].update(d.zones)
    return dict(out)


def from_file(path: Path, regions: Iterable[str]) -> QuotaSnapshot:
    """A snapshot from a saved usage list. The file names no region: it stands for every region of the plan."""
    try:
        usages = tuple(read_usage_file(path))
    except QuotaFileError as exc:
        return QuotaSnapshot(str(path), {r: RegionQuota(r, unverified=str(exc)) for r in regions})
    return QuotaSnapshot(str(path), {r: RegionQuota(r, usages) for r in regions})


def _offer(sku: Any) -> SizeOffer:
    zones: set[str] = set()
    for info in getattr(sku, "location_info", None) or []:
        zones.update(str(z) for z in getattr(info, "zones", None) or [])
    restrictions = []
    for r in getattr(sku, "restrictions", None) or []:
        info = getattr(r, "restriction_info", None)
        restrictions.append(
            Restriction(
                kind=_text(getattr(r, "type", None)),
                reason=_text(getattr(r, "reason_code", None)),
                locations=tuple(str(x).lower() for x in (getattr(info, "locations", None) or [])),
                zones=tuple(str(x) for x in (getattr(info, "zones", None) or [])),
            )
        )
    capabilities = tuple(
        (str(c.name), str(getattr(c, "value", "") or ""))
        for c in getattr(sku, "capabilities", None) or []
        if getattr(c, "name", None)
    )
    family = str(getattr(sku, "family", "") or "")
    return SizeOffer(str(sku.name), family, tuple(sorted(zones)), tuple(restrictions), capabilities)


def _text(value: Any) -> str:
    """An SDK enum or string as its wire text ('Location', not 'ResourceSkuRestrictionsType.LOCATION')."""
    return str(getattr(value, "value", value) or "")


def fetch_live(
    regions: Iterable[str],
    *,
    subscription_id: str | None = None,
    credential: Any = None,
    timeout_s: float = 20.0,
    **client_kwargs: Any,
) -> QuotaSnapshot:
    """Ask Azure (usage and resource SKUs per region). Permission errors and timeouts mark regions unverified.

    Without ``credential``, gb300's own (:func:`gb300.azure.credential.signed_in`): none raises ``CredentialError``.
    """
    from azure.core.exceptions import AzureError  # noqa: PLC0415 - the Azure SDK loads only when asked to go live
    from azure.mgmt.compute import ComputeManagementClient  # noqa: PLC0415

    regions = list(regions)
    if credential is None:
        credential = azure_credential.signed_in()
    where = azure_credential.subscription(subscription_id)
    if where is None:
        why = f"no subscription id: {azure_credential.SUBSCRIPTION_HINT}"
        return QuotaSnapshot(LIVE, {r: RegionQuota(r, unverified=why) for r in regions})
    sub = where.id
    client_kwargs.setdefault("connection_timeout", timeout_s)
    client_kwargs.setdefault("read_timeout", timeout_s)
    client_kwargs.setdefault("retry_total", 1)
    client = ComputeManagementClient(credential, sub, **client_kwargs)
    out: dict[str, RegionQuota] = {}
    for region in regions:
        try:
            usages = tuple(
                Usage(
                    str(u.name.value),
                    str(u.name.localized_value or u.name.value),
                    int(u.current_value),
                    int(u.limit),
                )
                for u in client.usage.list(region)
            )
            offers = {
                str(s.name): _offer(s)
                for s in client.resource_skus.list(filter=f"location eq '{region}'")
                if _text(getattr(s, "resource_type", None)).lower() == "virtualmachines"
            }
            out[region] = RegionQuota(region, usages, offers)
        except AzureError as exc:
            reads = "Microsoft.Compute usages (needs Reader on the subscription)"
            out[region] = RegionQuota(region, unverified=answers.unanswered(exc, reads))
    return QuotaSnapshot(LIVE, out, where)


def fetch(source: str, resources: Sequence[Resource], *, base: Path | None = None, **live_kwargs: Any) -> QuotaSnapshot:
    """A snapshot for the plan's regions from ``source``: ``live`` or a file path (relative to ``base``)."""
    regions = sorted(regions_of(resources))
    if source.strip().lower() == LIVE:
        return fetch_live(regions, **live_kwargs)
    path = Path(source).expanduser()
    if not path.is_absolute() and base is not None and not path.exists():
        path = base / path
    return from_file(path, regions)
