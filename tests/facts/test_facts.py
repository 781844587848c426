"""Facts the catalog states: the corrected quota family and fabric cap, and sources users can open."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from gb300 import paths
from gb300.errors import DataError
from gb300.facts import catalog, storage_facts

SIZE_PAGE_GPUS = 100_000  # nd-gb300-v6-series.md: one InfiniBand fabric reaches "up to 100,000 GPUs"


def test_rack_cap_is_the_most_racks_within_the_size_pages_gpus() -> None:
    """maxRacksPerFabric is the largest whole number of NVL72 racks whose GPUs stay within 100,000."""
    cat = catalog.load()
    sku = cat.sku("Standard_ND128isr_GB300_v6")
    cap = cat.fabric_models["interconnect-group"].max_racks_per_fabric
    assert cap is not None
    gpus_per_rack = sku.gpus * sku.vms_per_nvlink_domain
    racks = int(cap.value)
    assert racks * gpus_per_rack <= SIZE_PAGE_GPUS < (racks + 1) * gpus_per_rack


def test_every_gpu_size_registers_a_cpu_layout_that_adds_up_to_its_vcpus() -> None:
    """Each GPU size has a socket/core/thread layout whose product is its vCPU count (what slurmd registers)."""
    gpu = [sku for sku in catalog.load().skus.values() if sku.is_gpu]
    assert gpu
    for sku in gpu:
        assert sku.cpu_layout is not None, sku.name
        assert sku.cpu_layout.cpus == sku.vcpus, sku.name
        assert sku.cpu_layout.source, sku.name


def test_h200_quota_family_is_the_isr_family() -> None:
    """The H200 size counts against standardNDISRH200V5Family, the family Azure's usage API reports."""
    assert catalog.load().sku("Standard_ND96isr_H200_v5").quota_family.value == "standardNDISRH200V5Family"


def test_no_file_cites_the_private_domain_notes() -> None:
    """Sources name public pages or repository paths: no tracked file, README and docs included, cites the notes."""
    files = subprocess.run(
        ["git", "grep", "-l", "DOMAIN" + ".md"], cwd=paths.REPO_ROOT, capture_output=True, text=True, check=False
    ).stdout.split()
    assert files == []


def test_key_vault_retention_outside_the_range_key_vault_takes_is_a_data_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A keyVaultSoftDelete.days outside minDays..maxDays stops the plan with a DataError naming the key, not a
    deploy that Azure refuses."""
    facts: dict[str, Any] = storage_facts.load()
    entry = facts["keyVaultSoftDelete"]
    assert entry["minDays"] <= storage_facts.key_vault_soft_delete_days() <= entry["maxDays"]
    broken = {**facts, "keyVaultSoftDelete": {**entry, "days": entry["maxDays"] + 1}}
    monkeypatch.setattr(storage_facts, "load", lambda: broken)
    with pytest.raises(DataError, match=r"keyVaultSoftDelete\.days must be from"):
        storage_facts.key_vault_soft_delete_days()
