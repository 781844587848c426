"""capacity-reservation-supported: an ND pool on a capacity reservation group is told what Azure supports, from
data/reservations.yaml offline and from the size's own Resource SKU capabilities when the plan goes live (the
real azure-mgmt-compute client over a fake HTTP transport, azure-core's seam)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gb300 import config, rules
from gb300.azure import quota
from gb300.facts import reservations
from gb300.findings import Level
from gb300.rules.reservations import capacity_reservation_supported
from tests.support import fake_arm, files
from tests.support.fake_arm import SUBSCRIPTION, FakeAzure, StaticCredential, json_response

GROUP = (
    "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Compute/"
    "capacityReservationGroups/crg"
)
KEY = "gb300:gpuPools[0].capacityReservationGroupId"


def _cfg(dev_raw: dict[str, Any], **pool: Any) -> config.StackConfig:
    raw = copy.deepcopy(dev_raw)
    raw["gpuPools"][0].update(pool)
    return config.parse(raw)


def _live(cfg: config.StackConfig, capabilities: list[dict[str, str]] | None) -> quota.QuotaSnapshot:
    """Azure's answers for the stack's region, the GPU size's SKU listing ``capabilities`` besides its own."""
    region = cfg.cluster.location
    skus = json.loads((files.FIXTURES / "quota" / "eastus2-resource-skus.json").read_text())
    for sku in skus["value"]:
        sku["locations"] = [region]
        for info in sku.get("locationInfo", []):
            info["location"] = region
        if sku["name"] == cfg.gpu_pools[0].vm_size and capabilities is not None:
            sku["capabilities"] = [*sku["capabilities"], *capabilities]
    usages = json.loads((files.FIXTURES / "quota" / "eastus2-enough.json").read_text())
    adapter = FakeAzure(
        {
            f"/locations/{region}/usages": lambda request: json_response(request, 200, {"value": usages}),
            "/skus": lambda request: json_response(request, 200, skus),
        }
    )
    return quota.fetch_live(
        [region],
        subscription_id=SUBSCRIPTION,
        credential=StaticCredential(),
        transport=fake_arm.transport(adapter),
        retry_total=0,
    )


def _caps(supported: str, types: str | None = None) -> list[dict[str, str]]:
    caps = [{"name": "CapacityReservationSupported", "value": supported}]
    return caps if types is None else [*caps, {"name": "SupportedCapacityReservationTypes", "value": types}]


def test_an_nd_pool_on_a_reservation_group_is_warned_with_what_block_reservations_need(
    dev_raw: dict[str, Any],
) -> None:
    """The dev stack's GB300 pool with a reservation group, offline: one warning at the key, naming the data file,
    its source, the block reservation's capability and its capacity steps, and that --quota live asks Azure."""
    facts = reservations.load()
    [report] = capacity_reservation_supported.check(_cfg(dev_raw, capacityReservationGroupId=GROUP), None)
    assert report.level == Level.WARNING
    assert report.resource == KEY
    assert "from infra/gb300/data/reservations.yaml" in report.message
    assert facts.on_demand_source in report.message
    assert f"{facts.block_value} in {facts.block_capability}" in report.message
    assert ", ".join(str(c) for c in facts.block_capacities) in report.message
    assert "--quota live" in report.message


@pytest.mark.parametrize(("vm_size", "supported"), [("Standard_ND128isr_GB300_v6", False), ("Standard_D4s_v5", True)])
def test_the_series_comes_from_the_data_file(vm_size: str, supported: bool) -> None:
    """ND sizes are refused by on-demand reservations (data/reservations.yaml); others are not."""
    assert reservations.load().on_demand_supports(vm_size) is supported


def test_a_pool_without_a_reservation_group_is_quiet(dev_raw: dict[str, Any]) -> None:
    """No key, no finding, offline or live."""
    cfg = _cfg(dev_raw)
    assert capacity_reservation_supported.check(cfg, None) == []
    assert capacity_reservation_supported.check(cfg, _live(cfg, _caps("True", "Block"))) == []


@pytest.mark.parametrize(
    ("capabilities", "level", "words"),
    [
        pytest.param(
            _caps("True", "Block"),
            Level.WARNING,
            ["SupportedCapacityReservationTypes Block", "VMS"],
            id="block-only",
        ),
        pytest.param(
            _caps("True", "Targeted,Block"),
            Level.INFO,
            ["on-demand capacity reservations hold the size", "overrides infra/gb300/data/reservations.yaml"],
            id="targeted",
        ),
        pytest.param(_caps("False"), Level.ERROR, ["CapacityReservationSupported False", "Remove the key"], id="none"),
        pytest.param(_caps("True", "Targeted"), Level.INFO, ["Targeted"], id="targeted-only"),
    ],
)
def test_live_the_sizes_own_capabilities_win_and_the_finding_says_so(
    dev_raw: dict[str, Any], capabilities: list[dict[str, str]], level: Level, words: list[str]
) -> None:
    """With --quota live, the GPU size's Resource SKU in the stack's region decides: Block only is a warning with
    what a block reservation needs, Targeted overrides the data file (info saying so), no support at all is an
    error; each finding names Azure's live answer as its source, not the data file's."""
    cfg = _cfg(dev_raw, capacityReservationGroupId=GROUP)
    [report] = capacity_reservation_supported.check(cfg, _live(cfg, capabilities))
    assert report.level == level
    assert report.resource == KEY
    assert f"from Azure's Resource SKUs in {cfg.cluster.location}, live" in report.message
    assert reservations.load().on_demand_source not in report.message
    vms = cfg.gpu_pools[0].racks * cfg.gpu_pools[0].sku.vms_per_nvlink_domain
    for word in words:
        assert word.replace("VMS", f"its {vms} VMs") in report.message, report.message


def test_live_without_the_capability_falls_back_to_the_data_file(dev_raw: dict[str, Any]) -> None:
    """A live SKU that lists no capacity reservation capability, or a region Azure did not answer, leaves the data
    file's answer in place, and the finding names the data file."""
    cfg = _cfg(dev_raw, capacityReservationGroupId=GROUP)
    unanswered = quota.QuotaSnapshot(
        quota.LIVE, {cfg.cluster.location: quota.RegionQuota(cfg.cluster.location, unverified="HTTP 403")}
    )
    for snapshot in (_live(cfg, None), unanswered):
        [report] = capacity_reservation_supported.check(cfg, snapshot)
        assert report.level == Level.WARNING
        assert "from infra/gb300/data/reservations.yaml" in report.message


def test_the_plans_rules_hand_the_live_snapshot_to_the_rule(dev_raw: dict[str, Any]) -> None:
    """Through the rule registry (as gb300 plan runs it), the quota snapshot reaches the rule: a size Azure says
    supports no reservation is an error finding named capacity-reservation-supported."""
    cfg = _cfg(dev_raw, capacityReservationGroupId=GROUP)
    found = rules.evaluate([], cfg.policy, quota=_live(cfg, _caps("False")), config=cfg)
    [finding] = [f for f in found if f.rule == "capacity-reservation-supported"]
    assert finding.level == Level.ERROR
