"""The rack NCCL evaluator (examples/nccl-eval.py) and lint of every shipped shell script."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gb300.slurm.health import health_spec, render_health_env

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "slurm"
SCRIPTS = REPO / "cloud-init" / "slurm"


def load_eval() -> ModuleType:
    spec = importlib.util.spec_from_file_location("nccl_eval", REPO / "examples" / "nccl-eval.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["nccl_eval"] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


nccl_eval = load_eval()


@pytest.fixture
def health_env(tmp_path: Path) -> Path:
    """health.env for GB300 as the lead's cloud-init writes it."""
    spec = health_spec("Standard_ND128isr_GB300_v6", gpus=4, ib_ports=4, ib_rate_gbps=800)
    path = tmp_path / "health.env"
    path.write_text(
        render_health_env(
            spec, soft_failures_to_drain=3, nvme_mount="/mnt/resource_nvme", mounts=("/mnt/resource_nvme",)
        )
    )
    return path


@pytest.mark.parametrize(
    ("result", "level", "busbw"),
    [
        ("rack:block001:all_reduce_perf.rack-ok.txt", "OK", 931.47),
        ("rack:block002:all_reduce_perf.rack-warn.txt", "WARN", 742.10),
        ("rack:block003:all_reduce_perf.rack-report.txt", "REPORT", 512.88),
        ("xrack:all:all_reduce_perf.xrack-ok.txt", "OK", 197.35),
    ],
    ids=["rack-ok", "rack-warn", "rack-report", "cross-rack-ok"],
)
def test_rack_verdicts_follow_health_thresholds(
    tmp_path: Path, health_env: Path, result: str, level: str, busbw: float
) -> None:
    """Bus bandwidth at 16 GiB is judged against health.yaml's warn and report-to-Azure thresholds."""
    kind, label, name = result.split(":")
    (tmp_path / "report" / f"{label}.hosts").parent.mkdir()
    (tmp_path / "report" / f"{label}.hosts").write_text("gpu-001\ngpu-002\n")
    spec = f"{kind}:{label}:{FIXTURES / name}"
    rc = nccl_eval.main(["evaluate", "--health-env", str(health_env), "--report-dir", str(tmp_path / "report"), spec])
    assert rc == (0 if level == "OK" else 1)
    report = json.loads((tmp_path / "report" / f"{label}.{kind}.json").read_text())
    assert report["level"] == level
    assert report["busbw_gbps"] == busbw
    assert report["hosts"] == ["gpu-001", "gpu-002"]


def test_unreadable_result_exits_2(tmp_path: Path, health_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A result file without all_reduce_perf output is reported in one line and exits 2."""
    bogus = tmp_path / "bogus.txt"
    bogus.write_text("srun: error: gpu-004: task 12: Exited with exit code 1\n")
    rc = nccl_eval.main(["evaluate", "--health-env", str(health_env), "--report-dir", str(tmp_path), f"rack:b:{bogus}"])
    assert rc == 2
    assert "no all_reduce_perf result" in capsys.readouterr().err


def test_physical_host_name_from_kvp_pool() -> None:
    """The Hyper-V KVP pool's fixed-size records give the physical host name for an Azure case."""
    record = lambda key, value: key.encode().ljust(512, b"\0") + value.encode().ljust(2048, b"\0")  # noqa: E731
    pool = record("VirtualMachineName", "gpu-001") + record("PhysicalHostNameFullyQualified", "BN4SCH1234.phx.gbl")
    assert nccl_eval.physical_host(pool) == "BN4SCH1234.phx.gbl"


SHELLCHECK = shutil.which("shellcheck", path=f"{Path(sys.executable).parent}:/usr/bin:/bin") or "shellcheck"
SHELL_FILES = sorted(p for p in SCRIPTS.glob("gb300-*") if p.is_file()) + sorted((REPO / "examples").glob("*.sbatch"))


@pytest.mark.slow
@pytest.mark.parametrize("script", SHELL_FILES, ids=[p.name for p in SHELL_FILES])
def test_shellcheck_clean(script: Path) -> None:
    """Every Slurm node script and sbatch example passes shellcheck with no findings."""
    result = subprocess.run([SHELLCHECK, "--norc", str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("script", sorted(SCRIPTS.glob("gb300-*")), ids=lambda p: p.name)
def test_node_scripts_follow_conventions(script: Path) -> None:
    """Node scripts are strict bash, log to the journal with their own tag, honour GB300_ROOT, avoid /tmp."""
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    assert 'R="${GB300_ROOT:-}"' in text
    assert f"TAG={script.name}" in text
    assert "logger -t" in text
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    assert re.search(r"(?<![\w}])/tmp\b", code) is None
