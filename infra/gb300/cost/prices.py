"""Prices: the shipped table (``data/prices.yaml``), a table file of your own, or Azure's Retail Prices API.

A :class:`PriceBook` maps a meter id (``vm/<size>``, ``disk/<type>/<tier>``, ``lustre/<sku>``, ``natGateway``, ...)
to a :class:`Price`: what one unit costs per hour in the book's currency, or ``None`` with the reason it is
unknown. Nothing here guesses: a meter the table leaves unknown, or the API does not answer, stays unknown.

The live book asks ``GET https://prices.azure.com/api/retail/prices`` (public, no sign-in) once per meter, with an
OData ``$filter`` on the meter's ``live`` fields and the stack's ``armRegionName``, and ``currencyCode`` for the
currency, following ``NextPageLink`` until the last page. The request goes through azure-core's
:class:`~azure.core.PipelineClient` with a :class:`~azure.core.pipeline.policies.RetryPolicy` (the API throttles
bursts), so tests drive it with a fake HTTP transport. Response fields read, as the API documents them
(learn.microsoft.com rest/api/cost-management/retail-prices/azure-retail-prices): ``Items[]`` with
``retailPrice``, ``unitOfMeasure``, ``currencyCode``, ``type`` (``Consumption``/``Reservation``),
``reservationTerm``, ``armSkuName``, ``armRegionName``, ``meterName``, ``productName``, ``skuName``,
``tierMinimumUnits``; and ``NextPageLink``.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gb300.errors import UsageError
from gb300.facts.loader import data
from gb300.io import reader

LIVE = "live"
HOURS_PER_YEAR = 8760
RESERVATION_YEARS = {"1 Year": 1, "3 Years": 3}
GIB_PER_TIB = 1024


@dataclass(frozen=True)
class Price:
    """The hourly price of one unit of a meter (``per_unit``: instance, GiB or TiB), or why it is unknown."""

    hourly: float | None
    per_unit: str = "instance"
    source: str = ""
    unknown_because: str | None = None


@dataclass(frozen=True)
class MeterSpec:
    """One meter of ``data/prices.yaml``: the unit it is sold in, its table price, and its live filter."""

    id: str
    per_unit: str
    period: str
    value: float | None
    status: str
    source: str
    live: Mapping[str, str]
    region: str | None = None  # the live answer's armRegionName when not the stack's: 'Global', or '' (private DNS)


@dataclass(frozen=True)
class PriceBook:
    """Prices by meter id, in one currency, from one source (the table, a file, or ``live``)."""

    currency: str
    source: str
    prices: Mapping[str, Price] = field(default_factory=dict)

    def get(self, meter: str) -> Price:
        found = self.prices.get(meter)
        if found is not None:
            return found
        return Price(None, unknown_because=f"no price for meter {meter} in {self.source}")


@functools.cache
def _table() -> dict[str, Any]:
    return data("prices.yaml")


def hours_per_month() -> float:
    """Hours in a billing month (``hoursPerMonth``: 730, as Azure's calculator counts)."""
    return float(_table()["hoursPerMonth"]["value"])


def disk_tier(storage_type: str, size_gib: int) -> str | None:
    """The managed-disk tier a disk of ``size_gib`` bills as (``P15`` for 256 GiB of Premium_LRS), or None."""
    tiers: Mapping[str, int] = _table()["diskTiers"].get(storage_type) or {}
    for tier, size in sorted(tiers.items(), key=lambda kv: kv[1]):
        if size_gib <= size:
            return tier
    return None


def usage_based() -> dict[str, str]:
    """Resource types whose bill follows usage the plan cannot know -> why."""
    return dict(_table()["usageBased"])


def meters(doc: Mapping[str, Any] | None = None) -> dict[str, MeterSpec]:
    """The meters of a price table document (default: the shipped one)."""
    raw = (doc if doc is not None else _table())["meters"]
    shipped = _table()["meters"] if doc is not None else {}
    out = {}
    for meter_id, row in raw.items():
        price = row.get("price") or {}
        value = price.get("value")
        # A file of your own may give a shipped meter's price alone: its unit comes from the shipped table.
        per = row.get("per") or (shipped.get(meter_id) or {}).get("per")
        if not isinstance(per, Mapping):
            raise KeyError(f"meters.{meter_id}.per (the unit and period its price buys; no shipped meter has this id)")
        live = {str(k): str(v) for k, v in (row.get("live") or {}).items()}
        region = live.pop("region", None)
        number = _number(value)
        out[meter_id] = MeterSpec(
            id=meter_id,
            per_unit=str(per["unit"]),
            period=str(per["period"]),
            value=number,
            status=str(price.get("status", "unknown" if number is None else "given")),
            source=str(price.get("source", "")),
            live=live,
            region=region,
        )
    return out


def _number(value: Any) -> float | None:
    """A finite, non-negative price, or None (absent, not a number, NaN, infinite or negative)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _per_hour(value: float, period: str) -> float:
    return value / hours_per_month() if period == "month" else value


def table_book(currency: str = "USD", *, doc: Mapping[str, Any] | None = None, where: str | None = None) -> PriceBook:
    """The prices of a table document (default: ``data/prices.yaml``); another currency than the table's is unknown."""
    doc = doc if doc is not None else _table()
    label = where or f"data/prices.yaml ({doc.get('retrieved', 'undated')})"
    table_currency = str(doc.get("currency", "USD"))
    prices: dict[str, Price] = {}
    for spec in meters(doc).values():
        if table_currency != currency:
            why = f"{label} is in {table_currency}, not {currency}; use --prices live for {currency}"
            prices[spec.id] = Price(None, spec.per_unit, label, why)
        elif spec.value is None:
            why = spec.source if spec.status == "unknown" else f"{spec.status}: {spec.source}"
            prices[spec.id] = Price(None, spec.per_unit, label, why.strip() or "no price")
        else:
            prices[spec.id] = Price(_per_hour(spec.value, spec.period), spec.per_unit, f"{label}; {spec.status}")
    return PriceBook(currency, label, prices)


def file_book(path: Path, currency: str) -> PriceBook:
    """Your own prices (negotiated, a quoted GB300 rate) over the shipped table: a file shaped like
    ``data/prices.yaml`` whose meters replace the table's, one meter or many; every other meter keeps the table's
    price. A meter the table has needs only ``price.value`` (its ``per`` comes from the table). A bad file is a
    usage error."""
    doc = reader.load_yaml(path, reader.PRICES)  # the strict reader: a bomb or a bad file is one line, exit 2
    if not isinstance(doc, dict):
        raise UsageError(f"--prices {path}: must hold a mapping at the top level (got {type(doc).__name__})")
    try:
        mine = meters(doc)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise UsageError(
            f"--prices {path}: not a price table shaped like data/prices.yaml ({exc or type(exc).__name__})"
        ) from None
    bad = [
        f"meters.{m}.price.value: must be a finite price of at least 0 (got {raw!r})"
        for m, row in doc["meters"].items()
        if (raw := (row.get("price") or {}).get("value")) is not None and mine[m].value is None
    ]
    if bad:
        raise UsageError(f"--prices {path}: " + "; ".join(bad))
    base = table_book(currency)
    given = table_book(currency, doc=doc, where=f"{path} ({doc.get('retrieved', 'undated')})")
    merged = dict(base.prices)
    merged.update({m: p for m, p in given.prices.items() if p.hourly is not None or m not in merged})
    return PriceBook(currency, f"{given.source} over {base.source}", merged)


# --- live: the Azure Retail Prices API ------------------------------------------------------------------------

_UNIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KM]?)\s*([A-Za-z]*)\s*/?\s*(Hours?|Months?|Days?)?\s*$")
_SCALE = {"": 1.0, "K": 1e3, "M": 1e6}


def unit_hours(unit_of_measure: str, per_unit: str) -> float | None:
    """Hours of one ``per_unit`` that one price in ``unit_of_measure`` buys, or None when the unit is not understood.

    ``1 Hour`` -> 1; ``1/Month`` -> 730; ``1 GiB/Hour`` for a GiB meter -> 1; ``1 GiB/Hour`` for a TiB meter ->
    1/1024 (a TiB is 1,024 times the GiB the price buys); ``100 Hours`` -> 100.
    """
    match = _UNIT.match(unit_of_measure)
    if match is None:
        return None
    count = float(match.group(1)) * _SCALE[match.group(2)]
    quantity, period = match.group(3), (match.group(4) or "").lower().rstrip("s")
    if not period and quantity.lower() in ("hour", "hours"):
        quantity, period = "", "hour"
    hours = {"hour": 1.0, "day": 24.0, "month": hours_per_month()}
    if period not in hours:
        return None
    per = count * hours[period]
    q = quantity.lower()
    if per_unit == "instance":
        return per if q in ("", "unit", "units") else None
    sizes = {"gb": 1.0, "gib": 1.0, "tb": GIB_PER_TIB, "tib": GIB_PER_TIB}  # Azure bills disk and file GB as GiB
    if q not in sizes:
        return None
    want = 1.0 if per_unit == "GiB" else GIB_PER_TIB
    return per * sizes[q] / want


def _odata(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _filter(spec: MeterSpec, region: str) -> str:
    parts = [f"armRegionName eq {_odata(region if spec.region is None else spec.region)}"]
    parts += [f"{key} eq {_odata(value)}" for key, value in sorted(spec.live.items())]
    return " and ".join(parts)


def _pick(items: Iterable[Mapping[str, Any]], spec: MeterSpec, reservation: str | None) -> Mapping[str, Any] | None:
    """The item that prices ``spec``: pay-as-you-go (or the reservation term), not Spot, Low Priority or Windows."""
    wanted = "Reservation" if reservation and spec.id.startswith("vm/") else "Consumption"
    candidates = []
    for item in items:
        names = f"{item.get('meterName', '')} {item.get('skuName', '')} {item.get('productName', '')}"
        if item.get("type") != wanted or any(word in names for word in ("Spot", "Low Priority", "Windows")):
            continue
        if wanted == "Reservation" and item.get("reservationTerm") != reservation:
            continue
        candidates.append(item)
    candidates.sort(key=lambda i: float(i.get("tierMinimumUnits") or 0))
    return candidates[0] if candidates else None


MAX_PAGE_BYTES = 4 * 1024 * 1024  # one page of 100 items is about 100 KB; anything near this is not the API


def _same_api(link: str, base: str) -> str | None:
    """Why ``link`` (a ``NextPageLink``) must not be followed, or None: only the API's own host, over https."""
    from urllib.parse import urlsplit  # noqa: PLC0415

    want, got = urlsplit(base), urlsplit(link)
    if got.scheme != "https":
        return f"NextPageLink {link[:80]!r} is not https"
    if (got.hostname or "").lower() != (want.hostname or "").lower() or got.port not in (None, 443):
        return f"NextPageLink {link[:80]!r} leaves {want.hostname}"
    return None


def _read_page(response: Any, limit: int) -> bytes | str:
    """The body, read up to ``limit`` bytes; a str says why it was refused (too large)."""
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > limit:
        return f"a page of {int(declared):,} bytes (more than {limit:,})"
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > limit:
            return f"a page of more than {limit:,} bytes"
    return bytes(body)


def _fetch(  # noqa: PLR0911 - one return per way a page can end the answer
    client: Any, request: Any, base: str, *, max_pages: int, max_page_bytes: int, timeout_s: float
) -> tuple[list[Mapping[str, Any]], str | None]:
    """The items of every page of one answer, following ``NextPageLink`` on the API's own host only, and why the
    answer is not to be used (None when it is)."""
    from azure.core.exceptions import AzureError  # noqa: PLC0415
    from azure.core.rest import HttpRequest  # noqa: PLC0415

    items: list[Mapping[str, Any]] = []
    for _page in range(max_pages):
        try:
            response = client.send_request(request, stream=True, connection_timeout=timeout_s, read_timeout=timeout_s)
            try:
                if response.status_code != 200:
                    return items, f"HTTP {response.status_code} from the Retail Prices API"
                body = _read_page(response, max_page_bytes)
            finally:
                response.close()  # streamed: a refused page is not read to its end
        except AzureError as exc:
            return (
                items,
                f"the Retail Prices API did not answer ({str(exc).strip().splitlines()[0] if str(exc) else exc})",
            )
        if isinstance(body, str):
            return items, f"the Retail Prices API answered {body}"
        try:
            page = json.loads(body)
        except RecursionError:
            return items, "the Retail Prices API answered JSON nested too deeply to read"
        except ValueError:
            return items, "the Retail Prices API answered something that is not JSON"
        if not isinstance(page, Mapping):
            return items, "the Retail Prices API answered JSON that is not an object"
        items += [i for i in page.get("Items") or [] if isinstance(i, Mapping)]
        link = page.get("NextPageLink")
        if not link:
            return items, None
        refused = _same_api(str(link), base)
        if refused is not None:
            return items, refused
        request = HttpRequest("GET", str(link))
    return items, f"the answer ran past {max_pages} pages"


def live_book(
    region: str,
    currency: str,
    wanted: Iterable[str],
    *,
    reservation: str | None = None,
    savings_plan: str | None = None,
    timeout_s: float = 20.0,
    max_pages: int = 20,
    max_page_bytes: int = MAX_PAGE_BYTES,
    **pipeline_kwargs: Any,
) -> PriceBook:
    """Ask the Retail Prices API for every meter in ``wanted``; a meter it does not answer stays unknown, with why.

    Every request goes to the API's own host over https: a ``NextPageLink`` elsewhere (another host, plain http)
    is refused before any request is sent, and the meter stays unknown. At most ``max_pages`` pages of at most
    ``max_page_bytes`` each; an answer nested too deeply to parse is refused, not a crash. ``meterRegion=
    'primary'`` asks for primary meters only (the API's documented filter). ``savings_plan`` (``1 Year``, ``3
    Years``) prices VMs at the ``savingsPlan`` price of their pay-as-you-go item (preview API version only).
    """
    from azure.core import PipelineClient  # noqa: PLC0415 - the Azure SDK loads only when asked to go live
    from azure.core.pipeline.policies import RetryPolicy  # noqa: PLC0415
    from azure.core.rest import HttpRequest  # noqa: PLC0415

    api = _table()["retailPricesApi"]
    base = str(api["url"])
    retry_total = int(pipeline_kwargs.pop("retry_total", 3))
    client = PipelineClient(base, policies=[RetryPolicy(retry_total=retry_total)], **pipeline_kwargs)
    specs = meters()
    label = f"Azure Retail Prices API ({region}, {currency})"
    prices: dict[str, Price] = {}
    for meter_id in sorted(set(wanted)):
        spec = specs.get(meter_id)
        if spec is None or not spec.live:
            prices[meter_id] = Price(None, unknown_because=f"meter {meter_id} has no live filter in data/prices.yaml")
            continue
        params = {
            "api-version": str(api["apiVersion"]),
            "currencyCode": currency,
            "meterRegion": "'primary'",
            "$filter": _filter(spec, region),
        }
        first = HttpRequest("GET", base, params=params)
        items, why = _fetch(
            client, first, base, max_pages=max_pages, max_page_bytes=max_page_bytes, timeout_s=timeout_s
        )
        prices[meter_id] = _price(
            spec, items, currency=currency, reservation=reservation, savings_plan=savings_plan, why=why, label=label
        )
    return PriceBook(currency, label, prices)


def _price(  # noqa: PLR0911 - one return per way an answer can fail to price the meter
    spec: MeterSpec,
    items: list[Mapping[str, Any]],
    *,
    currency: str,
    reservation: str | None,
    why: str | None,
    label: str,
    savings_plan: str | None = None,
) -> Price:
    if why is not None:
        # A refused or broken answer prices nothing: a partial list could pick the wrong item.
        return Price(None, spec.per_unit, label, why)
    item = _pick(items, spec, reservation)
    if item is None:
        kind = (
            f"{reservation} reservation price" if reservation and spec.id.startswith("vm/") else "pay-as-you-go price"
        )
        return Price(None, spec.per_unit, label, f"the Retail Prices API lists no {kind} for {spec.id} here")
    if item.get("currencyCode") not in (None, currency):
        return Price(None, spec.per_unit, label, f"answered in {item.get('currencyCode')}, not {currency}")
    raw = item.get("retailPrice")
    value = _number(raw)
    if value is None:
        return Price(None, spec.per_unit, label, f"retailPrice {str(raw)[:40]!r} is not a price (finite, at least 0)")
    if item.get("type") == "Reservation":
        years = RESERVATION_YEARS.get(str(item.get("reservationTerm")))
        if years is None:
            return Price(None, spec.per_unit, label, f"reservation term {item.get('reservationTerm')!r} not understood")
        return Price(value / (years * HOURS_PER_YEAR), spec.per_unit, f"{label}; {reservation} reservation")
    hours = unit_hours(str(item.get("unitOfMeasure", "")), spec.per_unit)
    if hours is None:
        return Price(None, spec.per_unit, label, f"unit {item.get('unitOfMeasure')!r} not understood for {spec.id}")
    if savings_plan and spec.id.startswith("vm/"):
        plans = item.get("savingsPlan")
        plan = (
            next(
                (p for p in plans if isinstance(p, Mapping) and p.get("term") == savings_plan),
                None,
            )
            if isinstance(plans, list)
            else None
        )
        planned = _number(plan.get("retailPrice")) if plan is not None else None
        if planned is None:
            return Price(
                None,
                spec.per_unit,
                label,
                f"the Retail Prices API lists no {savings_plan} savings plan price for {spec.id} here",
            )
        return Price(planned / hours, spec.per_unit, f"{label}; {savings_plan} savings plan")
    return Price(value / hours, spec.per_unit, f"{label}; meter {item.get('meterName')}")
