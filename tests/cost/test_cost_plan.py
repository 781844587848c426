"""The cost in every plan: the total per hour and per month, the five largest items, unknown prices listed (never
zero), and the change against the deployed state, from the shipped table, a price file, or the live API (faked)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli, config, cost
from gb300.cost import prices
from gb300.errors import ConfigError, UsageError
from gb300.ops import ci_summary
from gb300.plan import PlanResult, run_plan
from gb300.plan.render import TOP_ITEMS, text
from tests.cost.test_prices_live import FakeRetailPrices, _item, live
from tests.support.state import write_stack_export

GB300 = "vm/Standard_ND128isr_GB300_v6"


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory, reference_plan: PlanResult) -> Path:
    return write_stack_export(tmp_path_factory.mktemp("state") / "state.json", reference_plan)


def _cli(args: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> tuple[int, str, dict[str, Any]]:
    out = tmp_path / "plan.json"
    code = cli.main(["plan", *args, "--json", str(out)])
    printed = capsys.readouterr().out
    return code, printed, json.loads(out.read_text())["summary"]["cost"] if out.exists() else {}


def test_reference_plan_prints_its_total_and_lists_unknown_prices(reference_plan: PlanResult) -> None:
    """The shipped table prices the OS disks, NAT gateway, public IPs and endpoints; the headline names the GB300
    VMs it leaves out, and each unknown price is listed with its reason, never zero."""
    c = reference_plan.summary["cost"]
    page = text(reference_plan, stack_file="x")
    flat = " ".join(page.split())  # the summary lines wrap at the terminal's width
    assert "lower bound: excludes 1,152 Standard_ND128isr_GB300_v6 VMs" in flat
    assert f"the priced part alone is {c['hourly']:,.2f} USD per hour, {c['monthly']:,.2f} USD per month" in flat
    assert c["headline"].startswith("lower bound: excludes 1,152 Standard_ND128isr_GB300_v6 VMs")
    assert c["headline"].endswith(f"the priced part alone is {c['monthly']:,.2f} USD a month")
    # The summary rounds the hour to 4 places and the month to 2: the two agree within what those roundings allow.
    rounding = 0.00005 * prices.hours_per_month() + 0.005
    assert c["monthly"] == pytest.approx(c["hourly"] * prices.hours_per_month(), abs=rounding)
    known = [r for r in c["resources"] if r["hourly"] is not None]
    assert c["hourly"] == pytest.approx(sum(r["hourly"] for r in known), abs=1e-3)
    gb300 = next(u for u in c["unknown"] if u["meter"] == GB300)
    assert (gb300["item"], gb300["quantity"]) == ("pool train VMs", reference_plan.summary["vms"])
    assert "pool train VMs: 1,152 x vm/Standard_ND128isr_GB300_v6: not on https://azure.microsoft.com" in flat
    assert not c["complete"]
    assert c["lowerBound"]  # the JSON says what the headline says: a floor, not the cost
    # every VM, disk, filesystem and network meter the plan declares has a line; none is silently dropped
    assert {r["meter"] for r in c["resources"]} >= {GB300, "lustre/AMLFS-Durable-Premium-500", "natGateway"}


def _hand_count() -> float:
    """The total of the hand count in docs/cost.md ("Checking the reference plan by hand")."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "cost.md").read_text(encoding="utf-8")
    (total,) = re.findall(r"\| \*\*total\*\* \| \| \| \*\*([\d,.]+) USD\*\* \|", doc)
    return float(total.replace(",", ""))


def test_reference_total_matches_the_hand_count_and_names_the_gpus(reference_plan: PlanResult) -> None:
    """Done-when: the reference plan's monthly total without GPU prices is within 15% of the hand count written in
    docs/cost.md from the cited public prices, and the headline names the GPUs it leaves out."""
    c = reference_plan.summary["cost"]
    assert c["monthly"] == pytest.approx(_hand_count(), rel=0.15)
    assert "excludes 1,152 Standard_ND128isr_GB300_v6 VMs" in c["headline"]


def test_live_prices_give_the_five_largest_items(
    reference_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every meter answered, the total is complete and the text shows the five largest items, largest first."""
    monkeypatch.setattr(prices, "live_book", live(FakeRetailPrices()))
    plan = run_plan("reference", copy.deepcopy(reference_raw), prices="live")
    c = plan.summary["cost"]
    assert c["complete"], c["unknown"]
    assert not c["lowerBound"]
    page = text(plan, stack_file="x").splitlines()
    start = page.index(f"  largest items (of {len(c['items'])})")
    shown = page[start + 1 : start + 1 + TOP_ITEMS]
    assert shown[0].split()[0:3] == ["pool", "train", "VMs"]
    hourly = [float(row.split(" x ")[1].split()[1].replace(",", "")) for row in shown]
    assert hourly == sorted(hourly, reverse=True)
    assert len(shown) == TOP_ITEMS
    vm_price = _item(
        "Standard_ND128isr_GB300_v6",
        type="Consumption",
        meterName="ND128isr GB300 v6",
        productName="Virtual Machines NDGB300v6 Series",
    )["retailPrice"]
    assert c["items"][0]["hourly"] == pytest.approx(plan.summary["vms"] * vm_price)


def test_growing_64_to_82_racks_prints_the_difference(  # noqa: PLR0917 - pytest passes fixtures by position
    reference_raw: dict[str, Any],
    state: Path,
    write_stack: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """+18 racks against the deployed 64: the plan prints the change per hour and month and the VMs that move."""
    monkeypatch.setattr(prices, "live_book", live(FakeRetailPrices()))
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["racks"] = 82
    stack = str(write_stack(raw, "reference"))
    _, printed, c = _cli(["--stack-file", stack, "--state", str(state), "--prices", "live"], capsys, tmp_path)
    change = c["change"]
    vms = next(r for r in change["items"] if r["meter"] == GB300)
    price = _item("Standard_ND128isr_GB300_v6", type="Consumption", meterName="ND128isr GB300 v6",
                  productName="Virtual Machines NDGB300v6 Series")["retailPrice"]  # fmt: skip
    assert (vms["before"], vms["after"]) == (64 * 18, 82 * 18)
    assert vms["hourly"] == pytest.approx(18 * 18 * price)
    assert change["hourly"] == pytest.approx(c["hourly"] - change["deployedHourly"], abs=1e-3)
    assert change["hourly"] >= vms["hourly"]  # more racks add OS disks and NAT addresses too, never less
    assert f"change against the deployed state: +{change['hourly']:,.2f} USD per hour" in printed
    assert f"pool train VMs: {GB300} 1,152 -> 1,476: +{vms['hourly']:,.2f} USD/h" in printed


def test_growing_with_unknown_gb300_prices_says_so(
    reference_raw: dict[str, Any], state: Path, write_stack: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the shipped table the added racks' VMs are 'price unknown' in the change, not a zero difference."""
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["racks"] = 82
    _, printed, c = _cli(["--stack-file", str(write_stack(raw, "reference")), "--state", str(state)], capsys, tmp_path)
    vms = next(r for r in c["change"]["items"] if r["meter"] == GB300)
    assert vms["hourly"] is None
    assert f"pool train VMs: {GB300} 1,152 -> 1,476: price unknown" in printed


def test_price_file_and_discount(
    dev_raw: dict[str, Any], tmp_path: Path, write_stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A price table of your own prices GB300; gb300:cost.discountPercent takes its share off every known price."""
    table = tmp_path / "prices.yaml"
    table.write_text(
        "retrieved: '2026-12-01'\ncurrency: USD\nmeters:\n"
        f"  {GB300}:\n    per: {{unit: instance, period: hour}}\n"
        "    price: {value: 50, status: verified, source: our agreement}\n",
        encoding="utf-8",
    )
    raw = copy.deepcopy(dev_raw)
    raw["cost"] = {"discountPercent": 10}
    _, printed, c = _cli(["--stack-file", str(write_stack(raw, "dev")), "--prices", str(table)], capsys, tmp_path)
    vms = next(r for r in c["items"] if r["meter"] == GB300)
    assert vms["hourly"] == pytest.approx(vms["quantity"] * 50 * 0.9)
    assert "10% off (gb300:cost.discountPercent)" in printed


def test_a_bad_price_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A price file that is missing or not shaped like the table is exit 2 with one line, before the plan runs."""
    bad = tmp_path / "prices.yaml"
    bad.write_text("meters: [1, 2]\n", encoding="utf-8")
    assert cli.main(["plan", "--stack", "dev", "--prices", str(bad), "--quiet"]) == 2
    assert "--prices" in capsys.readouterr().err
    assert cli.main(["plan", "--stack", "dev", "--prices", str(tmp_path / "missing.yaml"), "--quiet"]) == 2


def test_reservation_without_live_prices_leaves_vms_unknown() -> None:
    """The shipped table has no reservation prices: with a term its VMs are unknown, other meters keep their price."""
    book = cost.book(None, region="eastus2", currency="USD", reservation="3 Years", meters=[])
    assert book.get(GB300).hourly is None
    assert "reservation is priced by --prices live" in (book.get("vm/Standard_D16ds_v5").unknown_because or "")
    assert book.get("natGateway").hourly is not None


def test_another_currency_needs_live_prices() -> None:
    """The shipped table is in USD: asked for EUR it prices nothing and says why."""
    book = cost.book(None, region="eastus2", currency="EUR", reservation=None, meters=[])
    assert book.get("natGateway").hourly is None
    assert "not EUR" in (book.get("natGateway").unknown_because or "")


def test_pr_comment_shows_the_cost_and_its_change() -> None:
    """The PR comment has a cost row per stack with the change, and one bullet per item whose quantity moved."""
    summary = {
        "racks": 82,
        "cost": {
            "currency": "USD",
            "hourly": 150.5,
            "monthly": 109865.0,
            "unknown": [{"item": "x"}],
            "change": {
                "hourly": 32.4,
                "monthly": 23652.0,
                "items": [{"item": "pool train VMs", "meter": GB300, "before": 1152, "after": 1476, "hourly": 32.4}],
            },
        },
    }
    page = ci_summary.render([ci_summary.digest({"stack": "reference", "summary": summary}, "?")])
    assert "| `reference` | 150.50 USD | 109,865.00 USD | +32.40 USD | +23,652.00 USD | 1 |" in page
    assert f"- `reference`: pool train VMs: `{GB300}` 1,152 -> 1,476: +32.40 USD per hour" in page


RATE = 48.5  # a made-up negotiated GB300 rate: the test checks the arithmetic, not Azure's price


def test_a_one_meter_price_file_prices_the_removal_of_4_racks(
    reference_raw: dict[str, Any],
    state: Path,
    write_stack: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A price file with only the GB300 rate (no `per`: the shipped table's unit) overlays the shipped table:
    retiring 4 racks shows minus 72 x the rate per hour in the text, the JSON and the pull request comment, and the
    OS disks keep the shipped table's price."""
    table = tmp_path / "gb300.yaml"
    table.write_text(f"meters:\n  {GB300}:\n    price: {{value: {RATE}, source: our agreement}}\n", encoding="utf-8")
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["retiredRacks"] = [1, 2, 3, 4]
    stack = str(write_stack(raw, "reference"))
    _, printed, c = _cli(["--stack-file", stack, "--state", str(state), "--prices", str(table)], capsys, tmp_path)
    vms = next(r for r in c["change"]["items"] if r["meter"] == GB300)
    assert vms["hourly"] == pytest.approx(-72 * RATE)
    assert f"pool train VMs: {GB300} 1,152 -> 1,080: -{72 * RATE:,.2f} USD/h" in printed
    disks = next(r for r in c["change"]["items"] if r["meter"] == "disk/Premium_LRS/P15")
    assert disks["hourly"] == pytest.approx(-72 * 38.012142 / 730, abs=1e-3)  # the shipped table, kept
    assert c["change"]["hourly"] == pytest.approx(c["change"]["knownHourly"])  # every moved price is known
    assert c["change"]["hourly"] < -72 * RATE  # the disks go too
    comment = ci_summary.render(ci_summary.load([tmp_path / "plan.json"]), ["reference"])
    assert f"- `reference`: pool train VMs: `{GB300}` 1,152 -> 1,080: -{72 * RATE:,.2f} USD per hour" in comment
    assert "excludes 1,080 Standard_ND128isr_GB300_v6" not in comment  # priced now: not in what is left out


def test_a_change_with_an_unknown_price_never_shows_zero(
    reference_raw: dict[str, Any], state: Path, write_stack: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Retiring 4 racks with the shipped table (GB300 unknown): the change is unknown in the text, the JSON and the
    pull request comment, with the priced part beside it; never +0.00."""
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["retiredRacks"] = [1, 2, 3, 4]
    stack = str(write_stack(raw, "reference"))
    _, printed, c = _cli(["--stack-file", stack, "--state", str(state)], capsys, tmp_path)
    change = c["change"]
    assert (change["hourly"], change["monthly"]) == (None, None)
    assert change["unknown"] == ["-72 Standard_ND128isr_GB300_v6 VMs"]
    assert "change against the deployed state: unknown: no price for -72 Standard_ND128isr_GB300_v6 VMs" in printed
    assert "+0.00" not in printed
    comment = ci_summary.render(ci_summary.load([tmp_path / "plan.json"]), ["reference"])
    assert "| **unknown** | **unknown** |" in comment
    assert "the change's cost is unknown: no price for -72 Standard_ND128isr_GB300_v6 VMs" in comment
    assert "+0.00" not in comment
    assert "excludes 1,080 Standard_ND128isr_GB300_v6 VMs" in comment  # the headline, in the comment too


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (f"meters:\n  {GB300}:\n    price: {{value: .nan}}\n", "must be a finite price of at least 0"),
        (f"meters:\n  {GB300}:\n    price: {{value: -1}}\n", "must be a finite price of at least 0"),
        ("meters:\n  vm/Standard_Made_Up:\n    price: {value: 1}\n", "no shipped meter has this id"),
    ],
)
def test_a_price_file_with_a_bad_price_is_refused(body: str, expected: str, tmp_path: Path) -> None:
    """A NaN or negative price, or a meter the table does not know given without its unit: a usage error naming
    the key, never a cost."""
    table = tmp_path / "p.yaml"
    table.write_text(body, encoding="utf-8")
    with pytest.raises(UsageError) as err:
        cost.file_book(table, "USD")
    assert expected in str(err.value)


def test_a_savings_plan_term_prices_the_gpus_live(dev_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """gb300:cost.savingsPlanTerm asks the live answer's savingsPlan price for the VMs; with the shipped table the
    VMs are unknown, saying the term needs --prices live."""
    monkeypatch.setattr(prices, "live_book", live(FakeRetailPrices()))
    raw = copy.deepcopy(dev_raw)
    raw["cost"] = {"savingsPlanTerm": "3 Years"}
    plan = run_plan("dev", copy.deepcopy(raw), prices="live")
    vms = next(r for r in plan.summary["cost"]["items"] if r["meter"] == GB300)
    assert vms["hourly"] == pytest.approx(vms["quantity"] * 60.0)  # the fixture's 3-year savings plan price
    offline = cost.book(None, region="eastus2", currency="USD", reservation=None, meters=[], savings_plan="1 Year")
    assert "a 1 Year savings plan is priced by --prices live" in (offline.get(GB300).unknown_because or "")


def test_fixed_charges_are_lines_and_usage_is_estimated(
    reference_raw: dict[str, Any], reference_plan: PlanResult
) -> None:
    """Managed Grafana, the private DNS zones and the log alert rule are fixed charges with their own meters (not
    usage-based); managed Prometheus's samples are estimated from the plan's own numbers, labelled as an estimate,
    and move with the scrape interval."""
    c = reference_plan.summary["cost"]
    meters = [r["meter"] for r in c["resources"]]
    assert (meters.count("grafana/Standard"), meters.count("privateDnsZone"), meters.count("alertRule/log")) == (
        1,
        2,
        1,
    )
    assert "azure-native:monitor:ScheduledQueryRule" not in {u["type"] for u in c["usageBased"]}
    (est,) = c["usageEstimates"]
    assert est["nodes"] == reference_plan.summary["vms"]
    assert est["quantity"] == est["seriesPerNode"] * est["nodes"] * 730 * 3600 // 30
    assert "estimate" in est["what"]
    assert f"estimate: {est['quantity']:,} samples ingested by managed Prometheus" in text(
        reference_plan, stack_file="x"
    )
    raw = copy.deepcopy(reference_raw)
    raw.setdefault("monitoring", {}).setdefault("prometheus", {})["scrapeIntervalSeconds"] = 60
    slower = run_plan("reference", raw).summary["cost"]["usageEstimates"][0]
    assert slower["quantity"] == est["quantity"] // 2


def test_a_bad_savings_plan_term_names_the_key(dev_raw: dict[str, Any]) -> None:
    """gb300:cost.savingsPlanTerm accepts none, 1 Year or 3 Years; anything else is refused naming the key."""
    raw = copy.deepcopy(dev_raw)
    raw["cost"] = {"savingsPlanTerm": "2 Years"}
    with pytest.raises(ConfigError) as err:
        config.parse(raw)
    assert "gb300:cost.savingsPlanTerm" in str(err.value)
