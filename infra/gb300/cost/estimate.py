"""What the declared resources cost per hour and per month, and how a change moves it.

Each priced resource becomes one or more :class:`Line` (a meter and a quantity: 18 VMs of a size, 64 disks of a
tier, 128 TiB of a Lustre SKU, one NAT gateway); a :class:`~gb300.cost.prices.PriceBook` prices the lines. What
is priced, and what is not (docs/cost.md):

* scale sets and VMs: VM-hours of their size, times their capacity; their managed OS disks by tier (an ephemeral
  OS disk costs nothing on top); managed data disks by tier;
* Azure Managed Lustre: capacity (TiB) at its SKU's rate;
* NAT gateways, Standard public IPs, private endpoints, Bastion, Managed Grafana: their hours; private DNS zones
  and log alert rules: their month (fixed charges, whatever the use); Premium SSD disks: their "Disk Mount" meter
  on top of the disk's;
* usage-based resources (the storage account, Log Analytics, Prometheus, ...): listed with why, not in the total;
* everything else (networks, subnets, NSGs, identities, role assignments, locks, components) is free.

A line whose price is unknown is listed with the reason and left out of the total, never priced at zero. The
discount (``gb300:cost.discountPercent``) applies to every known price.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gb300 import tags
from gb300.azure import inventory, machines
from gb300.azure.inventory import dig, mapping
from gb300.cost import prices
from gb300.cost.prices import PriceBook
from gb300.ops import ci_summary
from gb300.resources import Resource

AML = "azure-native:storagecache:AmlFilesystem"
DISK = "azure-native:compute:Disk"
NAT = "azure-native:network:NatGateway"
PUBLIC_IP = "azure-native:network:PublicIPAddress"
PRIVATE_ENDPOINT = "azure-native:network:PrivateEndpoint"
BASTION = "azure-native:network:BastionHost"
GRAFANA = "azure-native:dashboard:Grafana"
DNS_ZONE = "azure-native:privatedns:PrivateZone"
ALERT_RULE = "azure-native:monitor:ScheduledQueryRule"
# Premium SSD bills a "Disk Mount" meter per disk beside its "Disk" meter (the Retail Prices API lists both).
MOUNT_METERED = ("Premium_LRS",)


@dataclass(frozen=True)
class Line:
    """A quantity of one meter that one resource uses; ``item`` groups lines for the reader (a pool's VMs)."""

    urn: str
    item: str
    meter: str
    quantity: float
    unit: str  # instance, GiB or TiB

    def in_unit(self, unit: str) -> float:
        """The quantity in ``unit`` (TiB <-> GiB); instances stay instances."""
        if unit == self.unit:
            return self.quantity
        if (self.unit, unit) == ("TiB", "GiB"):
            return self.quantity * prices.GIB_PER_TIB
        if (self.unit, unit) == ("GiB", "TiB"):
            return self.quantity / prices.GIB_PER_TIB
        return self.quantity


def _os_disk(urn: str, item: str, os_disk: Mapping[str, Any], count: int) -> list[Line]:
    if mapping(os_disk.get("diffDiskSettings")).get("option"):
        return []  # an ephemeral OS disk lives on the VM's own storage: no disk bill
    storage = dig(os_disk, "managedDisk", "storageAccountType")
    size = inventory.whole(os_disk.get("diskSizeGB"))
    return _disk(urn, item, storage, size, count)


def _disk(urn: str, item: str, storage: Any, size: int | None, count: int) -> list[Line]:
    if not isinstance(storage, str) or size is None or count <= 0:
        return []
    tier = prices.disk_tier(storage, size)
    meter = f"disk/{storage}/{tier}" if tier else f"disk/{storage}/{size}GiB"
    out = [Line(urn, item, meter, count, "instance")]
    if storage in MOUNT_METERED:
        out.append(Line(urn, item, meter.replace("disk/", "diskMount/", 1), count, "instance"))
    return out


def _one(res: Resource) -> list[Line]:  # noqa: PLR0911 - one return per billed type
    """The one line of a resource billed by the hour or month whatever its use (NAT gateway, public IP, private
    endpoint, Bastion, Managed Grafana, private DNS zone, log alert rule), or none."""
    sku = mapping(res.inputs.get("sku")).get("name")
    if res.type == NAT:
        return [Line(res.urn, f"NAT gateway {res.name}", "natGateway", 1, "instance")]
    if res.type == PUBLIC_IP:
        method = res.inputs.get("publicIPAllocationMethod") or "Dynamic"
        return [Line(res.urn, "public IP addresses", f"publicIp/{sku or 'Basic'}/{method}", 1, "instance")]
    if res.type == PRIVATE_ENDPOINT:
        return [Line(res.urn, "private endpoints", "privateEndpoint", 1, "instance")]
    if res.type == BASTION:
        return [Line(res.urn, f"Bastion {res.name}", f"bastion/{sku or 'Basic'}", 1, "instance")]
    if res.type == GRAFANA:
        return [Line(res.urn, f"Managed Grafana {res.name}", f"grafana/{sku or 'Standard'}", 1, "instance")]
    if res.type == DNS_ZONE:
        return [Line(res.urn, "private DNS zones", "privateDnsZone", 1, "instance")]
    if res.type == ALERT_RULE:
        return [Line(res.urn, "log alert rules", "alertRule/log", 1, "instance")]
    return []


def lines(resources: Iterable[Resource]) -> list[Line]:
    """The priced quantities of ``resources`` (the plan's records or a deployed state's resources)."""
    resources = list(resources)
    out: list[Line] = []
    for machine in machines.machines(resources):
        item = f"pool {machine.pool} VMs" if machine.pool and machine.pool != machine.name else f"VM {machine.name}"
        out.append(Line(machine.urn, item, f"vm/{machine.size}", machine.count, "instance"))
    for res in resources:
        if inventory.is_scale_set(res):
            ss = inventory.scale_set(res)
            group = f"pool {ss.pool}" if ss.pool else ss.name
            os_disk = mapping(dig(ss.properties, "virtualMachineProfile", "storageProfile", "osDisk"))
            out += _os_disk(ss.urn, f"{group} OS disks", os_disk, ss.capacity)
        elif res.type == machines.VM:
            os_disk = mapping(dig(res.inputs, "storageProfile", "osDisk"))
            out += _os_disk(res.urn, f"VM {res.name} OS disk", os_disk, 1)
        elif res.type == DISK:
            storage = mapping(res.inputs.get("sku")).get("name")
            out += _disk(res.urn, f"disk {res.name}", storage, inventory.whole(res.inputs.get("diskSizeGB")), 1)
        elif res.type == AML:
            sku = mapping(res.inputs.get("sku")).get("name")
            tib = res.inputs.get("storageCapacityTiB")
            if isinstance(sku, str) and isinstance(tib, int | float) and not isinstance(tib, bool):
                out.append(Line(res.urn, f"Lustre {res.name}", f"lustre/{sku}", float(tib), "TiB"))
        else:
            out += _one(res)
    return out


def label(meter: str, quantity: float, unit: str) -> str:
    """What a quantity of a meter is, for a reader: ``1,152 Standard_ND128isr_GB300_v6 VMs``, ``128 TiB of
    lustre/AMLFS-Durable-Premium-500``."""
    q = f"{quantity:,.0f}" if float(quantity).is_integer() else f"{quantity:,.2f}"
    kind, _, rest = meter.partition("/")
    if kind == "vm":
        return f"{q} {rest} VM" + ("" if quantity == 1 else "s")
    if kind in ("disk", "diskMount"):
        tier = rest.rsplit("/", 1)[-1]
        return f"{q} {tier} disk" + (" mount" if kind == "diskMount" else "") + ("" if quantity == 1 else "s")
    if unit != "instance":
        return f"{q} {unit} of {meter}"
    return f"{q} x {meter}"


@dataclass(frozen=True)
class Priced:
    """A line with its hourly cost in the book's currency (after the discount), or why it is unknown."""

    line: Line
    hourly: float | None
    why: str | None = None


@dataclass(frozen=True)
class Estimate:
    """The priced lines of one set of resources, and the usage-based resources left out of the total."""

    currency: str
    source: str
    discount_percent: float
    reservation_term: str | None
    priced: tuple[Priced, ...]
    usage_based: tuple[tuple[str, int, str], ...]  # (type, count, why)

    @property
    def hourly(self) -> float:
        """The known total per hour (unknown lines are not in it)."""
        return sum(p.hourly for p in self.priced if p.hourly is not None)

    @property
    def monthly(self) -> float:
        return self.hourly * prices.hours_per_month()

    @property
    def unknown(self) -> list[Priced]:
        return [p for p in self.priced if p.hourly is None]

    def items(self) -> list[dict[str, Any]]:
        """Known lines summed per item (a pool's VMs, a pool's OS disks, the Lustre filesystem), largest first."""
        hourly: dict[tuple[str, str], float] = defaultdict(float)
        quantity: dict[tuple[str, str], float] = defaultdict(float)
        units: dict[tuple[str, str], str] = {}
        for p in self.priced:
            if p.hourly is None:
                continue
            key = (p.line.item, p.line.meter)
            hourly[key] += p.hourly
            quantity[key] += p.line.quantity
            units[key] = p.line.unit
        rows = [
            {
                "item": item,
                "meter": meter,
                "quantity": quantity[(item, meter)],
                "unit": units[(item, meter)],
                "hourly": round(h, 4),
                "monthly": round(h * prices.hours_per_month(), 2),
            }
            for (item, meter), h in hourly.items()
        ]
        return sorted(rows, key=lambda r: (-float(r["hourly"]), str(r["item"])))

    def excludes(self) -> list[dict[str, Any]]:
        """What the total leaves out, summed per meter, largest quantity first: ``1,152 Standard_ND128isr_GB300_v6
        VMs`` with why (the headline names them, so a total without the GPUs never reads as the cluster's)."""
        quantity: dict[str, float] = defaultdict(float)
        why: dict[str, str] = {}
        units: dict[str, str] = {}
        for p in self.unknown:
            quantity[p.line.meter] += p.line.quantity
            why.setdefault(p.line.meter, p.why or "unknown")
            units[p.line.meter] = p.line.unit
        rows = [
            {"meter": m, "quantity": q, "unit": units[m], "label": label(m, q, units[m]), "why": why[m]}
            for m, q in quantity.items()
        ]
        return sorted(rows, key=lambda r: (not str(r["meter"]).startswith("vm/"), -float(r["quantity"]), r["meter"]))

    def unknown_items(self) -> list[dict[str, Any]]:
        """Unknown lines summed per item and meter, with the reason."""
        quantity: dict[tuple[str, str], float] = defaultdict(float)
        why: dict[tuple[str, str], str] = {}
        units: dict[tuple[str, str], str] = {}
        for p in self.unknown:
            key = (p.line.item, p.line.meter)
            quantity[key] += p.line.quantity
            why[key] = p.why or "unknown"
            units[key] = p.line.unit
        return [
            {"item": i, "meter": m, "quantity": q, "unit": units[(i, m)], "why": why[(i, m)]}
            for (i, m), q in sorted(quantity.items())
        ]

    def as_json(self) -> dict[str, Any]:
        return {
            "currency": self.currency,
            "source": self.source,
            "hoursPerMonth": prices.hours_per_month(),
            "discountPercent": self.discount_percent,
            "reservationTerm": self.reservation_term,
            "hourly": round(self.hourly, 4),
            "monthly": round(self.monthly, 2),
            "complete": not self.unknown,
            "lowerBound": bool(self.unknown),  # the total leaves out what `excludes` names: a floor, not the cost
            "excludes": self.excludes(),
            "headline": "",  # set below from the same fields the pull request comment reads
            "items": self.items(),
            "unknown": self.unknown_items(),
            "usageBased": [{"type": t, "count": n, "why": w} for t, n, w in self.usage_based],
            "resources": [
                {
                    "urn": p.line.urn,
                    "meter": p.line.meter,
                    "quantity": p.line.quantity,
                    "unit": p.line.unit,
                    "hourly": None if p.hourly is None else round(p.hourly, 6),
                    "monthly": None if p.hourly is None else round(p.hourly * prices.hours_per_month(), 2),
                    **({"unknown": p.why} if p.hourly is None else {}),
                }
                for p in self.priced
            ],
        } | {"headline": ci_summary.cost_headline({**self._totals(), "excludes": self.excludes()})}

    def _totals(self) -> dict[str, Any]:
        return {"currency": self.currency, "hourly": round(self.hourly, 4), "monthly": round(self.monthly, 2)}


def estimate(
    resources: Sequence[Resource],
    book: PriceBook,
    *,
    discount_percent: float = 0.0,
    reservation_term: str | None = None,
) -> Estimate:
    """Price ``resources`` with ``book``; ``discount_percent`` comes off every known price."""
    keep = 1 - discount_percent / 100
    priced = []
    for line in lines(resources):
        price = book.get(line.meter)
        if price.hourly is None:
            priced.append(Priced(line, None, price.unknown_because or "unknown"))
        else:
            priced.append(Priced(line, price.hourly * line.in_unit(price.per_unit) * keep))
    why = prices.usage_based()
    counts = Counter(r.type for r in resources if r.type in why)
    usage = tuple((t, n, why[t]) for t, n in sorted(counts.items()))
    return Estimate(book.currency, book.source, discount_percent, reservation_term, tuple(priced), usage)


def change(planned: Estimate, deployed: Estimate) -> dict[str, Any]:
    """How the plan moves the cost of what is deployed: the known difference, and quantities whose price is unknown."""
    before: dict[tuple[str, str, str], float] = defaultdict(float)
    after: dict[tuple[str, str, str], float] = defaultdict(float)
    hourly_before: dict[tuple[str, str, str], float] = defaultdict(float)
    hourly_after: dict[tuple[str, str, str], float] = defaultdict(float)
    unknown: set[tuple[str, str, str]] = set()
    for counter, hourly, est in ((before, hourly_before, deployed), (after, hourly_after, planned)):
        for p in est.priced:
            key = (p.line.item, p.line.meter, p.line.unit)
            counter[key] += p.line.quantity
            if p.hourly is None:
                unknown.add(key)
            else:
                hourly[key] += p.hourly
    rows: list[dict[str, Any]] = []
    known = 0.0
    moved_unknown: list[str] = []
    for key in sorted(set(before) | set(after)):
        if before[key] == after[key] and abs(hourly_after[key] - hourly_before[key]) < 1e-9:
            continue
        item, meter, unit = key
        delta = None if key in unknown else round(hourly_after[key] - hourly_before[key], 4)
        if delta is None:
            moved_unknown.append(label(meter, after[key] - before[key], unit))
        else:
            known += delta
        rows.append(
            {
                "item": item,
                "meter": meter,
                "unit": unit,
                "before": before[key],
                "after": after[key],
                "hourly": delta,
                "monthly": None if delta is None else round(delta * prices.hours_per_month(), 2),
            }
        )
    # A change that moves a quantity whose price is unknown has an unknown cost: never a total of +0.00.
    total = None if moved_unknown else round(planned.hourly - deployed.hourly, 4)
    return {
        "deployedHourly": round(deployed.hourly, 4),
        "deployedMonthly": round(deployed.monthly, 2),
        "hourly": total,
        "monthly": None if total is None else round(total * prices.hours_per_month(), 2),
        "knownHourly": round(known, 4),
        "knownMonthly": round(known * prices.hours_per_month(), 2),
        "unknown": moved_unknown,
        "items": rows,
    }


def prometheus_samples(gpu_vms: int, gpus_per_vm: int, scrape_interval_s: int) -> dict[str, Any]:
    """An estimate, from the plan's own numbers, of the samples the GPU nodes send managed Prometheus in a month:
    a lower bound, one series per metric name the node exporters emit (``data/metrics.yaml``; DCGM's once per GPU),
    times the scrapes a month at ``gb300:monitoring.prometheus.scrapeIntervalSeconds``. Real nodes emit more series
    (a node exporter metric per CPU, per filesystem, per NIC), so the bill is at least this."""
    from gb300.facts.loader import data  # noqa: PLC0415 - read only for the estimate

    exporters = data("metrics.yaml")["exporters"]
    per_node = sum(
        len(spec.get("metrics") or {}) * (gpus_per_vm if name == "dcgm" else 1)
        for name, spec in exporters.items()
        if spec.get("scope") != tags.ROLE_HEAD  # slurmctld's metrics come from the head, not from each GPU node
    )
    scrapes = prices.hours_per_month() * 3600 / scrape_interval_s
    samples = gpu_vms * per_node * scrapes
    return {
        "what": "samples ingested by managed Prometheus a month (estimate, lower bound)",
        "seriesPerNode": per_node,
        "scrapeIntervalSeconds": scrape_interval_s,
        "nodes": gpu_vms,
        "quantity": round(samples),
        "unit": "samples",
        "basis": (
            f"at least {per_node} series per GPU node (one per metric name in data/metrics.yaml, DCGM's per GPU) x "
            f"{gpu_vms:,} nodes x {scrapes:,.0f} scrapes a month (every {scrape_interval_s} s)"
        ),
    }
