"""A bootstrap interrupted by a reboot resumes at the step it was on: run-step enables gb300-resume.service when the
bootstrap starts, and after the reboot the unit runs runcmd again with the steps that finished skipped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from contextlib import suppress
from pathlib import Path

import pytest

from tests.support.bootstrap_helpers import render_role
from tests.support.sandbox import Sandbox, hpc_image_machine

pytestmark = pytest.mark.slow

UNIT = "gb300-resume.service"
STUCK = "nvidia-smi -q"  # 80-fabric's query: the call the bootstrap is in when the VM reboots


def _set_state(box: Sandbox, **changes: object) -> None:
    state = box.state() | changes
    (box.base / "state.json").write_text(json.dumps(state, indent=1, sort_keys=True))


def _power_off(session: int) -> None:
    """What a power cut does to the bootstrap: every process of its session dies at once, without cleanup
    (``timeout`` runs each step in a process group of its own, so killing one group is not enough)."""
    for _ in range(3):
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with suppress(OSError):
                fields = stat.read_text().rsplit(")", 1)[1].split()  # state ppid pgrp session ...
                if int(fields[3]) == session:
                    os.kill(int(stat.parent.name), signal.SIGKILL)


def _interrupted(tmp_path: Path) -> Sandbox:
    """A GPU node whose bootstrap (cloud-init's runcmd script) is killed while 80-fabric waits on nvidia-smi."""
    box = Sandbox(tmp_path / "node", render_role("gpu-node").cloud_config, hpc_image_machine())
    box.apply_write_files()
    script = box.write_runcmd_script()
    _set_state(box, hang=STUCK)
    proc = subprocess.Popen(
        ["/bin/sh", str(script)],
        env=box.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while f"HANG {STUCK}" not in box.calls():
        assert proc.poll() is None, "the bootstrap ended before it reached the stalled call"
        assert time.monotonic() < deadline, "the bootstrap never reached the stalled call"
        time.sleep(0.2)
    _power_off(proc.pid)
    proc.wait()
    _set_state(box, hang="")
    return box


def _journal(box: Sandbox) -> list[str]:
    path = box.base / "journal.log"
    return path.read_text().splitlines() if path.exists() else []


def test_a_reboot_mid_step_resumes_at_that_step_without_rerunning_finished_steps(tmp_path: Path) -> None:
    """Killed inside 80-fabric, the node reboots; gb300-resume.service skips every finished step, runs 80-fabric
    again from its start, and the bootstrap ends ready."""
    box = _interrupted(tmp_path)
    steps = [entry[1] for entry in box.config["runcmd"]]
    current = steps.index("80-fabric")
    assert box.read("/run/gb300/current-step") == "80-fabric\n"
    assert not box.path("/var/lib/gb300/status").exists()
    assert box.state()["services"]["gb300-resume"]["enabled"], "run-step enables the unit when the bootstrap starts"
    for step in steps[:current]:
        assert box.path(f"/var/lib/gb300/steps/{step}.done").is_file(), step
    assert not box.path("/var/lib/gb300/steps/80-fabric.done").exists()
    calls_before, journal_before = len(box.calls()), len(_journal(box))

    box.reboot()
    result = box.start_unit(UNIT)

    assert result is not None, "the unit's conditions hold on a node whose bootstrap did not finish"
    assert result.returncode == 0, result.stdout + result.stderr
    assert box.read("/var/lib/gb300/status") == "state: ready\n"
    assert box.path("/var/lib/gb300/bootstrap.done").is_file()
    journal = _journal(box)[journal_before:]
    for step in steps[:current]:
        lines = [line for line in journal if line.startswith(f"gb300-{step}: ")]
        assert lines == [f"gb300-{step}: resumed after a reboot: done before it, not run again"], step
    # The only commands run after the reboot are the interrupted step's: nothing of the finished steps again.
    assert [c for c in box.calls()[calls_before:] if not c.startswith("READ logger")] == [f"READ {STUCK}"]
    assert box.path("/var/lib/gb300/steps/80-fabric.done").is_file()


def test_a_node_whose_bootstrap_finished_runs_nothing_after_a_reboot(tmp_path: Path) -> None:
    """Once bootstrap.done exists, gb300-resume.service's condition keeps it from running at later boots."""
    box = Sandbox(tmp_path / "node", render_role("gpu-node").cloud_config, hpc_image_machine())
    assert box.run().ok
    box.reboot()
    assert box.start_unit(UNIT) is None
