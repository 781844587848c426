"""`pulumi install` in a fresh clone gives a .venv that runs the program and the policy pack.

No Pulumi CLI here, so the test replays what it runs, in the same order, directories and environment (pulumi/pulumi
``sdk/python/toolchain/pip.go`` ``InstallDependencies`` and ``toolchain.go`` ``ActivateVirtualEnv``, reached from
``pkg/cmd/pulumi/install/install.go`` through the Python language host's ``InstallDependencies`` with the program
directory): ``python3 -m venv <root>/.venv``; then, in ``<root>/infra`` (``main: infra/``) with the venv's ``bin``
first on PATH and ``VIRTUAL_ENV`` set, ``python -m pip install --upgrade pip setuptools wheel`` and
``python -m pip install -r requirements.txt``. pip is the real one, against the package index this machine's pip
configuration names.

One difference: the test's own ``PYTHONPATH`` and ``VIRTUAL_ENV`` are dropped, so the pytest process's checkout
cannot stand in for the clone's. What it cannot show: the CLI's own steps around these (plugin installation for
the resources' providers).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import engine

ROOT = Path(__file__).resolve().parents[1]


def _clone(dest: Path) -> Path:
    """The files a fresh clone of this checkout holds (tracked and not ignored), nothing built."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        src = ROOT / os.fsdecode(name)
        if src.is_file():
            target = dest / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def _activated(venv: Path) -> dict[str, str]:
    """The environment ActivateVirtualEnv gives pip (tests/support/engine.py: the venv's bin first on PATH,
    VIRTUAL_ENV set, no PYTHONHOME), from this environment less its PYTHONPATH."""
    return engine.activate_virtualenv({k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, venv)


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, f"{' '.join(argv)} in {cwd}:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return result


@pytest.mark.slow
def test_pulumi_install_gives_a_venv_that_runs_the_program(tmp_path: Path) -> None:
    """The replayed `pulumi install` installs gb300 from the clone with constraints.txt's pins; that venv imports
    the program's entry and the policy pack and plans the dev stack."""
    python3 = shutil.which("python3")
    assert python3 is not None
    repo = _clone(tmp_path / "gb300")
    assert (repo / "infra" / "requirements.txt").is_file()
    project = engine.load_project(repo)
    venv = engine.virtualenv(project)  # Pulumi.yaml runtime.options.virtualenv, relative to the project root
    program_dir = engine.engine_pwd(project)  # Pulumi.yaml main: the language host's ProgramDirectory
    assert (venv, program_dir) == (repo / ".venv", repo / "infra")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    _run([python3, "-m", "venv", str(venv)], repo, env)
    active = _activated(venv)
    python = str(venv / "bin" / "python")
    _run([python, "-m", "pip", "install", "--upgrade", "pip", "setuptools", "wheel"], program_dir, active)
    _run([python, "-m", "pip", "install", "-r", "requirements.txt"], program_dir, active)

    pins = dict(
        line.lower().replace("_", "-").split("==", 1)
        for line in (repo / "constraints.txt").read_text(encoding="utf-8").split()
        if "==" in line
    )
    shown = _run(
        [
            python,
            "-c",
            "import importlib.metadata as m, gb300.program, gb300.policy_pack; "
            "print(gb300.program.__file__); print(m.version('pulumi'), m.version('pulumi-azure-native'))",
        ],
        program_dir,
        active,
    ).stdout.split()
    assert shown[0] == str(program_dir / "gb300" / "program.py")  # the clone's program, editable
    assert shown[1:] == [pins["pulumi"], pins["pulumi-azure-native"]]
    plan = subprocess.run(
        [str(venv / "bin" / "gb300"), "plan", "--stack", "dev", "--quiet"],
        cwd=repo,
        env=active,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert plan.returncode in (0, 1), plan.stderr  # 1: findings at failOn, the plan itself ran
