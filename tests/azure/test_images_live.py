"""Whether Azure has each image version the stack boots: asked live through azure-mgmt-compute over a fake HTTP
transport (Azure's recorded answers), warned about offline while the catalog's entry is unverified."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from typing import Any

import pytest

from gb300 import cli, config
from gb300.azure import images_live, lustre_live, quota
from gb300.facts import catalog
from gb300.facts.loader import data
from gb300.findings import Level
from gb300.rules import images
from tests.support import fake_arm, files
from tests.support.fake_arm import SUBSCRIPTION, FakeAzure, Handler, StaticCredential, json_response

FIXTURES = files.FIXTURES / "images"
QUOTA = files.FIXTURES / "quota"
PINNED = "microsoft-dsvm:ubuntu-hpc:2404-gb:24.04.2026052801"
PUB = f"/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Compute/locations/eastus2/publishers"
GB_VERSION = f"{PUB}/microsoft-dsvm/artifacttypes/vmimage/offers/ubuntu-hpc/skus/2404-gb/versions/24.04.2026052801"
HEAD_VERSIONS = f"{PUB}/canonical/artifacttypes/vmimage/offers/ubuntu-24_04-lts/skus/server/versions"


def _serve(name: str, status: int = 200) -> Handler:
    body = json.loads((FIXTURES / name).read_text())
    return lambda request: json_response(request, status, body)


def _quota_body(name: str) -> Handler:
    body = {"value": json.loads((QUOTA / name).read_text())}
    return lambda request: json_response(request, 200, body)


def _azure(gb_version: Handler, head: Handler | None = None) -> FakeAzure:
    """Azure with enough quota, the GB300 size offered, the head's image listed, and ``gb_version`` for the pin."""
    return FakeAzure(
        {
            "/locations/eastus2/usages": _quota_body("eastus2-enough.json"),
            "/skus": lambda request: json_response(
                request, 200, json.loads((QUOTA / "eastus2-resource-skus.json").read_text())
            ),
            GB_VERSION: gb_version,
            HEAD_VERSIONS: head or _serve("eastus2-server-versions.json"),
            "/getRequiredAmlFSSubnetsSize": lambda request: json_response(request, 200, {"filesystemSubnetSize": 53}),
        }
    )


def _go_live(monkeypatch: pytest.MonkeyPatch, adapter: FakeAzure) -> None:
    """Every live call of the plan goes through azure-core's RequestsTransport to ``adapter``, as a signed-in user."""
    transport = fake_arm.transport(adapter)
    common: dict[str, Any] = {"subscription_id": SUBSCRIPTION, "credential": StaticCredential(), "retry_total": 0}
    monkeypatch.setattr(quota, "fetch_live", functools.partial(quota.fetch_live, transport=transport, **common))
    monkeypatch.setattr(
        images_live, "fetch_live", functools.partial(images_live.fetch_live, transport=transport, **common)
    )
    monkeypatch.setattr(lustre_live, "ask", functools.partial(lustre_live.ask, transport=transport, **common))


def test_live_plan_fails_when_azure_lacks_the_pinned_version(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gb300 plan --quota live` exits 1 with an error naming the pinned URN and the region when Azure answers 404."""
    adapter = _azure(_serve("not-found.json", 404))
    _go_live(monkeypatch, adapter)
    code = cli.main(["plan", "--stack", "reference", "--quota", "live", "--quiet"])
    out = capsys.readouterr().out
    assert code == 1
    [line] = [line for line in out.splitlines() if line.startswith("error") and "image-version-exists" in line]
    assert f"{PINNED} does not exist in eastus2" in line
    assert "az vm image list --publisher microsoft-dsvm --offer ubuntu-hpc --sku 2404-gb" in line
    assert any(GB_VERSION in seen for seen in adapter.seen)


def test_live_plan_passes_when_azure_has_the_pinned_version(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With Azure's answer for the pinned version and the head's image, the plan passes and the rule says nothing."""
    adapter = _azure(_serve("eastus2-2404-gb-24.04.2026052801.json"))
    _go_live(monkeypatch, adapter)
    code = cli.main(["plan", "--stack", "reference", "--quota", "live", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "image-version-exists" not in out
    top = next(s for s in adapter.seen if HEAD_VERSIONS in s)
    assert "$top=1" in top


@pytest.mark.parametrize(
    ("handler", "why"),
    [(fake_arm.forbidden, "HTTP 403"), (fake_arm.timeout, "did not answer in time")],
    ids=["forbidden", "timeout"],
)
def test_refusal_or_timeout_is_a_warning(reference_raw: dict[str, Any], handler: Handler, why: str) -> None:
    """A 403 or a timeout asking about the pinned version is a warning that says why and how to check by hand."""
    cfg = config.parse(copy.deepcopy(reference_raw))
    answers = images_live.fetch_live(
        images_live.used_images(cfg),
        subscription_id=SUBSCRIPTION,
        credential=StaticCredential(),
        transport=fake_arm.transport(_azure(handler)),
        retry_total=0,
    )
    [found] = images.image_version_exists(cfg, answers)
    assert found.level == Level.WARNING
    assert found.resource == "gb300:gpuPools[0].image"
    assert why in found.message
    assert f"az vm image show --urn {PINNED} --location eastus2" in found.message


def test_image_ids_are_not_asked_about(reference_raw: dict[str, Any]) -> None:
    """A pool on an image resource id is neither asked about nor reported: only marketplace URNs are."""
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["image"] = "/subscriptions/s/resourceGroups/r/providers/Microsoft.Compute/galleries/g/images/i"
    cfg = config.parse(raw)
    assert [u.where for u in images_live.used_images(cfg)] == ["gb300:head.image"]
    assert images.image_version_exists(cfg, None) == []


def test_offline_an_unverified_pin_is_a_warning_naming_the_check(reference_raw: dict[str, Any]) -> None:
    """Offline, the reference stack's pin (an inferred catalog entry) is a warning with the version and `az` command."""
    [found] = images.image_version_exists(config.parse(copy.deepcopy(reference_raw)), None)
    assert found.level == Level.WARNING
    assert found.resource == "gb300:gpuPools[0].image"
    assert "24.04.2026052801" in found.message
    assert f"az vm image show --urn {PINNED} --location eastus2" in found.message
    assert "status: verified" in found.message


def test_offline_a_verified_pin_is_silent(reference_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the catalog entry of the pinned version says `status: verified`, the offline rule is silent."""
    cat = catalog.load()
    gb = cat.images["microsoft-dsvm:ubuntu-hpc:2404-gb"]
    entry = dataclasses.replace(gb.versions["24.04.2026052801"], status="verified")
    verified = dataclasses.replace(gb, versions={**gb.versions, entry.version: entry})
    patched = dataclasses.replace(cat, images={**cat.images, "microsoft-dsvm:ubuntu-hpc:2404-gb": verified})
    monkeypatch.setattr(catalog, "load", lambda: patched)
    assert images.image_version_exists(config.parse(copy.deepcopy(reference_raw)), None) == []


def test_catalog_entries_inherit_the_images_status() -> None:
    """An image version entry without its own status takes the image's versionsStatus (unverified today); one that
    names its own (the version Azure's example shows) keeps it."""
    raw = data("images.yaml")["images"]["microsoft-dsvm:ubuntu-hpc:2404-gb"]["versions"]
    gb = catalog.load().images["microsoft-dsvm:ubuntu-hpc:2404-gb"]
    inherited = {v.status for name, v in gb.versions.items() if "status" not in raw[name]}
    assert inherited == {gb.versions_status} == {"unverified"}
    assert gb.versions["24.04.2025110401"].status == raw["24.04.2025110401"]["status"] == "verified"
