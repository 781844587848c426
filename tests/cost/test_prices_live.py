"""`--prices live`: the Azure Retail Prices API asked through azure-core's real pipeline over a fake HTTP transport
that answers as the API documents (OData `$filter`, `currencyCode`, `NextPageLink` paging), with synthetic prices
(tests/cost/fixtures/prices/README.md)."""

from __future__ import annotations

import functools
import io
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import requests
import urllib3
from azure.core.pipeline.transport import RequestsTransport

from gb300.cost import prices
from tests.support import fake_arm
from tests.support.fake_arm import FakeHttp, json_response

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "prices" / "eastus2-usd.json"
GB300 = "vm/Standard_ND128isr_GB300_v6"
_CLAUSE = re.compile(r"(\w+) eq '((?:[^']|'')*)'")


def fixture() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return doc


class FakeRetailPrices(FakeHttp):
    """Answers GET /api/retail/prices from the fixture: the `$filter` clauses select items, `$skip` the page."""

    def __init__(self, *, status: int = 200) -> None:
        super().__init__()
        self.pages: dict[str, list[dict[str, Any]]] = fixture()["pages"]
        self.status = status
        self.seen: list[dict[str, list[str]]] = []

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        url = urlparse(request.url or "")
        assert (url.hostname, url.path) == ("prices.azure.com", "/api/retail/prices")
        assert "Authorization" not in request.headers  # the API is public: no credential is ever sent
        query = parse_qs(url.query)
        self.seen.append(query)
        if self.status != 200:
            return json_response(request, self.status, {"error": {"code": "TooManyRequests"}})
        clauses = {k: v.replace("''", "'") for k, v in _CLAUSE.findall(query["$filter"][0])}
        key = clauses.get("armSkuName") or clauses.get("meterName") or ""
        pages = self.pages.get(key, [{"Items": [], "NextPageLink": None, "Count": 0}])
        index = int(query.get("$skip", ["0"])[0]) // 100
        page = dict(pages[index])
        page["Items"] = [i for i in page["Items"] if all(i.get(k) == v for k, v in clauses.items())]
        page["BillingCurrency"] = query["currencyCode"][0].strip("'")
        return json_response(request, 200, page)


def live(adapter: FakeRetailPrices) -> Any:
    """``prices.live_book`` bound to the fake transport (what a test monkeypatches in for --prices live)."""
    return functools.partial(prices.live_book, transport=fake_arm.transport(adapter), retry_total=0)


def _item(meter_key: str, **match: Any) -> dict[str, Any]:
    """The fixture item of ``meter_key`` whose fields equal ``match``."""
    for page in fixture()["pages"][meter_key]:
        for item in page["Items"]:
            if all(item.get(k) == v for k, v in match.items()):
                return dict(item)
    raise AssertionError(f"no fixture item {meter_key} {match}")


def test_paged_answer_gives_the_linux_pay_as_you_go_price() -> None:
    """The GB300 answer spans two pages: the client follows NextPageLink and skips Spot and Windows items."""
    adapter = FakeRetailPrices()
    book = live(adapter)("eastus2", "USD", [GB300])
    expected = _item(
        "Standard_ND128isr_GB300_v6",
        type="Consumption",
        meterName="ND128isr GB300 v6",
        productName="Virtual Machines NDGB300v6 Series",
    )
    assert book.get(GB300).hourly == expected["retailPrice"]
    assert len(adapter.seen) == 2
    assert adapter.seen[1]["$skip"] == ["100"]
    first = adapter.seen[0]
    assert first["currencyCode"] == ["USD"]
    assert "armRegionName eq 'eastus2'" in first["$filter"][0]
    assert "armSkuName eq 'Standard_ND128isr_GB300_v6'" in first["$filter"][0]


@pytest.mark.parametrize(("term", "years"), [("1 Year", 1), ("3 Years", 3)])
def test_reservation_term_prices_the_vm_per_hour_of_the_term(term: str, years: int) -> None:
    """With a reservation term the VM is priced from the Reservation item, whose price covers the whole term."""
    book = live(FakeRetailPrices())("eastus2", "USD", [GB300], reservation=term)
    whole = _item("Standard_ND128isr_GB300_v6", type="Reservation", reservationTerm=term)["retailPrice"]
    assert book.get(GB300).hourly == pytest.approx(whole / (years * 8760))


def test_units_are_read_from_unit_of_measure() -> None:
    """A monthly disk price is divided by 730 hours; a GiB-hour Lustre price is per GiB, which a TiB line scales."""
    book = live(FakeRetailPrices())(
        "eastus2", "USD", ["disk/Premium_LRS/P15", "lustre/AMLFS-Durable-Premium-500", "natGateway", "bastion/Standard"]
    )
    disk = _item("P15 LRS Disk")["retailPrice"]
    assert book.get("disk/Premium_LRS/P15").hourly == pytest.approx(disk / prices.hours_per_month())
    lustre = book.get("lustre/AMLFS-Durable-Premium-500")
    assert (lustre.hourly, lustre.per_unit) == (_item("Durable Premium 500 Capacity")["retailPrice"], "GiB")
    # one meter name, two services: the serviceName clause keeps NAT and Bastion apart
    assert book.get("natGateway").hourly == _item("Standard Gateway", serviceName="NAT Gateway")["retailPrice"]
    assert book.get("bastion/Standard").hourly == _item("Standard Gateway", serviceName="Azure Bastion")["retailPrice"]


def test_a_meter_the_api_does_not_list_stays_unknown() -> None:
    """A size with no answer is unknown with the reason, never zero."""
    price = live(FakeRetailPrices())("eastus2", "USD", ["vm/Standard_ND128isr_NDR_GB200_v6"]).get(
        "vm/Standard_ND128isr_NDR_GB200_v6"
    )
    assert price.hourly is None
    assert price.unknown_because is not None
    assert "the Retail Prices API lists no pay-as-you-go price for vm/Standard_ND128isr_NDR_GB200_v6" in (
        price.unknown_because
    )


def test_an_http_error_leaves_every_price_unknown() -> None:
    """A 429 (throttled) from the API prices nothing: each meter says why."""
    book = live(FakeRetailPrices(status=429))("eastus2", "USD", [GB300, "natGateway"])
    assert {m: p.hourly for m, p in book.prices.items()} == {GB300: None, "natGateway": None}
    assert "HTTP 429" in (book.get(GB300).unknown_because or "")


@pytest.mark.parametrize(
    ("unit", "per", "hours"),
    [("1 Hour", "instance", 1), ("100 Hours", "instance", 100), ("1/Month", "instance", 730),
     ("1 GiB/Month", "GiB", 730), ("1 GiB/Hour", "TiB", 1 / 1024), ("1 TB/Month", "GiB", 730 * 1024),
     ("1 GiB/Hour", "instance", None), ("10K Transactions", "instance", None)],
)  # fmt: skip
def test_unit_of_measure(unit: str, per: str, hours: float | None) -> None:
    """The hours of one unit a price buys, from the API's unitOfMeasure; a unit that does not fit is None."""
    got = prices.unit_hours(unit, per)
    assert got == (None if hours is None else pytest.approx(hours))


# --- the answer as the API publishes it: Global and empty-region meters, primary meters, savings plans ---------


def test_nat_and_private_link_are_asked_under_global_and_private_dns_under_no_region() -> None:
    """NAT gateway and Private Link meters sit under armRegionName 'Global' and private DNS under '' (the fixture
    files them there): asked so, they are priced; asked under eastus2 they would be missing."""
    adapter = FakeRetailPrices()
    book = live(adapter)("eastus2", "USD", ["natGateway", "privateEndpoint", "privateDnsZone", "bastion/Standard"])
    assert book.get("natGateway").hourly == _item("Standard Gateway", serviceName="NAT Gateway")["retailPrice"]
    assert book.get("privateEndpoint").hourly == _item("Standard Private Endpoint")["retailPrice"]
    assert book.get("privateDnsZone").hourly == pytest.approx(_item("Private Zone")["retailPrice"] / 730)
    regions = {q["$filter"][0].split(" and ")[0] for q in adapter.seen}
    assert regions == {"armRegionName eq 'Global'", "armRegionName eq ''", "armRegionName eq 'eastus2'"}
    assert all(q["meterRegion"] == ["'primary'"] for q in adapter.seen)  # primary meters only, as documented


def test_the_disk_mount_meter_is_asked_beside_the_disk() -> None:
    """Premium SSD's Disk Mount meter is its own meter, priced per disk-month."""
    book = live(FakeRetailPrices())("eastus2", "USD", ["diskMount/Premium_LRS/P15"])
    assert book.get("diskMount/Premium_LRS/P15").hourly == pytest.approx(
        _item("P15 LRS Disk Mount")["retailPrice"] / 730
    )


@pytest.mark.parametrize(("term", "price"), [("1 Year", 80.0), ("3 Years", 60.0)])
def test_a_savings_plan_prices_vms_from_the_savings_plan_list(term: str, price: float) -> None:
    """Asked for a savings plan term, a VM is priced from the pay-as-you-go item's savingsPlan entry of that term;
    other meters keep their pay-as-you-go price."""
    book = live(FakeRetailPrices())("eastus2", "USD", [GB300, "natGateway"], savings_plan=term)
    assert book.get(GB300).hourly == price
    assert f"{term} savings plan" in book.get(GB300).source
    assert book.get("natGateway").hourly == _item("Standard Gateway", serviceName="NAT Gateway")["retailPrice"]


# --- hostile answers: each leaves the meter unknown, and nothing is sent off the API's host ----------------------


class RecordingTransport(FakeHttp):
    """Records every request that reaches the wire (any scheme, any host) and answers the first with ``body``
    (raw bytes, as a hostile or broken server might send), the next ones with an empty last page. A stand-in for
    the network: it shows which URLs the client would have asked, not how a real server's TLS behaves."""

    def __init__(self, body: bytes) -> None:
        super().__init__()
        self.body = body
        self.urls: list[str] = []

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        self.urls.append(request.url or "")
        first = len(self.urls) == 1
        response = json_response(request, 200, None if first else {"Items": [], "NextPageLink": None})
        if first:
            response._content = self.body
            response.raw = urllib3.HTTPResponse(body=io.BytesIO(self.body), status=200, preload_content=False)
        return response


def _hostile(body: bytes, **kwargs: Any) -> tuple[prices.Price, RecordingTransport]:
    adapter = RecordingTransport(body)
    session = requests.Session()
    session.mount("https://", adapter)
    session.mount("http://", adapter)  # a plain-http request would be recorded too, not sent anywhere
    book = prices.live_book(
        "eastus2", "USD", ["natGateway"], transport=RequestsTransport(session=session, session_owner=False),
        retry_total=0, **kwargs,
    )  # fmt: skip
    return book.get("natGateway"), adapter


def _page(price: Any, link: str | None = None) -> bytes:
    item = dict(_item("Standard Gateway", serviceName="NAT Gateway"))
    item["retailPrice"] = price
    return json.dumps({"Items": [item], "NextPageLink": link, "Count": 1}).encode()


@pytest.mark.parametrize(
    "link",
    [
        "https://prices.example.net/api/retail/prices?$skip=100",
        "http://prices.azure.com/api/retail/prices?$skip=100",
        "https://prices.azure.com.example.net/api/retail/prices",
        "https://prices.azure.com:8443/api/retail/prices",
    ],
)
def test_a_next_page_off_the_api_host_or_over_http_is_refused_before_any_request(link: str) -> None:
    """NextPageLink to another host, a look-alike host, another port or plain http: not followed (one request in
    all, to the API), and the meter is unknown with the reason, not priced from the first page."""
    price, adapter = _hostile(_page(0.05, link))
    assert len(adapter.urls) == 1
    assert adapter.urls[0].startswith("https://prices.azure.com/api/retail/prices?")
    assert price.hourly is None
    assert "NextPageLink" in (price.unknown_because or "")


@pytest.mark.parametrize(
    ("value", "raw"),
    [(float("nan"), b"NaN"), (float("inf"), b"Infinity"), (-0.05, b"-0.05"), ("0.0x5", b'"0.0x5"'), (True, b"true")],
)
def test_a_price_that_is_not_a_price_stays_unknown(value: Any, raw: bytes) -> None:
    """NaN, infinite, negative, unparseable or boolean retailPrice: unknown with the reason, never a cost."""
    body = _page("PLACEHOLDER").replace(b'"PLACEHOLDER"', raw)
    price, _ = _hostile(body)
    assert price.hourly is None, value
    assert "is not a price" in (price.unknown_because or "")


def test_deep_nesting_is_refused_not_a_recursion_error() -> None:
    """An answer nested 100,000 deep (RecursionError in json.loads) leaves the meter unknown."""
    price, _ = _hostile(b"[" * 100_000 + b"]" * 100_000)
    assert price.hourly is None
    assert "nested too deeply" in (price.unknown_because or "")


def test_an_oversized_page_is_refused() -> None:
    """A page larger than the bound is not read to the end: the meter is unknown."""
    price, _ = _hostile(_page(0.05)[:-1] + b" " * 2048 + b"}", max_page_bytes=1024)
    assert price.hourly is None
    assert "more than 1,024 bytes" in (price.unknown_because or "")


def test_an_endless_answer_stops_at_the_page_bound() -> None:
    """Every page links to the next on the API's own host: the client stops after max_pages and says so."""

    class Endless(FakeHttp):
        def __init__(self) -> None:
            super().__init__()
            self.count = 0

        def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
            self.count += 1
            link = f"https://prices.azure.com/api/retail/prices?$skip={self.count * 100}"
            return json_response(request, 200, {"Items": [], "NextPageLink": link, "Count": 0})

    adapter = Endless()
    book = prices.live_book("eastus2", "USD", ["natGateway"], transport=fake_arm.transport(adapter), retry_total=0,
                            max_pages=5)  # fmt: skip
    assert adapter.count == 5
    assert "ran past 5 pages" in (book.get("natGateway").unknown_because or "")
