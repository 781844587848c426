"""run-step's bounds in the sandbox: a transient failure is retried to success, a stalled step is killed at
its timeout with a status naming it, and a step's own failure is not retried."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from gb300.node.settings import load_node
from gb300.node.steps import RUN_STEP
from tests.support.bootstrap_helpers import render_role
from tests.support.sandbox import Sandbox, hpc_image_machine

pytestmark = pytest.mark.slow

STATUS = "/var/lib/gb300/status"


@pytest.fixture(scope="module")
def cloud_config() -> str:
    """The reference GPU node's rendered cloud-config (run-step, lib.sh and node.env come from it)."""
    return render_role("gpu-node").cloud_config


def _box(tmp_path: Path, cloud_config: str, step: str, script: str, *, timeout_s: int, retries: int) -> Sandbox:
    """A sandbox with the rendered files, one extra step, and short bounds appended to node.env."""
    box = Sandbox(tmp_path / "node", cloud_config, hpc_image_machine())
    box.apply_write_files()
    env = box.path("/etc/gb300/node.env")
    env.write_text(
        env.read_text() + f"GB300_STEP_TIMEOUT_SECONDS={timeout_s}\nGB300_STEP_RETRIES={retries}\n"
        "GB300_STEP_BACKOFF_SECONDS=1\n"
    )
    target = box.path(f"/usr/local/lib/gb300/steps/{step}.sh")
    target.write_text("#!/usr/bin/env bash\nset -euo pipefail\n" + script)
    target.chmod(0o755)
    return box


def _run(box: Sandbox, step: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    proc = subprocess.run(
        [str(box.path(RUN_STEP)), step], env=box.env(), capture_output=True, text=True, check=False, timeout=120
    )
    return proc, time.monotonic() - started


def _status(box: Sandbox) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in box.read(STATUS).splitlines())


def test_node_data_bounds_every_step() -> None:
    """node.yaml gives every step a timeout and bounded retries, rendered into node.env."""
    node = load_node()
    assert node.step_timeout_seconds > 0
    assert 0 < node.step_retries <= 5
    text = render_role("gpu-node").cloud_config
    assert f"GB300_STEP_TIMEOUT_SECONDS={node.step_timeout_seconds}" in text
    assert "GB300_STEP_TIMEOUTS='20-nvidia-driver=" in text


def test_transient_failure_is_retried_to_success(tmp_path: Path, cloud_config: str) -> None:
    """A step whose first attempt fails with no reason (a mirror hiccup) passes on the retry; no failed status."""
    flag = "${GB300_ROOT}/var/lib/gb300/flaky-once"
    script = f'if [ ! -e "{flag}" ]; then touch "{flag}"; echo "mirror hiccup" >&2; exit 100; fi\necho fetched\n'
    box = _box(tmp_path, cloud_config, "42-flaky", script, timeout_s=30, retries=2)
    proc, _ = _run(box, "42-flaky")
    assert proc.returncode == 0, proc.stderr
    assert "attempt 1 exited with status 100" in proc.stderr
    assert not box.path(STATUS).exists()
    assert box.path("/var/lib/gb300/steps/42-flaky.done").exists()


def test_stalled_step_is_killed_at_its_timeout(tmp_path: Path, cloud_config: str) -> None:
    """A step that hangs is killed after its timeout; the status names the step and the timeout."""
    box = _box(tmp_path, cloud_config, "43-stall", "sleep 600\n", timeout_s=2, retries=2)
    proc, seconds = _run(box, "43-stall")
    assert proc.returncode != 0
    assert seconds < 30
    status = _status(box)
    assert status["state"] == "failed"
    assert status["step"] == "43-stall"
    assert status["reason"].startswith("timed out after 2s (killed)")


def test_a_steps_own_failure_is_not_retried(tmp_path: Path, cloud_config: str) -> None:
    """A step that fails with a reason (`fail`) is a known failure: one attempt, the reason recorded."""
    script = (
        '. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"\n'
        'echo run >> "${GB300_ROOT}/var/lib/gb300/attempts"\n'
        'fail "fabric: CliqueId 0"\n'
    )
    box = _box(tmp_path, cloud_config, "44-broken", script, timeout_s=30, retries=2)
    proc, _ = _run(box, "44-broken")
    assert proc.returncode != 0
    assert box.read("/var/lib/gb300/attempts") == "run\n"
    assert _status(box)["reason"] == "fabric: CliqueId 0"


def test_retries_are_bounded(tmp_path: Path, cloud_config: str) -> None:
    """A step that keeps failing without a reason is tried 1 + retries times, then recorded as failed."""
    script = 'echo run >> "${GB300_ROOT}/var/lib/gb300/attempts"\nexit 3\n'
    box = _box(tmp_path, cloud_config, "45-always", script, timeout_s=30, retries=2)
    proc, _ = _run(box, "45-always")
    assert proc.returncode == 3
    assert box.read("/var/lib/gb300/attempts") == "run\nrun\nrun\n"
    assert _status(box)["reason"].startswith("exited with status 3 (attempt 3)")
