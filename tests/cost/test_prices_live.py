"""`--prices live`: the Azure Retail Prices API asked through azure-core's real pipeline over a fake HTTP transport
that answers as the API documents (OData `$filter`, `currencyCode`, `NextPageLink` paging), with synthetic prices
(tests/fixtures/prices/README.md)."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import requests

from gb300.cost import prices
from tests.support import fake_arm
from tests.support.fake_arm import FakeHttp, json_response

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "prices" / "eastus2-usd.json"
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
