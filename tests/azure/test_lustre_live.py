"""Azure's own Lustre subnet answer, asked only live, through azure-core's real pipeline over a fake HTTP transport:
it checks the configured subnet and never sizes it; a refusal (the read-only identity) is a warning."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import requests

from gb300.azure import images_live, lustre_live
from gb300.findings import Level
from gb300.plan import run_plan
from tests.support import fake_arm
from tests.support.fake_arm import SUBSCRIPTION, FakeAzure, StaticCredential, json_response

ROUTE = "/providers/Microsoft.StorageCache/getRequiredAmlFSSubnetsSize"


def _ask(handler: Any) -> tuple[FakeAzure, lustre_live.Answer]:
    adapter = FakeAzure({ROUTE: handler})
    answer = lustre_live.ask(
        "AMLFS-Durable-Premium-500",
        128,
        subscription_id=SUBSCRIPTION,
        credential=StaticCredential(),
        transport=fake_arm.transport(adapter),
        retry_total=0,
    )
    return adapter, answer


def test_azures_answer_is_read() -> None:
    """The POST carries the SKU and capacity, and Azure's filesystemSubnetSize comes back as the answer."""
    bodies: list[dict[str, Any]] = []

    def answer(request: requests.PreparedRequest) -> requests.Response:
        bodies.append(json.loads(request.body or b"{}"))
        return json_response(request, 200, {"filesystemSubnetSize": 53})

    adapter, got = _ask(answer)
    assert got == lustre_live.Answer(53)
    assert bodies == [{"sku": {"name": "AMLFS-Durable-Premium-500"}, "storageCapacityTiB": 128}]
    assert adapter.seen == [
        f"POST /subscriptions/{SUBSCRIPTION}{ROUTE}?api-version={lustre_live.API_VERSION}",
    ]


@pytest.mark.parametrize(
    ("handler", "why"),
    [(fake_arm.forbidden, "HTTP 403: the identity may not call"), (fake_arm.timeout, "Azure did not answer")],
    ids=["forbidden", "timeout"],
)
def test_refusal_or_timeout_is_a_warning(handler: Any, why: str) -> None:
    """A 403 (Reader may not POST) or a timeout leaves the answer unverified: a warning naming why."""
    _, got = _ask(handler)
    assert got.addresses is None
    assert got.unverified is not None
    assert why in got.unverified
    [finding] = lustre_live.findings(got, "10.40.8.0/24", 5, sku="AMLFS-Durable-Premium-500", capacity_tib=128)
    assert finding.level == Level.WARNING
    assert finding.resource == "gb300:storage.lustre.subnetPrefixLength"


@pytest.mark.parametrize(("needed", "errors"), [(251, 0), (252, 1)])
def test_answer_larger_than_the_subnet_is_an_error(needed: int, errors: int) -> None:
    """More free addresses than a /24 holds after Azure's five reserved is an error naming the config key."""
    found = lustre_live.findings(
        lustre_live.Answer(needed), "10.40.8.0/24", 5, sku="AMLFS-Durable-Premium-500", capacity_tib=128
    )
    assert [f.level for f in found] == [Level.ERROR] * errors


def test_live_plan_checks_but_never_moves_subnets(
    reference_raw: dict[str, Any], reference_plan: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gone live, a too-large answer fails the plan with lustre-subnet-size while the subnets stay as configured."""
    monkeypatch.setattr(lustre_live, "ask", lambda sku, capacity: lustre_live.Answer(4000))
    monkeypatch.setattr("gb300.azure.quota.fetch_live", lambda regions, **kw: _no_quota(regions))
    monkeypatch.setattr("gb300.azure.images_live.fetch_live", lambda images, **kw: images_live.ImageAnswers())
    plan = run_plan("reference", copy.deepcopy(reference_raw), quota="live")
    assert [f.level for f in plan.findings if f.rule == "lustre-subnet-size"] == [Level.ERROR]
    prefixes = sorted(r.inputs["addressPrefix"] for r in plan.resources if r.type == "azure-native:network:Subnet")
    assert prefixes == sorted(
        r.inputs["addressPrefix"] for r in reference_plan.resources if r.type == "azure-native:network:Subnet"
    )


def _no_quota(regions: list[str]) -> Any:
    from gb300.azure import quota  # noqa: PLC0415

    return quota.QuotaSnapshot(quota.LIVE, {r: quota.RegionQuota(r, unverified="offline test") for r in regions})
