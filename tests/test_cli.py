"""The command line: exit codes, one line per problem, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli, paths


def test_plan_dev_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """Planning the dev stack succeeds and prints its rack, VM and GPU totals."""
    assert cli.main(["plan", "--stack", "dev"]) == 0
    out = capsys.readouterr().out
    assert "1 rack " in out
    assert "1 racks" not in out
    assert "18 VMs" in out
    assert "72 GPUs" in out
    assert out.rstrip().endswith("plan passes")


def test_bad_config_exits_two_with_key_paths(write_stack: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Invalid config exits 2 and prints one line per problem, each starting with its key path."""
    raw = {
        "cluster": {"name": "x", "location": "eastus2"},
        "access": {"sshPublicKey": "not a key"},
        "gpuPools": [{"name": "train", "racks": 0}],
    }
    assert cli.main(["plan", "--stack-file", str(write_stack(raw))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    problems = [line for line in err if line.startswith("gb300:")]
    assert [p.split(":", 2)[1] for p in problems] == ["access.sshPublicKey", "gpuPools[0].racks"]
    assert "gb300:gpuPools[0].racks: must be at least 1 (got 0)" in problems


def test_unknown_stack_exits_two(capsys: pytest.CaptureFixture[str]) -> None:
    """Asking for a stack that has no file exits 2 and lists the stacks there are."""
    assert cli.main(["plan", "--stack", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no stack 'nope'" in err
    assert "reference" in err


def test_usage_error_exits_two() -> None:
    """A plan without a stack is a usage error (exit 2)."""
    with pytest.raises(SystemExit) as info:
        cli.main(["plan"])
    assert info.value.code == 2


def test_schema_prints_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    """``gb300 schema`` prints a JSON Schema naming every gb300 key."""
    assert cli.main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    props = schema["properties"]["config"]["properties"]
    assert {"gb300:cluster", "gb300:access", "gb300:network", "gb300:gpuPools", "gb300:storage"} <= set(props)


@pytest.mark.slow
def test_console_script_no_traceback(write_stack: Any) -> None:
    """The installed ``gb300`` command reports bad config on stderr with exit 2 and never a traceback."""
    path: Path = write_stack({"cluster": {"name": "x"}, "gpuPools": "lots"})
    exe = Path(sys.executable).with_name("gb300")
    proc = subprocess.run(
        [str(exe), "plan", "--stack-file", str(path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=paths.REPO_ROOT,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "gb300:cluster.location: is required" in proc.stderr
    assert "gb300:gpuPools: must be a list (got 'lots')" in proc.stderr
