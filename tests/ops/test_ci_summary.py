"""The pull request comment rendered from `gb300 plan --json` files (infra/gb300/ops/ci_summary.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gb300.ops import ci_summary

ROOT = Path(__file__).resolve().parents[2]


def _plan(stack: str, findings: list[dict[str, str]] | None = None, **summary: Any) -> dict[str, Any]:
    return {"stack": stack, "resources": [], "findings": findings or [], "summary": summary}


def _finding(level: str, rule: str = "some-rule", message: str = "m") -> dict[str, str]:
    return {"rule": rule, "level": level, "resource": "gb300:gpuPools[0]", "message": message}


ONE_RACK = {"racks": 1, "vms": 18, "gpus": 72, "vcpus": {"standardNDISRGB300V6Family": 2304}}


@pytest.mark.parametrize(
    ("plans", "expected", "wanted"),
    [
        pytest.param(
            [_plan("dev", **ONE_RACK)],
            ["dev"],
            ["| `dev` | 1 | 18 | 72 | 2,304 standardNDISRGB300V6Family | 0 | 0 |"],
            id="counts-and-quota-family",
        ),
        pytest.param(
            [_plan("dev", [_finding("ERROR"), _finding("warning"), _finding("info")], **ONE_RACK)],
            ["dev"],
            ["| 1 | 1 |", "Errors and warnings (2)"],
            id="errors-and-warnings-counted-case-insensitively",
        ),
        pytest.param(
            [_plan("dev", **ONE_RACK)],
            ["dev", "reference"],
            ["| `reference` | no plan: see the job log |"],
            id="stack-without-plan-file",
        ),
        pytest.param(
            [_plan("dev", [_finding("error", message="a | b\nc")])],
            ["dev"],
            ["a \\| b c", "| `dev` | - | - | - | - | 1 | 0 |"],
            id="table-safe-messages-and-missing-summary",
        ),
    ],
)
def test_summary_rows(plans: list[dict[str, Any]], expected: list[str], wanted: list[str]) -> None:
    """Each stack gets one row of racks, VMs, GPUs, vCPUs per quota family and finding counts."""
    text = ci_summary.render([ci_summary.digest(p, "?") for p in plans], expected)
    assert text.startswith(ci_summary.MARKER)
    for line in wanted:
        assert line in text


def test_errors_come_before_warnings_and_the_list_is_capped() -> None:
    """The comment lists errors first and at most MAX_FINDINGS findings, saying how many were left out."""
    findings = [_finding("warning", rule=f"w{i}") for i in range(30)] + [_finding("error", rule="e")]
    text = ci_summary.render([ci_summary.digest(_plan("dev", findings), "dev")])
    rows = [line for line in text.splitlines() if line.startswith(("| `dev` | ERROR |", "| `dev` | WARNING |"))]
    assert rows[0].startswith("| `dev` | ERROR | `e` |")
    assert len(rows) == ci_summary.MAX_FINDINGS
    assert f"{31 - ci_summary.MAX_FINDINGS} more in the plan artifacts." in text


def test_cli_reads_files_and_skips_an_unmatched_glob(tmp_path: Path) -> None:
    """Run as CI runs it (a plain script, no install), it reads the plan files and ignores a literal glob."""
    (tmp_path / "plan-dev.json").write_text(json.dumps(_plan("dev", **ONE_RACK)), encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            "-I",
            str(ROOT / "infra" / "gb300" / "ops" / "ci_summary.py"),
            "--stacks",
            '["dev", "reference"]',
            "--run-url",
            "https://ci.example/run/1",
            str(tmp_path / "plan-dev.json"),
            str(tmp_path / "plan-*.json"),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert "| `dev` | 1 | 18 | 72 |" in result.stdout
    assert "| `reference` | no plan" in result.stdout
    assert "https://ci.example/run/1" in result.stdout
