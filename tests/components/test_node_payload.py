"""A plan writes no payload files: the upload command renders the payloads itself, from the stack file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gb300 import paths

COMMAND = "command:local:Command"


@pytest.mark.slow
def test_plans_leave_no_payload_files_behind(tmp_path: Path) -> None:
    """Two plans in a row leave TMPDIR empty, and each declares the upload as one command naming every payload's
    sha256 (no file asset, no temporary file)."""
    tmpdir, out = tmp_path / "tmp", tmp_path / "out"
    tmpdir.mkdir()
    out.mkdir()
    exe = Path(sys.executable).with_name("gb300")
    for run in ("first", "second"):
        plan = out / f"{run}.json"
        proc = subprocess.run(
            [str(exe), "plan", "--stack", "dev", "--quiet", "--json", str(plan)],
            capture_output=True,
            text=True,
            check=False,
            cwd=paths.REPO_ROOT,
            env={**os.environ, "TMPDIR": str(tmpdir), "PYTHONWARNINGS": "ignore"},
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        resources = json.loads(plan.read_text())["resources"]
        [command] = [r for r in resources if r["type"] == COMMAND]
        assert command["inputs"]["create"].count("--expect ") == len(command["inputs"]["triggers"]) == 2
        assert not [r for r in resources if r["type"] == "azure-native:storage:Blob"]
        assert list(tmpdir.iterdir()) == [], f"{run} plan left {sorted(p.name for p in tmpdir.iterdir())}"
