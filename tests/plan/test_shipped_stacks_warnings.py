"""The shipped stacks plan without warnings, save two that say what is not pinned yet: an image version the catalog
has not seen in Azure's own list (images.yaml entry not `status: verified`) warns until someone checks it (issue
27), and a container image without a digest in checksums.yaml warns until `gb300 software lock` pins it."""

from __future__ import annotations

import pytest

from gb300.facts import catalog
from gb300.facts.software import container_images, load_checksums
from gb300.findings import Level
from gb300.plan.runner import PlanResult
from gb300.rules import images, software


def _unverified_pins(plan: PlanResult) -> list[tuple[str, str]]:
    """(rule, key) of each pool whose pinned image version the catalog lists without `status: verified`."""
    out = []
    for index, pool in enumerate(plan.config.gpu_pools):
        known = catalog.load().image(pool.image)
        entry = known.versions.get(pool.image.rsplit(":", 1)[-1]) if known is not None else None
        if entry is not None and entry.status != "verified":
            out.append((images.image_version_exists.id, f"gb300:gpuPools[{index}].image"))
    return out


def _unpinned_containers() -> list[tuple[str, str]]:
    """(rule, key) of each container image without a pinned digest."""
    pins = load_checksums()
    return [(software.findings.id, "gb300:software") for image in container_images().values() if not pins.digest(image)]


@pytest.mark.parametrize("stack", ["reference_plan", "dev_plan"])
def test_shipped_stacks_warn_only_about_an_unchecked_image_version(stack: str, request: pytest.FixtureRequest) -> None:
    """`make plan` and the dev stack: no warning at all once the pinned image version is verified and every
    container image has its digest; until then exactly one `image-version-exists` per pool and one
    `software-checksums` per unpinned container image, and nothing else."""
    plan: PlanResult = request.getfixturevalue(stack)
    warnings = sorted((f.rule, f.resource) for f in plan.findings if f.level >= Level.WARNING)
    assert warnings == sorted(_unverified_pins(plan) + _unpinned_containers())
