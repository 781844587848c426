"""`pulumi install` in a fresh clone gives a .venv that runs the program and the policy pack.

The real CLI built from source (tests/support/pulumi_engine.py) runs ``pulumi install --no-plugins`` in a copy of
the clone: the engine reads ``Pulumi.yaml`` (``main: infra/``, ``runtime.options.virtualenv: .venv``) and its Python
language host (Pulumi's own ``pulumi-language-python``) creates the virtual environment and runs pip against
``infra/requirements.txt``, with the package index this machine's pip configuration names. The test's own
``PYTHONPATH`` and ``VIRTUAL_ENV`` are dropped, so the pytest process's checkout cannot stand in for the clone's.

What it leaves out: the plugin half of ``pulumi install`` (``--no-plugins``). It would download azure-native and
pulumi-random release binaries, which cannot be fetched here; tests/engine installs their doubles instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import pulumi_engine

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


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, f"{' '.join(argv)} in {cwd}:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return result


@pytest.mark.slow
def test_pulumi_install_gives_a_venv_that_runs_the_program(tmp_path: Path) -> None:
    """The real `pulumi install` installs gb300 from the clone with constraints.txt's pins into the clone's .venv;
    that venv imports the program's entry and the policy pack and plans the dev stack."""
    repo = _clone(tmp_path / "gb300")
    base = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    engine = pulumi_engine.engine(tmp_path / "engine", base_env=base)
    installed = engine.run(["install", "--no-plugins"], cwd=repo, timeout=900)
    assert installed.returncode == 0, "\n".join(engine.log)
    venv = repo / ".venv"  # Pulumi.yaml runtime.options.virtualenv, relative to the project root
    assert (venv / "bin" / "python").exists(), "\n".join(engine.log)
    active = {**base, "PATH": f"{venv / 'bin'}{os.pathsep}{base.get('PATH', '/usr/bin:/bin')}"}
    python = str(venv / "bin" / "python")
    program_dir = repo / "infra"

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
