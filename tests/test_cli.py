"""The command line: exit codes, one line per problem, no tracebacks."""

from __future__ import annotations

import fcntl
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


PIPE_BUFFER = 4096  # the smallest pipe Linux makes (one page): gb300 schema's output is many times larger


def _into_a_reader_that_closes(argv: list[str], *, read: int) -> tuple[int, str]:
    """Run the installed ``gb300 ARGV`` with stdout into a pipe whose reader takes ``read`` bytes (0: none at all,
    the reader is gone before gb300 starts) and closes it, as ``| head`` does; its exit status and stderr."""
    reader, writer = os.pipe()
    fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, PIPE_BUFFER)
    if read == 0:
        os.close(reader)
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("gb300")), *argv],
        stdout=writer,
        stderr=subprocess.PIPE,
        text=True,
        cwd=paths.REPO_ROOT,
    )
    os.close(writer)
    if read:
        assert len(os.read(reader, read)) > 0
        os.close(reader)  # gb300 is still writing: its output does not fit in the pipe
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "read"),
    [(["schema"], 100), (["schema"], 0), (["plan", "--stack", "dev"], 0)],
    ids=["schema-head", "schema-no-reader", "plan-no-reader"],
)
def test_a_reader_that_closes_early_ends_gb300_quietly(argv: list[str], read: int) -> None:
    """`gb300 ... | head`: when the reader of stdout goes away gb300 stops with 141 (what a shell reports for a
    command SIGPIPE ended) and says nothing about it: no traceback, no internal error, no 'Exception ignored'."""
    code, err = _into_a_reader_that_closes(argv, read=read)
    assert code == cli.EXIT_BROKEN_PIPE == 141
    for words in ("Traceback", "internal error", "bug", "Broken pipe", "BrokenPipeError", "Exception ignored"):
        assert words not in err, err
    assert all(line.startswith(f"gb300 {argv[0]}: ") for line in err.splitlines()), err  # progress lines only


def test_a_broken_pipe_that_is_not_stdout_is_still_a_bug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A BrokenPipeError from elsewhere (a socket inside a command) while stdout is fine is an internal error (3)."""
    from gb300.commands import schema  # noqa: PLC0415

    def broken(args: Any) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(schema, "run", broken)
    assert cli.main(["schema"]) == cli.EXIT_INTERNAL
    assert "internal error (BrokenPipeError" in capsys.readouterr().err


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    """`gb300 --version` prints the version pyproject.toml gives, and exits 0."""
    import tomllib  # noqa: PLC0415

    version = tomllib.loads((paths.REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"gb300 {version}\n"


def test_payload_publish_stack_reads_the_current_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`payload publish --stack NAME` reads Pulumi.NAME.yaml of the project around the current directory, not the
    installed checkout's: a stack only the current project has is found (here, and refused for its content)."""
    (tmp_path / "stacks").mkdir()
    (tmp_path / "Pulumi.yaml").write_text("name: gb300\nruntime: python\nstackConfigDir: stacks\n")
    (tmp_path / "stacks" / "Pulumi.elsewhere.yaml").write_text("config:\n  gb300:cluster: {}\n")
    monkeypatch.chdir(tmp_path / "stacks")
    argv = ["payload", "publish", "--stack", "elsewhere", "--account-url", "https://a.blob.core.windows.net"]
    assert cli.main([*argv, "--expect", "head=" + "a" * 64]) == 2
    err = capsys.readouterr().err
    assert "does not exist" not in err
    assert "gb300:cluster.name" in err
