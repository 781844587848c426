"""``run-hooks <point>`` (cloud-init/lib/run-hooks) on a scratch node root: a hook that fails drains the node, one
that hangs is killed at its timeout, one with ``warn`` lets the next run, and a file that differs from its signed
sha256 is not run.

``scontrol``, ``logger`` and ``hostname`` are stand-ins on ``PATH`` that record their arguments: what Slurm does with
the drain is the real-Slurm tests' (tests/slurm/), not this one's.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path

from gb300.paths import CLOUD_INIT_DIR

RECORDER = '#!/usr/bin/env bash\nprintf "%s\\n" "$(basename "$0") $*" >>"$GB300_CALLS"\n'


def _node(tmp_path: Path, hooks: list[tuple[str, str, int, str]]) -> tuple[Path, dict[str, str]]:
    """A node root with lib.sh, the hooks (name, script text, timeout, on-failure) and their table, and stand-ins."""
    root = tmp_path / "root"
    lib = root / "usr/local/lib/gb300"
    (lib / "hooks").mkdir(parents=True)
    (root / "etc/gb300").mkdir(parents=True)
    (lib / "lib.sh").write_text((CLOUD_INIT_DIR / "lib" / "gb300-lib.sh").read_text(encoding="utf-8"))
    rows = ["# point name timeout on-failure sha256"]
    for name, text, timeout, on_failure in hooks:
        (lib / "hooks" / name).write_text(text, encoding="utf-8")
        (lib / "hooks" / name).chmod(0o755)
        rows.append(f"afterHealthGate\t{name}\t{timeout}\t{on_failure}\t{hashlib.sha256(text.encode()).hexdigest()}")
    (root / "etc/gb300/hooks.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (root / "etc/gb300/cluster.env").write_text("GB300_CLUSTER=c1\nGB300_POOL=train\nGB300_ROLE=gpu-node\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("scontrol", "logger"):
        (bin_dir / tool).write_text(RECORDER + ('[ "$#" -gt 3 ] || cat >>"$GB300_CALLS"\n' if tool == "logger" else ""))
        (bin_dir / tool).chmod(0o755)
    (bin_dir / "hostname").write_text("#!/bin/sh\necho gpu-0001\n")
    (bin_dir / "hostname").chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "GB300_ROOT": str(root),
        "GB300_CALLS": str(tmp_path / "calls"),
    }
    return root, env


def _run(tmp_path: Path, env: dict[str, str]) -> tuple[int, str]:
    run = subprocess.run(
        [str(CLOUD_INIT_DIR / "lib" / "run-hooks"), "afterHealthGate"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    calls = tmp_path / "calls"
    return run.returncode, calls.read_text(encoding="utf-8") if calls.exists() else ""


def test_a_failing_hook_drains_the_node_naming_the_hook(tmp_path: Path) -> None:
    """A hook that exits non-zero with onFailure drain drains the node with a reason naming it; run-hooks fails."""
    _root, env = _node(tmp_path, [("bad", "#!/bin/sh\necho broken >&2\nexit 3\n", 30, "drain")])
    rc, calls = _run(tmp_path, env)
    assert rc == 1
    assert "scontrol update nodename=gpu-0001 state=drain reason=gb300-hook: bad exited with status 3" in calls
    assert "broken" in calls  # the hook's output reached the journal (logger)


def test_a_hanging_hook_is_killed_at_its_timeout(tmp_path: Path) -> None:
    """A hook that sleeps past its timeout is killed then (not at the sleep's end) and drains the node."""
    _root, env = _node(tmp_path, [("hang", "#!/bin/sh\nsleep 120\n", 1, "drain")])
    start = time.monotonic()
    rc, calls = _run(tmp_path, env)
    assert time.monotonic() - start < 30
    assert rc == 1
    assert "reason=gb300-hook: hang killed at its timeout of 1s" in calls


def test_a_warning_hook_lets_the_next_one_run(tmp_path: Path) -> None:
    """With onFailure warn a failure is logged, nothing is drained and the next hook runs."""
    hooks = [("soft", "#!/bin/sh\nexit 1\n", 30, "warn"), ("next", "#!/bin/sh\necho next ran\n", 30, "drain")]
    _root, env = _node(tmp_path, hooks)
    rc, calls = _run(tmp_path, env)
    assert rc == 0
    assert "scontrol" not in calls
    assert "WARNING: hook soft" in calls
    assert "next ran" in calls


def test_a_hook_changed_on_the_node_is_not_run(tmp_path: Path) -> None:
    """A hook whose file differs from its sha256 in the signed table is refused and drains the node."""
    root, env = _node(tmp_path, [("agent", "#!/bin/sh\necho agent\n", 30, "drain")])
    (root / "usr/local/lib/gb300/hooks/agent").write_text("#!/bin/sh\necho tampered\n")
    rc, calls = _run(tmp_path, env)
    assert rc == 1
    assert "tampered" not in calls
    assert "does not match its sha256" in calls


def test_a_hook_sees_its_documented_environment_only(tmp_path: Path) -> None:
    """A hook sees its point, name, role, pool and cluster, and nothing of the runner's other environment."""
    _root, env = _node(tmp_path, [("env", "#!/bin/sh\nenv | sort\n", 30, "drain")])
    env["SECRET_TOKEN"] = "s3cret"  # noqa: S105 - a stand-in secret the hook must not see
    rc, calls = _run(tmp_path, env)
    assert rc == 0
    for line in ("GB300_HOOK_POINT=afterHealthGate", "GB300_HOOK_NAME=env", "GB300_ROLE=gpu-node", "GB300_POOL=train",
                 "GB300_CLUSTER=c1"):  # fmt: skip
        assert line in calls
    assert "s3cret" not in calls
