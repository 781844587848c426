"""Per-SKU health expectations (data/health.yaml + skus.yaml) rendered as /etc/gb300/health.env."""

from __future__ import annotations

import copy
import re
import shlex
from typing import Any

import pytest
import yaml

from gb300 import config
from gb300 import tags as gb300_tags
from gb300.facts import catalog
from gb300.node import custom_data as nodes
from gb300.paths import DATA_DIR, REPO_ROOT
from gb300.slurm.health import HealthSpec, health_env_for, health_spec
from tests.support.config_errors import error_lines


def parse_env(text: str) -> dict[str, str]:
    return {
        key: shlex.split(value)[0] if value else ""
        for key, _, value in (line.partition("=") for line in text.splitlines() if not line.startswith("#"))
    }


def test_gb300_expectations_come_from_catalog_and_health_data() -> None:
    """GB300 gets 4 GPUs and 4 IB ports from skus.yaml, the conflicting rate with its status, and NCCL thresholds."""
    env = parse_env(
        health_env_for(
            "Standard_ND128isr_GB300_v6", soft_failures_to_drain=3, nvme_mount="/mnt/resource_nvme", mounts=()
        )
    )
    assert env["GB300_EXPECTED_GPUS"] == "4"
    assert env["GB300_EXPECTED_IB_PORTS"] == "4"
    assert env["GB300_IB_RATE_CATALOG_GBPS"] == "800"
    assert env["GB300_IB_RATE_CATALOG_STATUS"] == "conflict"
    assert env["GB300_IB_RATE_ACCEPTED_GBPS"] == "400 800"
    assert (env["GB300_NCCL_RACK_WARN_GBPS"], env["GB300_NCCL_RACK_REPORT_GBPS"]) == ("800", "600")
    assert (env["GB300_NCCL_XRACK_WARN_GBPS"], env["GB300_NCCL_XRACK_REPORT_GBPS"]) == ("180", "150")


def test_sizes_without_health_entry_get_catalog_rate_only() -> None:
    """A size health.yaml does not list (GB200) accepts only its catalog rate and has no NCCL thresholds."""
    env = parse_env(
        health_env_for(
            "Standard_ND128isr_NDR_GB200_v6", soft_failures_to_drain=3, nvme_mount="/mnt/resource_nvme", mounts=()
        )
    )
    assert env["GB300_IB_RATE_ACCEPTED_GBPS"] == "400"
    assert "GB300_NCCL_RACK_WARN_GBPS" not in env


@pytest.mark.parametrize(
    "vm_size", [name for name, sku in catalog.load().skus.items() if sku.is_gpu], ids=lambda name: name
)
def test_every_gpu_size_renders(vm_size: str) -> None:
    """Every GPU size in the catalog renders a health.env whose GPU count matches the catalog."""
    env = parse_env(health_env_for(vm_size, soft_failures_to_drain=3, nvme_mount="/mnt/resource_nvme", mounts=()))
    assert env["GB300_EXPECTED_GPUS"] == str(catalog.load().sku(vm_size).gpus)


HEALTH_CHECK = REPO_ROOT / "cloud-init" / "slurm" / "gb300-health-check"


def _spec() -> HealthSpec:
    return health_spec("Standard_ND128isr_GB300_v6", gpus=4, ib_ports=4, ib_rate_gbps=800)


def test_every_check_the_gate_runs_is_in_the_data_and_back() -> None:
    """The checks gb300-health-check starts (run_check) and the checks health.yaml classifies are the same set."""
    script = HEALTH_CHECK.read_text(encoding="utf-8")
    started = set(re.findall(r"^\s*(?:\w+\)\s*)?run_check ([a-z][a-z0-9-]*) ", script, flags=re.MULTILINE))
    watches = {w.check for w in _spec().field_watches}
    # "expectations" is the failure to read health.env itself, before any check starts.
    assert started | watches | {"expectations"} == {c.name for c in _spec().checks}
    assert "CURRENT_CHECK=expectations" in script


def test_the_issues_hardware_faults_are_hard() -> None:
    """Fabric health, a missing GPU, double-bit ECC and error-class XIDs drain at once; transient ones are soft."""
    classes = {c.name: c.check_class for c in _spec().checks}
    for name in ("fabric-health", "gpus", "ecc-dbe", "xid", "row-remap-failure", "recovery-action"):
        assert classes[name] == "hard", name
    for name in ("gpu-temperature", "clock-events", "persistence-mode", "mounts", "services", "ib"):
        assert classes[name] == "soft", name


def test_health_agent_thresholds_are_data() -> None:
    """Azure's health agent thresholds reach health.env: 93 C, mask 0xE8, BER 1e-6, 3 link-downs in 3 hours."""
    env = parse_env(
        health_env_for(
            "Standard_ND128isr_GB300_v6", soft_failures_to_drain=3, nvme_mount="/mnt/resource_nvme", mounts=()
        )
    )
    watches = env["GB300_FIELD_WATCHES"].split()
    assert "gpu-temperature:150:gt:93" in watches
    assert "clock-events:112:bitmask:0xE8" in watches
    assert "nvlink-ber:1218:gt:1e-06" in watches
    assert (env["GB300_IB_LINK_DOWNED_COUNT"], env["GB300_IB_LINK_DOWNED_WINDOW_S"]) == ("3", "10800")
    never_drain = set(env["GB300_XID_WARNING"].split())
    assert {"13", "31", "43", "63", "66", "94", "154"} <= never_drain  # Azure's health agent's warnings
    assert {"45", "121"} <= never_drain  # NVIDIA's catalog: a teardown, a corrected C2C error
    assert {"48", "79", "95"}.isdisjoint(never_drain)  # machine faults drain
    assert (env["GB300_GEMM_WARN_TFLOPS"], env["GB300_GEMM_REPORT_TFLOPS"]) == ("1785", "1720")


def test_new_health_facts_name_a_public_source() -> None:
    """Each block of facts the gate added carries a source and a status, and none cites a private note."""
    doc = yaml.safe_load((DATA_DIR / "health.yaml").read_text(encoding="utf-8"))
    for key in ("xidWarning", "epilogDcgmDiagLevel", "fabricHealth", "fieldWatches", "ibLinkDowned", "gemm"):
        assert doc["defaults"][key]["source"], key
        assert doc["defaults"][key]["status"] in ("verified", "unverified", "conflict"), key
    assert "DOMAIN" not in (DATA_DIR / "health.yaml").read_text(encoding="utf-8")


def test_periodic_timeouts_fit_inside_slurms_limit() -> None:
    """Four commands at the periodic timeout stay under slurmd's 60 s HealthCheckProgram limit."""
    spec = _spec()
    assert 4 * spec.command_timeout_s["periodic"] < 60
    assert 3 * spec.command_timeout_s["epilog"] + spec.dcgm_diag_timeout_s["epilog"] < 180


def test_soft_failures_to_drain_comes_from_the_stack(dev_raw: dict[str, Any]) -> None:
    """gb300:health.softFailuresToDrain reaches the GPU nodes' health.env."""
    raw = copy.deepcopy(dev_raw)
    raw["health"] = {"softFailuresToDrain": 5}
    cfg = config.parse(raw)
    cloud_config = nodes.render(gb300_tags.ROLE_GPU_NODE, cfg, cfg.gpu_pools[0]).payload.cloud_config
    assert "GB300_SOFT_FAILURES_TO_DRAIN=5\n" in cloud_config


@pytest.mark.parametrize(("value", "message"), [(0, "must be at least 1 (got 0)"), ("3", "must be a whole number")])
def test_bad_soft_failures_to_drain_names_the_key(dev_raw: dict[str, Any], value: Any, message: str) -> None:
    """A bad softFailuresToDrain is reported on one line naming gb300:health.softFailuresToDrain."""
    raw = copy.deepcopy(dev_raw)
    raw["health"] = {"softFailuresToDrain": value}
    [line] = error_lines(raw)
    assert line.startswith(f"gb300:health.softFailuresToDrain: {message}")
