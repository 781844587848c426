"""Compute rules (racks, fabric, image architecture, custom data), as tables of resources -> findings."""

from __future__ import annotations

import pytest

from gb300.resources import ResourceRecord
from tests.support.policy_support import H100, assert_findings, levels, run, scale_set

X64_IMAGE = {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2404", "version": "latest"}
ARM_IMAGE = {"publisher": "canonical", "offer": "ubuntu-24_04-lts", "sku": "server-arm64", "version": "latest"}


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        pytest.param([scale_set(capacity=18), scale_set("r2", capacity=36)], [], id="compliant"),
        pytest.param([scale_set(capacity=20)], ["error"], id="partial-rack"),
        pytest.param([scale_set(size=H100, capacity=7, group=None)], [], id="single-vm-nvlink-size"),
        pytest.param([scale_set(size="Standard_Unknown", capacity=7)], [], id="size-absent-from-catalog"),
        pytest.param([scale_set(capacity=1), scale_set("r2", capacity=19)], ["error", "error"], id="several"),
    ],
)
def test_gpu_pool_rack_aligned(resources: list[ResourceRecord], expected: list[str]) -> None:
    """An NVL72 scale set that is not whole racks of 18 is an error naming the nearest whole sizes."""
    found = run("gpu-pool-rack-aligned", resources)
    assert levels(found) == expected
    if found:
        assert "multiple of 18" in found[0].message


def _racks(n: int, **kw: object) -> list[ResourceRecord]:
    return [scale_set(f"t-train-r{i:04d}", **kw) for i in range(1, n + 1)]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("resources", "expected", "words"),
    [
        pytest.param(_racks(3), [], [], id="compliant-one-group"),
        pytest.param(
            [*_racks(2), scale_set("t-train-r0003", group="ig-other")], ["error"], ["isolated", "ig-other"], id="split"
        ),
        pytest.param(
            [*_racks(2), scale_set("t-train-r0003", group=None)], ["error"], ["no interconnect group"], id="absent"
        ),
        pytest.param(
            [scale_set("h", size=H100, capacity=100, group=None, single_placement_group=True)], [], [], id="classic-100"
        ),
        pytest.param(
            [scale_set("h", size=H100, capacity=101, group=None, single_placement_group=True)],
            ["error"],
            ["at most 100", "300 on request"],
            id="classic-101",
        ),
        pytest.param(
            [
                scale_set("h1", size=H100, capacity=50, group=None, single_placement_group=True),
                scale_set("h2", size=H100, capacity=50, group=None, single_placement_group=False),
            ],
            ["error", "error"],
            ["one scale set", "singlePlacementGroup"],
            id="several",
        ),
        pytest.param([scale_set(capacity=1008 + 18)], ["error"], ["1,000"], id="over-scale-set-cap"),
    ],
)
def test_ib_fabric_within_limits(resources: list[ResourceRecord], expected: list[str], words: list[str]) -> None:
    """A pool split across fabrics, or beyond its fabric model's limits, is an error saying how."""
    found = run("ib-fabric-within-limits", resources)
    assert_findings(found, expected, words)


def test_ib_fabric_rack_limit_comes_from_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool with more racks than the fabric model's maxRacksPerFabric is an error citing the catalog's source."""
    from dataclasses import replace  # noqa: PLC0415

    from gb300.facts import catalog  # noqa: PLC0415

    cat = catalog.load()
    model = cat.fabric_models["interconnect-group"]
    assert model.max_racks_per_fabric is not None
    small = replace(model, max_racks_per_fabric=replace(model.max_racks_per_fabric, value=2))
    patched = replace(cat, fabric_models={**cat.fabric_models, "interconnect-group": small})
    monkeypatch.setattr(catalog, "load", lambda: patched)
    found = run("ib-fabric-within-limits", _racks(3))
    assert levels(found) == ["error"]
    assert "at most 2 racks" in found[0].message
    assert "unverified" in found[0].message


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        pytest.param([scale_set()], [], id="compliant-gb-image"),
        pytest.param([scale_set(image=ARM_IMAGE)], [], id="compliant-plain-arm"),
        pytest.param([scale_set(image=X64_IMAGE)], ["error"], id="x86-on-gb300"),
        pytest.param([scale_set(size=H100, group=None, image=ARM_IMAGE)], ["error"], id="arm-on-h100"),
        pytest.param([scale_set(image={"publisher": "acme", "offer": "os", "sku": "1"})], ["warning"], id="unknown"),
        pytest.param(
            [scale_set(image={"id": "/subscriptions/x/resourceGroups/y/providers/Microsoft.Compute/images/z"})],
            ["warning"],
            id="custom-image-id",
        ),
        pytest.param([scale_set(image={"publisher": 3})], [], id="property-absent"),
        pytest.param([scale_set(image=X64_IMAGE), scale_set("r2", image=X64_IMAGE)], ["error", "error"], id="several"),
    ],
)
def test_image_arch_matches_sku(resources: list[ResourceRecord], expected: list[str]) -> None:
    """A wrong-architecture image is an error that suggests images of the right one; unknown is a warning."""
    found = run("image-arch-matches-sku", resources)
    assert levels(found) == expected
    for f in found:
        if f.level.label == "error":
            assert "microsoft-dsvm:ubuntu-hpc:2404-gb" in f.message or "microsoft-dsvm:ubuntu-hpc:2404" in f.message


@pytest.mark.parametrize(
    ("sizes", "expected"),
    [
        pytest.param([1_000], [], id="compliant"),
        pytest.param([8_192], [], id="exactly-8k"),
        pytest.param([8_193], ["warning"], id="over-8k"),
        pytest.param([65_536], ["warning"], id="exactly-64k"),
        pytest.param([65_537], ["error"], id="over-64k"),
        pytest.param([70_000, 54_000], ["error", "warning"], id="several"),
    ],
)
def test_custom_data_size(sizes: list[int], expected: list[str]) -> None:
    """Base64 custom data over 64 KB is an error, over 8 KB a warning (the node payload carries the rest), each
    saying the size and the limit."""
    resources = [scale_set(f"r{i}", custom_data="A" * n) for i, n in enumerate(sizes)]
    found = run("custom-data-size", resources)
    assert levels(found) == expected
    for f in found:
        assert "65,536" in f.message


def test_custom_data_absent_or_odd_is_silent() -> None:
    """A scale set without custom data, or with a non-string value, yields nothing and raises nothing."""
    rec = scale_set()
    rec.inputs["virtualMachineProfile"]["osProfile"]["customData"] = None
    odd = scale_set("r2")
    odd.inputs["virtualMachineProfile"] = "garbage"
    assert run("custom-data-size", [rec, odd]) == []
