"""The node payload files a plan writes for upload: private to the run, gone when it ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gb300 import paths

BLOB = "azure-native:storage:Blob"


@pytest.mark.slow
def test_plans_leave_no_payload_files_behind(tmp_path: Path) -> None:
    """Two plans in a row each upload from a directory of their own under TMPDIR and leave TMPDIR empty."""
    tmpdir, out = tmp_path / "tmp", tmp_path / "out"
    tmpdir.mkdir()
    out.mkdir()
    exe = Path(sys.executable).with_name("gb300")
    sources = []
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
        blobs = [r for r in json.loads(plan.read_text())["resources"] if r["type"] == BLOB]
        assert blobs
        sources += [Path(b["inputs"]["source"]["path"]) for b in blobs if b["inputs"]["source"]["hash"]]
        assert list(tmpdir.iterdir()) == [], f"{run} plan left {sorted(p.name for p in tmpdir.iterdir())}"
    assert len(sources) == 2 * len(blobs)  # every payload file was written and read, in this TMPDIR
    assert all(p.parent.parent == tmpdir for p in sources)
    assert len({p.parent for p in sources}) == 2  # one directory per run, never reused
