"""Quota before deployment: demand from the plan's resources, saved usage files, and Azure's SDK over a fake
HTTP transport (azure-core's seam), with permission errors and timeouts turned into warnings."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from gb300 import cli
from gb300.azure import quota
from gb300.findings import Finding
from gb300.plan import PlanResult
from gb300.rules import quota as quota_rule
from gb300.rules.base import RuleContext
from tests.support import fake_arm, files
from tests.support.fake_arm import SUBSCRIPTION, FakeAzure, Handler, StaticCredential, json_response
from tests.support.policy_support import scale_set

FIXTURES = files.FIXTURES / "quota"
GB300_FAMILY = "standardNDISRGB300V6Family"


def _load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def _quota_findings(plan: PlanResult, snapshot: quota.QuotaSnapshot | None) -> list[Finding]:
    return quota_rule.quota_sufficient(plan.resources, RuleContext(quota=snapshot))


def test_demand_of_the_reference_stack(reference_plan: PlanResult) -> None:
    """The reference stack needs 147,456 GB300 vCPUs (64 racks) and 16 head-node vCPUs in eastus2, zone 1."""
    demands, reserved = quota.demand(reference_plan.resources)
    assert {(d.region, d.family): d.vcpus for d in demands} == {
        ("eastus2", GB300_FAMILY): 147_456,
        ("eastus2", "standardDDSv5Family"): 16,
    }
    gb = next(d for d in demands if d.family == GB300_FAMILY)
    assert gb.zones == ("1",)
    assert gb.pools == ("train",)
    assert reserved == []


@pytest.mark.parametrize("name", ["eastus2-enough.json", "eastus2-enough-rest.json"])
def test_enough_quota_is_silent(reference_plan: PlanResult, name: str) -> None:
    """With enough quota, from either the az CLI list or the REST body, quota yields no finding."""
    snapshot = quota.from_file(FIXTURES / name, ["eastus2"])
    assert _quota_findings(reference_plan, snapshot) == []


def test_too_little_quota_shows_requested_used_limit(reference_plan: PlanResult) -> None:
    """Too little quota is an error per family and for the regional total, with requested / in use / limit."""
    snapshot = quota.from_file(FIXTURES / "eastus2-too-little.json", ["eastus2"])
    found = _quota_findings(reference_plan, snapshot)
    assert [f.level.label for f in found] == ["error", "error"]
    family = next(f for f in found if GB300_FAMILY in f.message)
    assert "requested 147,456 vCPUs, in use 2,304, limit 100,000" in family.message
    assert "raise Standard NDISRGB300V6 Family vCPUs in eastus2 to at least 149,760" in family.message
    total = next(f for f in found if "cores" in f.message)
    assert "requested 147,472 vCPUs, in use 10,000, limit 150,000" in total.message


def test_family_listed_with_zero_limit(reference_plan: PlanResult) -> None:
    """A subscription never granted GB300 quota gets an error asking for the whole amount."""
    found = _quota_findings(reference_plan, quota.from_file(FIXTURES / "eastus2-no-gb300.json", ["eastus2"]))
    gb = [f for f in found if GB300_FAMILY in f.message]
    assert len(gb) == 1
    assert "limit 0" in gb[0].message


def test_family_missing_from_usage_list(reference_plan: PlanResult) -> None:
    """A family absent from the usage list is a warning when the catalog's family name is unverified."""
    usages = [u for u in _load("eastus2-enough.json") if u["name"]["value"] != GB300_FAMILY]
    snapshot = quota.QuotaSnapshot("test", {"eastus2": quota.RegionQuota("eastus2", tuple(quota.parse_usages(usages)))})
    found = _quota_findings(reference_plan, snapshot)
    assert [f.level.label for f in found] == ["warning"]
    assert "unverified" in found[0].message


def test_family_names_match_ignoring_case_and_spaces() -> None:
    """'Standard NDISRGB300V6 Family' and 'standardndisrgb300v6family' are the same family."""
    region = quota.RegionQuota("eastus2", (quota.Usage("Standard NDISRGB300V6 Family", "x", 1, 2),))
    assert region.usage("standardNDISRGB300V6Family") is not None


def test_no_source_is_info(reference_plan: PlanResult) -> None:
    """Without a quota source the rule notes what it would need, at info level."""
    found = _quota_findings(reference_plan, None)
    assert [f.level.label for f in found] == ["info"]
    assert "147,456 vCPUs" in found[0].message
    assert "--quota" in found[0].message


def test_capacity_reservation_skips_the_cores_check() -> None:
    """A pool targeting a capacity reservation group is not counted against quota, and says so."""
    crg = "/subscriptions/s/resourceGroups/r/providers/Microsoft.Compute/capacityReservationGroups/gb300-crg"
    resources = [scale_set("r1", reservation=crg), scale_set("r2", reservation=crg)]
    snapshot = quota.from_file(FIXTURES / "eastus2-no-gb300.json", ["eastus2"])
    found = quota_rule.quota_sufficient(resources, RuleContext(quota=snapshot))
    assert [f.level.label for f in found] == ["info"]
    assert "gb300-crg" in found[0].message


@pytest.mark.parametrize(
    ("content", "words"),
    [
        pytest.param("not json", "is not JSON", id="not-json"),
        pytest.param('{"values": []}', "must be a list", id="wrong-shape"),
        pytest.param('[{"name": {"value": "cores"}}]', "entry 0", id="missing-numbers"),
    ],
)
def test_bad_usage_files_are_usage_errors(tmp_path: Path, content: str, words: str) -> None:
    """A quota file that is not a usage list is a clear error naming the file."""
    path = tmp_path / "usage.json"
    path.write_text(content)
    with pytest.raises(quota.QuotaFileError, match=words):
        quota.read_usage_file(path)


def test_cli_too_little_quota_exits_1_and_prints_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    """`gb300 plan --stack reference --quota <too-little>` exits 1 and prints requested / in use / limit."""
    code = cli.main(["plan", "--stack", "reference", "--quota", str(FIXTURES / "eastus2-too-little.json"), "--quiet"])
    out = capsys.readouterr().out
    assert code == 1
    assert "requested 147,456 vCPUs, in use 2,304, limit 100,000" in out
    assert "quota-sufficient" in out


def test_cli_missing_quota_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A --quota file that does not exist is a usage error (exit 2) before anything is planned."""
    assert cli.main(["plan", "--stack", "dev", "--quota", str(tmp_path / "nope.json")]) == 2
    assert "cannot be read" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------
# Live: the real azure-mgmt-compute client over azure-core's RequestsTransport, whose requests session
# answers from saved Azure bodies instead of the network.


def _serve(name: str) -> Handler:
    return lambda request: json_response(request, 200, _load(name))


def _live(routes: dict[str, Handler]) -> tuple[FakeAzure, Callable[[list[str]], quota.QuotaSnapshot]]:
    adapter = FakeAzure(routes)

    def fetch(regions: list[str]) -> quota.QuotaSnapshot:
        return quota.fetch_live(
            regions,
            subscription_id=SUBSCRIPTION,
            credential=StaticCredential(),
            transport=fake_arm.transport(adapter),
            retry_total=0,
        )

    return adapter, fetch


def _usage_body(name: str) -> Handler:
    return lambda request: json_response(request, 200, {"value": _load(name)})


def test_live_enough_quota_and_size_offered(reference_plan: PlanResult) -> None:
    """Live, the SDK reads usages and resource SKUs for eastus2 and finds nothing wrong."""
    adapter, fetch = _live(
        {"/locations/eastus2/usages": _usage_body("eastus2-enough.json"), "/skus": _serve("eastus2-resource-skus.json")}
    )
    snapshot = fetch(["eastus2"])
    region = snapshot.regions["eastus2"]
    assert region.unverified is None
    assert region.offers is not None
    assert region.offers["Standard_ND128isr_GB300_v6"].zones == ("1", "2", "3")
    assert _quota_findings(reference_plan, snapshot) == []
    sku_call = next(s for s in adapter.seen if "/skus" in s)
    assert parse_qs(sku_call.split("?", 1)[1])["$filter"] == ["location eq 'eastus2'"]
    assert any(
        f"/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Compute/locations/eastus2/usages" in s for s in adapter.seen
    )


@pytest.mark.parametrize(
    ("usages", "skus", "levels", "words"),
    [
        pytest.param(
            "eastus2-too-little.json",
            "eastus2-resource-skus.json",
            ["error", "error"],
            ["requested 147,456 vCPUs, in use 2,304, limit 100,000"],
            id="too-little-quota",
        ),
        pytest.param(
            "eastus2-enough.json",
            "eastus2-resource-skus-restricted.json",
            ["error"],
            ["restricted in eastus2", "NotAvailableForSubscription"],
            id="size-restricted-for-subscription",
        ),
        pytest.param(
            "eastus2-enough.json",
            "eastus2-resource-skus-zone1-restricted.json",
            ["error"],
            ["zone(s) 1", "2, 3"],
            id="zone-restricted",
        ),
    ],
)
def test_live_answers_that_stop_the_deploy(
    reference_plan: PlanResult, usages: str, skus: str, levels: list[str], words: list[str]
) -> None:
    """Live, too little quota (the same errors as the saved file), a size the SKU API restricts for the subscription
    in the region, or restricted in the stack's zone (naming the zones that are offered) is an error."""
    _, fetch = _live({"/locations/eastus2/usages": _usage_body(usages), "/skus": _serve(skus)})
    found = _quota_findings(reference_plan, fetch(["eastus2"]))
    assert [f.level.label for f in found] == levels
    for word in words:
        assert any(word in f.message for f in found), (word, [f.message for f in found])


def test_live_size_not_offered(reference_plan: PlanResult) -> None:
    """A size missing from the region's SKU list is an error telling how to find a region that has it."""
    body = _load("eastus2-resource-skus.json")
    body["value"] = [s for s in body["value"] if s["name"] != "Standard_ND128isr_GB300_v6"]
    _, fetch = _live(
        {
            "/locations/eastus2/usages": _usage_body("eastus2-enough.json"),
            "/skus": lambda request: json_response(request, 200, body),
        }
    )
    found = _quota_findings(reference_plan, fetch(["eastus2"]))
    assert any("not offered in eastus2" in f.message for f in found)


def test_live_forbidden_is_a_warning(reference_plan: PlanResult) -> None:
    """HTTP 403 from Azure becomes a warning that quota was not verified, never a crash."""
    _, fetch = _live({"/locations/eastus2/usages": fake_arm.forbidden, "/skus": _serve("eastus2-resource-skus.json")})
    snapshot = fetch(["eastus2"])
    assert snapshot.regions["eastus2"].unverified is not None
    found = _quota_findings(reference_plan, snapshot)
    assert [f.level.label for f in found] == ["warning"]
    assert "not verified" in found[0].message
    assert "HTTP 403" in found[0].message


def test_live_timeout_is_a_warning(reference_plan: PlanResult) -> None:
    """A timeout talking to Azure becomes a warning that quota was not verified."""
    _, fetch = _live({"/locations/eastus2/usages": fake_arm.timeout})
    found = _quota_findings(reference_plan, fetch(["eastus2"]))
    assert [f.level.label for f in found] == ["warning"]
    assert "did not answer in time" in found[0].message


def test_live_without_subscription_is_a_warning(
    monkeypatch: pytest.MonkeyPatch, reference_plan: PlanResult, tmp_path: Path
) -> None:
    """With no subscription id anywhere (no variable, no `az`), live quota is a warning that says which to set."""
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID", raising=False)
    monkeypatch.delenv("ARM_SUBSCRIPTION_ID", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    snapshot = quota.fetch_live(["eastus2"], credential=StaticCredential())
    found = _quota_findings(reference_plan, snapshot)
    assert [f.level.label for f in found] == ["warning"]
    assert "ARM_SUBSCRIPTION_ID" in found[0].message
    assert "AZURE_SUBSCRIPTION_ID" in found[0].message


def test_quota_rule_inside_the_plan(reference_plan: PlanResult, reference_raw: dict[str, Any]) -> None:
    """gb300:policy.quota in the stack config reaches the plan's findings as rule quota-sufficient."""
    from gb300 import rules  # noqa: PLC0415

    snapshot = quota.fetch(str(FIXTURES / "eastus2-too-little.json"), reference_plan.resources)
    found = rules.evaluate(reference_plan.resources, reference_plan.config.policy, quota=snapshot)
    found = [f for f in found if f.level.label != "info"]  # the tied account's note on account keys is info
    assert {f.rule for f in found} == {"quota-sufficient"}
    assert all(f.level.label == "error" for f in found)
    del reference_raw
