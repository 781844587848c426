"""Pinned images and what they carry: the catalog read from azhpc-images' history, the rule
``image-version-pinned``, and the node's check of the image it booted (00-preflight in a sandbox)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gb300 import config
from gb300.facts import catalog
from gb300.node import context as node_context
from gb300.node.boot_context import BootstrapContext
from gb300.node.custom_data import render_custom_data
from gb300.plan import run_plan
from gb300.rules import images
from tests.support.sandbox import Sandbox, hpc_image_machine

GB_IMAGE = "microsoft-dsvm:ubuntu-hpc:2404-gb"
PREFLIGHT_RECORD = "/var/lib/gb300/steps/00-preflight.done"


def _pinned(raw: dict[str, Any]) -> str:
    return str(raw["gpuPools"][0]["image"])


@pytest.mark.parametrize("stack", ["reference_raw", "dev_raw"])
def test_shipped_stacks_pin_a_version_the_catalog_knows(stack: str, request: pytest.FixtureRequest) -> None:
    """Both shipped stacks pin a GB image version the catalog lists, and the rule is silent on them."""
    raw: dict[str, Any] = request.getfixturevalue(stack)
    image = _pinned(raw)
    urn, version = image.rsplit(":", 1)
    assert urn == GB_IMAGE
    known = catalog.load().image(image)
    assert known is not None
    assert version in known.versions
    assert images.findings(config.parse(raw)) == []


def _with_image(raw: dict[str, Any], image: str, **software: str) -> config.StackConfig:
    out = copy.deepcopy(raw)
    out["gpuPools"][0]["image"] = image
    if software:
        out["software"] = software
    return config.parse(out)


def test_latest_is_a_warning_naming_a_known_version(dev_raw: dict[str, Any]) -> None:
    """A pool on ``latest`` gets a warning at its key path that suggests a version to pin."""
    found = images.findings(_with_image(dev_raw, f"{GB_IMAGE}:latest"))
    assert [(f.level.label, f.resource) for f in found] == [("warning", "gb300:gpuPools[0].image")]
    newest = catalog.load().image(GB_IMAGE + ":x")
    assert newest is not None
    assert f"{GB_IMAGE}:{newest.latest_known}" in found[0].message


def test_an_unknown_version_says_how_to_add_it(dev_raw: dict[str, Any]) -> None:
    """A version the catalog does not know is a warning that says what to read and where to add it."""
    found = images.findings(_with_image(dev_raw, f"{GB_IMAGE}:24.04.2099010101"))
    assert [f.level.label for f in found] == ["warning"]
    assert "/opt/azurehpc/component_versions.txt" in found[0].message
    assert "infra/gb300/data/images.yaml" in found[0].message


def test_a_known_version_with_other_contents_than_the_pins_is_an_error(dev_raw: dict[str, Any]) -> None:
    """An image version whose recorded NCCL is not the pinned NCCL stops every node: the rule says which."""
    versions = catalog.load().images[GB_IMAGE].versions
    oldest = min(v for v, entry in versions.items() if entry.components_status == "read")
    found = images.findings(_with_image(dev_raw, f"{GB_IMAGE}:{oldest}"))
    assert [f.level.label for f in found] == ["error"]
    assert "nccl 2.28.3-1 (gb300 pins" in found[0].message


def test_software_pins_can_follow_the_image(dev_raw: dict[str, Any]) -> None:
    """Pinning gb300:software to what an older image carries makes the rule accept it."""
    old = catalog.load().images[GB_IMAGE].versions["24.04.2026042801"]
    pins = {"doca-ofed": old.components["doca-ofed"], "dcgm": "4.5.2"}
    assert images.findings(_with_image(dev_raw, f"{GB_IMAGE}:24.04.2026042801", **pins)) == []


def test_plan_reports_latest(dev_raw: dict[str, Any]) -> None:
    """``gb300 plan`` reports a pool on ``latest`` under the rule's id."""
    raw = copy.deepcopy(dev_raw)
    raw["gpuPools"][0]["image"] = f"{GB_IMAGE}:latest"
    plan = run_plan("dev", raw)
    assert [f.level.label for f in plan.findings if f.rule == images.RULE_ID] == ["warning"]


@pytest.mark.parametrize(
    ("found", "pinned", "same"),
    [
        ("1:4.5.3-1", "4.5.3", True),
        ("2.29.3-1", "2.29.3", True),
        ("2.29.30-1", "2.29.3", False),
        ("13.0", "13.0", True),
    ],
)
def test_recorded_versions_match_pins_by_release(found: str, pinned: str, same: bool) -> None:
    """An epoch and a Debian revision do not make a different version; a longer number does."""
    assert images.carries(found, pinned) is same


def _preflight(tmp_path: Path, record: dict[str, str] | None) -> Sandbox:
    image = f"{GB_IMAGE}:24.04.2026052801"
    ctx = BootstrapContext.for_pool(
        role="gpu-node", cluster_name="gb300-ref", pool_name="gpu-a", extra_env=node_context.image_env(image)
    )
    cloud_config = yaml.safe_load(render_custom_data(ctx).cloud_config)
    cloud_config["runcmd"] = cloud_config["runcmd"][:2]  # the IMDS guard, then preflight
    assert cloud_config["runcmd"][1] == ["/usr/local/lib/gb300/run-step", "00-preflight"]
    machine = hpc_image_machine()
    if record is not None:
        machine.files["/opt/azurehpc/component_versions.txt"] = json.dumps(record, indent=2)  # as jq writes it
    box = Sandbox(tmp_path / "node", yaml.safe_dump(cloud_config), machine)
    result = box.run()
    assert result.ok, result.output
    return box


def _carried() -> dict[str, str]:
    cat = catalog.load().images[GB_IMAGE]
    entry = cat.versions["24.04.2026052801"]
    return {key: entry.components[name] for name, key in cat.record_keys.items()}


def test_node_verifies_the_image_it_booted(tmp_path: Path) -> None:
    """A node whose image records the catalog's versions notes the image as verified."""
    box = _preflight(tmp_path, {**_carried(), "ImageVersion": "2026.0528.101010"})
    assert f"image {GB_IMAGE}:24.04.2026052801: verified" in box.read(PREFLIGHT_RECORD).splitlines()


def test_node_reports_an_image_with_other_contents(tmp_path: Path) -> None:
    """A node whose image records another NCCL than the catalog lists warns and records the difference."""
    box = _preflight(tmp_path, {**_carried(), "NCCL": "2.29.7-1"})
    done = box.read(PREFLIGHT_RECORD)
    assert f"image {GB_IMAGE}:24.04.2026052801: differs: NCCL 2.29.7-1 not 2.29.3" in done


def test_node_without_the_record_says_so(tmp_path: Path) -> None:
    """A node on an image without the record (plain Ubuntu) notes the image as not verified."""
    box = _preflight(tmp_path, None)
    assert "not verified (no /opt/azurehpc/component_versions.txt)" in box.read(PREFLIGHT_RECORD)


AZURE_EXAMPLE_VERSION = "24.04.2025110401"  # the exactVersion in Azure's GB300 REST example (images.yaml source)


def test_the_version_azure_names_is_verified_with_inferred_contents(dev_raw: dict[str, Any]) -> None:
    """The version Azure's own example names exists (verified, so image-version-exists is silent offline), while what
    it carries is marked inferred; pinned against today's software it is an error that says the contents are
    inferred and where a VM records them."""
    entry = catalog.load().images[GB_IMAGE].versions[AZURE_EXAMPLE_VERSION]
    assert (entry.status, entry.components_status) == ("verified", "inferred")
    assert "VirtualMachineScaleSetVM_Get_WithInterconnectBlock" in entry.source
    stack = _with_image(dev_raw, f"{GB_IMAGE}:{AZURE_EXAMPLE_VERSION}")
    assert images.image_version_exists(stack, None) == []
    found = images.findings(stack)
    assert [f.level.label for f in found] == ["error"]
    assert f"nvidia-driver {entry.components['nvidia-driver']} (gb300 pins" in found[0].message
    assert "inferred" in found[0].message
    assert "/opt/azurehpc/component_versions.txt" in found[0].message
