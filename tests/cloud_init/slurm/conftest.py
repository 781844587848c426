"""A sandbox for gb300's Slurm node scripts: stand-in commands on PATH and a fake root (GB300_ROOT).

Each stand-in appends its argument list to ``calls.log``, prints ``out/<name>`` (or
``out/<name>-<first arg>``) and exits with ``rc/<name>`` when present. ``systemctl is-active`` and
``is-failed`` answer from ``units/<unit>``. Real coreutils, awk and sed stay on PATH after the stand-ins.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPTS = REPO / "cloud-init" / "slurm"
FIXTURES = REPO / "tests" / "fixtures" / "slurm"

_STANDIN = r"""#!/usr/bin/env bash
name=$(basename "$0")
printf '%s %s\n' "$name" "$*" >>"$SANDBOX/calls.log"
if [ "$name" = systemctl ] && { [ "${1:-}" = is-active ] || [ "${1:-}" = is-failed ]; }; then
  unit="${*: -1}"
  want=active; [ "$1" = is-failed ] && want=failed
  [ "$(cat "$SANDBOX/units/$unit" 2>/dev/null || echo inactive)" = "$want" ]
  exit
fi
if [ -n "${1:-}" ] && [ -e "$SANDBOX/out/$name-$1" ]; then
  cat "$SANDBOX/out/$name-$1"
elif [ -e "$SANDBOX/out/$name" ]; then
  cat "$SANDBOX/out/$name"
fi
if [ -n "${1:-}" ] && [ -e "$SANDBOX/rc/$name-$1" ]; then exit "$(cat "$SANDBOX/rc/$name-$1")"; fi
if [ -e "$SANDBOX/rc/$name" ]; then exit "$(cat "$SANDBOX/rc/$name")"; fi
exit 0
"""

STANDINS = (
    "nvidia-smi", "ibstat", "dcgmi", "dmesg", "systemctl", "scontrol", "logger", "hostname",
    "nvidia-imex-ctl", "getent", "curl", "chown", "sinfo",
    "modinfo", "uname",
    "gb300-slurm-install",  # the steps' Slurm installer (GB300_SLURM_INSTALL); test_slurm_install.py runs the real one
    "gb300-enroot-dirs",  # the enroot directory tool (GB300_ENROOT_DIRS); test_enroot_dirs.py runs the real one
    "gb300-pam-adopt",  # ssh for users with a job only (GB300_PAM_ADOPT); test_pam_adopt.py runs the real one
)  # fmt: skip


@dataclass
class Sandbox:
    """A temp directory holding stand-in commands (``bin``), their answers, and a fake root."""

    path: Path

    @property
    def root(self) -> Path:
        return self.path / "root"

    def answer(self, command: str, output: str, rc: int = 0) -> None:
        """Make ``command`` (or ``command-<first arg>``) print ``output`` and exit ``rc``."""
        (self.path / "out" / command).write_text(output)
        (self.path / "rc" / command).write_text(str(rc))

    def answer_fixture(self, command: str, fixture: str) -> None:
        self.answer(command, (FIXTURES / fixture).read_text())

    def replace(self, command: str, body: str) -> None:
        """Replace the stand-in ``command`` with a bash script body of the test's own."""
        path = self.path / "bin" / command
        path.write_text("#!/usr/bin/env bash\n" + body)
        path.chmod(0o755)

    def unit(self, name: str, state: str) -> None:
        (self.path / "units" / name).write_text(state)

    def write(self, relative: str, content: str) -> Path:
        """Write a file under the fake root (``etc/gb300/health.env`` -> ``$GB300_ROOT/etc/...``)."""
        target = self.root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        return target

    def calls(self, command: str) -> list[str]:
        """Argument strings ``command`` was called with, in order."""
        log = self.path / "calls.log"
        if not log.exists():
            return []
        prefix = command + " "
        return [line[len(prefix) :] for line in log.read_text().splitlines() if line.startswith(prefix)]

    def run(
        self, script: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run ``cloud-init/slurm/<script>`` with the stand-ins first on PATH and GB300_ROOT set."""
        environment = {
            "PATH": f"{self.path / 'bin'}:{os.environ['PATH']}",
            "SANDBOX": str(self.path),
            "GB300_ROOT": str(self.root),
            "HOME": str(self.path),
            "LANG": "C.UTF-8",
            "GB300_SLURM_INSTALL": str(self.path / "bin" / "gb300-slurm-install"),
            "GB300_ENROOT_DIRS": str(self.path / "bin" / "gb300-enroot-dirs"),
            "GB300_PAM_ADOPT": str(self.path / "bin" / "gb300-pam-adopt"),
        }
        environment.update(env or {})
        return subprocess.run(
            ["bash", str(SCRIPTS / script), *args],
            env=environment,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    """An empty sandbox whose stand-ins print nothing and succeed."""
    for sub in ("bin", "out", "rc", "units", "root"):
        (tmp_path / sub).mkdir()
    for name in STANDINS:
        path = tmp_path / "bin" / name
        path.write_text(_STANDIN)
        path.chmod(0o755)
    yield Sandbox(tmp_path)
    shutil.rmtree(tmp_path, ignore_errors=True)
