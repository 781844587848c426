"""``quota-sufficient``: the plan's vCPUs fit Azure's quota per region and family (data: :mod:`gb300.azure.quota`).

:mod:`gb300.azure.quota` sums the demand from the registered scale sets and reads Azure's side (a saved usage file or
``live``); the checks here are pure and turn demand + snapshot into findings. Family names match
case-insensitively, ignoring spaces. Pools that target a capacity reservation group skip the cores check: the
reservation already consumed the quota.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from gb300.azure.quota import TOTAL, Demand, QuotaSnapshot, RegionQuota, Usage, demand, normalize
from gb300.findings import Level, Report
from gb300.resources import Resource
from gb300.rules.base import RuleContext, resource_rule

CONFIG_PATH = "gb300:policy.quota"  # where region-wide findings point: the quota source ...
REGION_PATH = "gb300:cluster.location"  # ... and the region itself


@resource_rule("quota-sufficient")
def quota_sufficient(resources: Sequence[Resource], ctx: RuleContext) -> list[Report]:
    """The vCPUs of every quota family (and the regional total) fit Azure's quota; the size is offered and allowed."""
    return findings(resources, ctx.quota)


def _usage_check(region: str, family: str, requested: int, usage: Usage, *, urn: str, source: str) -> Report | None:
    available = usage.limit - usage.current
    if requested <= available:
        return None
    return Report(
        Level.ERROR,
        urn,
        f"quota {family} in {region}: requested {requested:,} vCPUs, in use {usage.current:,}, limit {usage.limit:,} "
        f"({max(available, 0):,} free; from {source}). Ask Azure to raise {usage.localized} in {region} to at least "
        f"{usage.current + requested:,} (Portal: Quotas > Compute, or a support request) before deploying.",
    )


def _offer_findings(d: Demand, region: RegionQuota) -> list[Report]:
    out: list[Report] = []
    if region.offers is None:
        return out
    for size in d.sizes:
        offer = region.offers.get(size)
        if offer is None:
            out.append(
                Report(
                    Level.ERROR,
                    d.urn,
                    f"size {size} is not offered in {d.region} to this subscription (Resource SKUs API). Choose a "
                    f"region that offers it (az vm list-skus --size {size} --all -o table) or ask Azure for access.",
                )
            )
            continue
        for r in offer.restrictions:
            if r.kind.lower() == "location" and (not r.locations or d.region in r.locations):
                out.append(
                    Report(
                        Level.ERROR,
                        d.urn,
                        f"size {size} is restricted in {d.region} for this subscription "
                        f"({r.reason or 'no reason given'}). "
                        "Ask Azure to enable the size for the subscription, or choose another region.",
                    )
                )
            elif r.kind.lower() == "zone" and set(d.zones) & set(r.zones):
                blocked = ", ".join(sorted(set(d.zones) & set(r.zones)))
                out.append(
                    Report(
                        Level.ERROR,
                        d.urn,
                        f"size {size} is restricted in {d.region} zone(s) {blocked} "
                        f"({r.reason or 'no reason given'}). Set gb300:cluster.zone to one of "
                        f"{', '.join(z for z in offer.zones if z not in r.zones) or 'none offered'}, or ask Azure.",
                    )
                )
        missing = [z for z in d.zones if offer.zones and z not in offer.zones]
        if missing:
            out.append(
                Report(
                    Level.ERROR,
                    d.urn,
                    f"size {size} is not offered in {d.region} zone {', '.join(missing)} (offered in zones "
                    f"{', '.join(offer.zones)}). Set gb300:cluster.zone to one of those.",
                )
            )
        if offer.family and normalize(offer.family) != normalize(d.family):
            out.append(
                Report(
                    Level.INFO,
                    d.urn,
                    f"size {size}: Azure names its quota family {offer.family}, the catalog {d.family}; gb300 used "
                    "Azure's. Update quotaFamily in infra/gb300/data/skus.yaml.",
                )
            )
    return out


def _family_of(d: Demand, region: RegionQuota) -> tuple[str, bool]:
    """The family to look up (Azure's, when the SKU API named one) and whether the name is certain."""
    if region.offers is not None:
        for size in d.sizes:
            offer = region.offers.get(size)
            if offer is not None and offer.family:
                return offer.family, True
    return d.family, d.family_status == "verified"


def _not_checked(demands: Sequence[Demand]) -> Report:
    """No quota source: what the plan needs, and how to check it."""
    needs = "; ".join(f"{d.vcpus:,} vCPUs of {d.family} in {d.region}" for d in demands)
    regions = sorted({d.region for d in demands})
    return Report(
        Level.INFO,
        CONFIG_PATH,
        f"quota not checked: the plan needs {needs}. Run `gb300 plan --quota live`, or save "
        f"`az vm list-usage --location {regions[0]} -o json` and pass --quota FILE.",
    )


def _demand_findings(d: Demand, name: str, region: RegionQuota, source: str) -> list[Report]:
    """One demand against its region's answer: the size's offer, then its family's quota."""
    out = _offer_findings(d, region)
    family, certain = _family_of(d, region)
    usage = region.usage(family)
    if usage is None:
        out.append(
            Report(
                Level.ERROR if certain else Level.WARNING,
                d.urn,
                f"quota {family} in {name}: requested {d.vcpus:,} vCPUs, in use 0, limit 0 (the family "
                f"is not in the usage list from {source}"
                + ("" if certain else "; the catalog's family name is unverified")
                + f"). Ask Azure for {d.vcpus:,} vCPUs of {family} in {name}, or check the name with "
                f"`az vm list-usage --location {name} -o table`.",
            )
        )
        return out
    found = _usage_check(name, family, d.vcpus, usage, urn=d.urn, source=source)
    if found is not None:
        out.append(found)
    return out


def _region_findings(name: str, group: Sequence[Demand], snapshot: QuotaSnapshot) -> list[Report]:
    """A region's demands against the snapshot's answer for it, and their total against the regional cores."""
    region = snapshot.regions.get(name)
    if region is None or region.unverified is not None:
        why = region.unverified if region is not None else "no answer for this region"
        needs = ", ".join(f"{d.vcpus:,} vCPUs of {d.family}" for d in group)
        return [
            Report(
                Level.WARNING,
                CONFIG_PATH,
                f"quota not verified in {name} ({snapshot.source}: {why}). The plan needs {needs}. Check by "
                f"hand: az vm list-usage --location {name} -o table.",
            )
        ]
    out: list[Report] = []
    for d in group:
        out.extend(_demand_findings(d, name, region, snapshot.source))
    cores = region.usage(TOTAL)
    if cores is not None:
        total = sum(d.vcpus for d in group)
        found = _usage_check(
            name, "Total Regional vCPUs (cores)", total, cores, urn=REGION_PATH, source=snapshot.source
        )
        if found is not None:
            out.append(found)
    return out


def findings(resources: Sequence[Resource], snapshot: QuotaSnapshot | None) -> list[Report]:
    """What the plan's scale sets ask of Azure's quota against ``snapshot`` (None: no source)."""
    demands, reserved = demand(resources)
    out = [
        Report(
            Level.INFO,
            r.urn,
            f"pool {r.pool}: cores quota not checked, its scale sets draw on capacity reservation group "
            f"{r.group.rsplit('/', 1)[-1]}, which already holds the quota.",
        )
        for r in reserved
    ]
    if not demands:
        return out
    if snapshot is None:
        return [*out, _not_checked(demands)]
    by_region: dict[str, list[Demand]] = defaultdict(list)
    for d in demands:
        by_region[d.region].append(d)
    for name, group in sorted(by_region.items()):
        out.extend(_region_findings(name, group, snapshot))
    return out
