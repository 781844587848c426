"""``gb300:hooks``: a hook's script must be a regular, executable file of the repository within the size cap, and
its timeout, roles and pools must fit; each problem is one key-path line, and `gb300 plan` exits 2 on it."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli, config
from gb300.config.hooks import limits
from tests.support.config_errors import error_lines


def _raw(dev_raw: dict[str, Any], **hook: Any) -> dict[str, Any]:
    raw = copy.deepcopy(dev_raw)
    raw["hooks"] = [{"name": "warm", "script": "hooks/warm.sh", "point": "beforeSlurm", **hook}]
    return raw


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stack repository holding hooks/warm.sh (executable), read as the hooks' root."""
    root = tmp_path / "repo"
    (root / "hooks").mkdir(parents=True)
    script = root / "hooks" / "warm.sh"
    script.write_text("#!/usr/bin/env bash\necho warm\n", encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.setenv("GB300_HOOK_ROOT", str(root))
    return root


def _missing(root: Path) -> None:
    (root / "hooks" / "warm.sh").unlink()


def _symlink(root: Path) -> None:
    (root / "hooks" / "real.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    (root / "hooks" / "warm.sh").unlink()
    (root / "hooks" / "warm.sh").symlink_to(root / "hooks" / "real.sh")


def _too_big(root: Path) -> None:
    (root / "hooks" / "warm.sh").write_text("#" * (limits()["max_bytes"] + 1), encoding="utf-8")


def _not_executable(root: Path) -> None:
    (root / "hooks" / "warm.sh").chmod(0o644)


@pytest.mark.parametrize(
    ("spoil", "hook", "line"),
    [
        (_missing, {}, "gb300:hooks[0].script: must be an existing file of the repository"),
        (None, {"script": "../outside.sh"}, "gb300:hooks[0].script: must be a path inside the repository"),
        (None, {"script": "/etc/passwd"}, "gb300:hooks[0].script: must be a path inside the repository"),
        (_symlink, {}, "gb300:hooks[0].script: must not be a symlink"),
        (_too_big, {}, "gb300:hooks[0].script: must be at most"),
        (_not_executable, {}, "gb300:hooks[0].script: must be executable"),
        (None, {"timeoutSeconds": 10**6}, "gb300:hooks[0].timeoutSeconds: must be at most"),
        (None, {"point": "prolog", "roles": ["head"]}, "gb300:hooks[0].roles: a prolog hook runs on GPU nodes only"),
        (None, {"pools": ["nope"]}, "gb300:hooks[0].pools[0]: names no GPU pool"),
        (None, {"point": "atLunch"}, "gb300:hooks[0].point:"),
    ],
)
def test_a_bad_hook_is_one_key_path_line(
    dev_raw: dict[str, Any],
    repo: Path,
    spoil: Callable[[Path], None] | None,
    hook: dict[str, Any],
    line: str,
) -> None:
    """Each bad hook is refused with one line naming its key path and what is expected."""
    if spoil is not None:
        spoil(repo)
    lines = error_lines(_raw(dev_raw, **hook))
    assert len(lines) == 1
    assert lines[0].startswith(line), lines


def test_a_good_hook_parses_with_the_data_files_defaults(dev_raw: dict[str, Any], repo: Path) -> None:
    """A hook naming an executable script of the repository parses: GPU nodes, every pool, the default timeout,
    drain on failure."""
    cfg = config.parse(_raw(dev_raw))
    [hook] = cfg.hooks
    assert (hook.roles, hook.pools, hook.on_failure) == (["gpu-node"], [], "drain")
    assert hook.timeout_seconds == limits()["timeout_default"]
    assert hook.resolved() == repo / "hooks" / "warm.sh"
    assert os.access(hook.resolved(), os.X_OK)


def test_plan_exits_2_on_a_missing_hook(
    dev_raw: dict[str, Any],
    repo: Path,
    write_stack: Callable[[dict[str, Any]], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`gb300 plan` on a stack whose hook is missing exits 2 with the key path, and no traceback."""
    _missing(repo)
    assert cli.main(["plan", "--stack-file", str(write_stack(_raw(dev_raw))), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "gb300:hooks[0].script: must be an existing file" in err
    assert "Traceback" not in err
