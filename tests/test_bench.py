"""``make bench`` runs and reports what it promises; a run on two racks, never a timing check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gb300 import paths

REPO = paths.REPO_ROOT


@pytest.mark.slow
def test_bench_reports_state_custom_data_and_cost_next_to_a_baseline(tmp_path: Path) -> None:
    """On one and two racks, against HEAD as the baseline: state bytes per rack, per resource type, custom data per
    role, CPU and peak memory of the toolkit and the raw SDK floor for both, and a verdict per target."""
    out = tmp_path / "bench.json"
    cmd = [sys.executable, str(REPO / "bench" / "plan_bench.py"), "--small-racks", "1", "--large-racks", "2"]
    cmd += ["--repeat", "1", "--skip-bootstrap", "--baseline-ref", "HEAD", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=REPO, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    per_rack = report["perRack"]
    assert per_rack["resources"] == sum(row["count"] for row in per_rack["byType"].values())
    scale_set = "azure-native_compute_v20260301:compute:VirtualMachineScaleSet"
    assert per_rack["byType"][scale_set]["count"] == 1  # the rack's scale set
    assert per_rack["byType"]["gb300:compute:Rack"]["count"] == 1  # and the component that holds it
    assert per_rack["bytes"] >= report["scales"]["large"]["state"]["rackScaleSetBytes"]
    assert "virtualMachineProfile" in report["scales"]["large"]["state"]["rackScaleSetKeys"]
    assert report["basePerRack"]["bytes"] > 0
    assert {"gpu-node", "head"} <= set(report["customData"])
    assert report["baseCustomData"]
    for scale in ("reference", "large"):
        sc = report["scales"][scale]
        for mode in ("toolkit", "floor-raw", "base-toolkit", "base-floor-raw"):
            assert sc[mode]["cpu_s"] > 0
            assert sc[mode]["peak_rss_mib"] > 0
            assert sc[mode]["same_resources_as_plan"], mode
        assert sc["overhead_vs_floor-raw_cpu"] > 0
        assert sc["base-overhead_vs_floor-raw_cpu"] > 0
    expected = {"memory-large", "state-per-rack", "custom-data-gpu-node", "overhead-large-raw", "baseline-cpu-large"}
    assert expected <= set(report["verdicts"])
    ratio = report["scales"]["large"]["toolkit"]["cpu_s"] / report["scales"]["large"]["base-toolkit"]["cpu_s"]
    assert report["verdicts"]["baseline-cpu-large"]["value"] == pytest.approx(ratio)
    assert "state per rack (1 -> 2 racks)" in proc.stdout


def test_heal_bench_reports_time_and_judgement(tmp_path: Path) -> None:
    """The self-healing bench on four racks reports its wall time against the minute and how many nodes it misjudged."""
    out = tmp_path / "heal.json"
    cmd = [sys.executable, str(REPO / "bench" / "heal_bench.py"), "--racks", "4", "--repeat", "1", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["nodes"] == 72
    assert report["targetWallSeconds"] == 60.0
    assert report["misjudged"] == 0
    assert "a simulated day of 4 racks" in proc.stdout
