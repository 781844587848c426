"""A landing zone's VNet read live (gb300.azure.vnet_live): the real azure-mgmt-network client over azure-core's
RequestsTransport, whose requests session answers like Azure Resource Manager instead of the network. The carved
space must lie inside the VNet and clear of its other subnets; a missing VNet is an error, no permission or no
answer a warning."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300 import config
from gb300.azure import images_live, quota, vnet_live
from gb300.components import network as network_component
from gb300.config import stacks as gb300_stacks
from gb300.config.netplan import SubnetPlan
from gb300.findings import Level
from gb300.plan import run_plan
from tests.support import fake_arm
from tests.support.fake_arm import SUBSCRIPTION, FakeAzure, StaticCredential, forbidden, json_response, timeout

VNET_ID = (
    f"/subscriptions/{SUBSCRIPTION}/resourceGroups/spoke-gpu-rg/providers/Microsoft.Network/virtualNetworks/"
    "spoke-gpu-vnet"
)
SPACE = "10.60.0.0/18"


def _vnet_body(prefixes: list[str], subnets: list[tuple[str, str]]) -> dict[str, Any]:
    """A GET of a VNet as ARM answers it (trimmed to what the check reads, plus what every answer has)."""
    return {
        "id": VNET_ID,
        "name": "spoke-gpu-vnet",
        "type": "Microsoft.Network/virtualNetworks",
        "location": "eastus2",
        "properties": {
            "provisioningState": "Succeeded",
            "addressSpace": {"addressPrefixes": prefixes},
            "subnets": [
                {"id": f"{VNET_ID}/subnets/{name}", "name": name, "properties": {"addressPrefix": prefix}}
                for name, prefix in subnets
            ],
        },
    }


def _carved() -> list[SubnetPlan]:
    cfg = config.parse(config.load_stack_file(gb300_stacks.stack_file("landingzone")))
    return network_component.plan_subnets(
        SPACE, gpu_vms=18, bastion=cfg.network.bastion, storage_prefix=None, gpu_prefix=None
    )


def _check(handler: fake_arm.Handler) -> tuple[FakeAzure, list[Any]]:
    adapter = FakeAzure({"/virtualNetworks/spoke-gpu-vnet": handler})
    vnet = config.resource_ids.parse(VNET_ID)
    answer = vnet_live.fetch(vnet, credential=StaticCredential(), transport=fake_arm.transport(adapter), retry_total=0)
    return adapter, vnet_live.findings(answer, VNET_ID, SPACE, _carved())


def _serve(body: dict[str, Any]) -> fake_arm.Handler:
    return lambda request: json_response(request, 200, body)


HUB_SUBNETS = [("workloads", "10.60.64.0/24"), ("AzureFirewallSubnet", "10.60.128.0/26")]


def test_carved_space_inside_the_vnet_and_clear_of_its_subnets_is_silent() -> None:
    """A free /18 of the spoke's /16 passes; the SDK asked for exactly this VNet in its subscription and group."""
    adapter, found = _check(_serve(_vnet_body(["10.60.0.0/16"], HUB_SUBNETS)))
    assert found == []
    (call,) = adapter.seen
    assert call.startswith(
        f"GET /subscriptions/{SUBSCRIPTION}/resourceGroups/spoke-gpu-rg/providers/Microsoft.Network/"
        "virtualNetworks/spoke-gpu-vnet?"
    )


def test_gb300s_own_deployed_subnets_are_not_an_overlap() -> None:
    """Re-planning a deployed cluster: the VNet holds gb300's own subnets at their carved prefixes, which is fine."""
    ours = [(p.name, p.prefix) for p in _carved()]
    _, found = _check(_serve(_vnet_body(["10.60.0.0/16"], [*HUB_SUBNETS, *ours])))
    assert found == []


@pytest.mark.parametrize(
    ("prefixes", "subnets", "words"),
    [
        pytest.param(
            ["10.61.0.0/16"], [], ["gb300:network.addressSpace", "must lie inside", "10.61.0.0/16"], id="outside"
        ),
        pytest.param(
            ["10.60.0.0/16"],
            [("workloads", "10.60.8.0/24")],
            ["gb300:network.addressSpace", "must not overlap", "workloads (10.60.8.0/24)"],
            id="overlaps-a-hub-subnet",
        ),
        pytest.param(
            ["10.60.0.0/16"],
            [("head", "10.60.10.0/27")],
            ["must not overlap", "head (10.60.10.0/27)", "one of gb300's subnet names"],
            id="hub-subnet-named-like-gb300s",
        ),
    ],
)
def test_carved_space_the_vnet_cannot_hold_is_an_error(
    prefixes: list[str], subnets: list[tuple[str, str]], words: list[str]
) -> None:
    """A space outside the VNet's prefixes, or over a subnet that is not gb300's, is one error naming the key."""
    _, found = _check(_serve(_vnet_body(prefixes, subnets)))
    assert [f.level for f in found] == [Level.ERROR]
    text = f"{found[0].resource}: {found[0].message}"
    for word in words:
        assert word in text


def test_missing_vnet_is_an_error_naming_the_key() -> None:
    """Azure's 404 for the VNet: the hub piece the stack names is not there."""
    _, found = _check(lambda request: json_response(request, 404, {"error": {"code": "ResourceNotFound"}}))
    assert [(f.level, f.resource) for f in found] == [(Level.ERROR, "gb300:network.existingVnetId")]
    assert "does not exist" in found[0].message


@pytest.mark.parametrize(
    ("handler", "words"),
    [
        pytest.param(forbidden, "HTTP 403", id="forbidden"),
        pytest.param(timeout, "did not answer in time", id="timeout"),
    ],
)
def test_no_permission_or_no_answer_is_a_warning(handler: fake_arm.Handler, words: str) -> None:
    """A 403 or a timeout says what was not checked, as a warning, never a traceback."""
    _, found = _check(handler)
    assert [f.level for f in found] == [Level.WARNING]
    assert words in found[0].message
    assert "not checked" in found[0].message


def test_live_plan_of_the_landing_zone_reads_the_vnet(monkeypatch: pytest.MonkeyPatch) -> None:
    """`gb300 plan --quota live` reads the named VNet: a carved space over a hub subnet fails the plan under rule
    subnet-fits-pool, and the offline plan of the same stack does not ask Azure at all."""
    adapter = FakeAzure({"/virtualNetworks/spoke-gpu-vnet": _serve(_vnet_body(["10.60.0.0/16"], [("x", SPACE)]))})
    real_fetch = vnet_live.fetch
    monkeypatch.setattr(
        vnet_live,
        "fetch",
        lambda vnet: real_fetch(
            vnet, credential=StaticCredential(), transport=fake_arm.transport(adapter), retry_total=0
        ),
    )
    monkeypatch.setattr("gb300.azure.quota.fetch_live", lambda regions, **kw: _no_quota(regions))
    monkeypatch.setattr("gb300.azure.images_live.fetch_live", lambda images, **kw: images_live.ImageAnswers())
    raw = config.load_stack_file(gb300_stacks.stack_file("landingzone"))
    offline = run_plan("landingzone", copy.deepcopy(raw))
    assert adapter.seen == []
    assert [f for f in offline.findings if f.resource == "gb300:network.addressSpace"] == []
    live = run_plan("landingzone", copy.deepcopy(raw), quota="live")
    found = [f for f in live.findings if f.resource == "gb300:network.addressSpace"]
    assert [(f.rule, f.level) for f in found] == [("subnet-fits-pool", Level.ERROR)]
    assert len(adapter.seen) == 1


def _no_quota(regions: list[str]) -> Any:
    return quota.QuotaSnapshot(quota.LIVE, {r: quota.RegionQuota(r, unverified="offline test") for r in regions})
