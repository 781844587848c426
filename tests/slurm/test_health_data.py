"""Per-SKU health expectations (data/health.yaml + skus.yaml) rendered as /etc/gb300/health.env."""

from __future__ import annotations

import shlex

import pytest

from gb300 import catalog
from gb300.slurm.health import health_env_for


def parse_env(text: str) -> dict[str, str]:
    return {
        key: shlex.split(value)[0] if value else ""
        for key, _, value in (line.partition("=") for line in text.splitlines() if not line.startswith("#"))
    }


def test_gb300_expectations_come_from_catalog_and_health_data() -> None:
    """GB300 gets 4 GPUs and 4 IB ports from skus.yaml, the conflicting rate with its status, and NCCL thresholds."""
    env = parse_env(health_env_for("Standard_ND128isr_GB300_v6", nvme_mount="/mnt/resource_nvme", mounts=()))
    assert env["GB300_EXPECTED_GPUS"] == "4"
    assert env["GB300_EXPECTED_IB_PORTS"] == "4"
    assert env["GB300_IB_RATE_CATALOG_GBPS"] == "800"
    assert env["GB300_IB_RATE_CATALOG_STATUS"] == "conflict"
    assert env["GB300_IB_RATE_ACCEPTED_GBPS"] == "400 800"
    assert (env["GB300_NCCL_RACK_WARN_GBPS"], env["GB300_NCCL_RACK_REPORT_GBPS"]) == ("800", "600")
    assert (env["GB300_NCCL_XRACK_WARN_GBPS"], env["GB300_NCCL_XRACK_REPORT_GBPS"]) == ("180", "150")


def test_sizes_without_health_entry_get_catalog_rate_only() -> None:
    """A size health.yaml does not list (GB200) accepts only its catalog rate and has no NCCL thresholds."""
    env = parse_env(health_env_for("Standard_ND128isr_NDR_GB200_v6", nvme_mount="/mnt/resource_nvme", mounts=()))
    assert env["GB300_IB_RATE_ACCEPTED_GBPS"] == "400"
    assert "GB300_NCCL_RACK_WARN_GBPS" not in env


@pytest.mark.parametrize(
    "vm_size", [name for name, sku in catalog.load().skus.items() if sku.is_gpu], ids=lambda name: name
)
def test_every_gpu_size_renders(vm_size: str) -> None:
    """Every GPU size in the catalog renders a health.env whose GPU count matches the catalog."""
    env = parse_env(health_env_for(vm_size, nvme_mount="/mnt/resource_nvme", mounts=()))
    assert env["GB300_EXPECTED_GPUS"] == str(catalog.load().sku(vm_size).gpus)
