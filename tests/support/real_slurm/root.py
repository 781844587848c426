"""The extracted Debian root of a release (scripts/build-slurm-root), and whether this machine can run the cluster."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

BUILD = Path(__file__).resolve().parents[3] / "scripts" / "build-slurm-root"
SUITES = {"trixie": "24.11", "sid": "26.05"}
"""Debian suite -> the Slurm release it ships: the releases either side of ours (25.11)."""
TOOLS = ("ip", "unshare", "nsenter", "setpriv", "chroot", "debootstrap", "zstd")


@functools.cache
def slurm_root(suite: str) -> Path:
    """The extracted root of ``suite`` (built and cached on first use: minutes; later: the cached directory)."""
    done = subprocess.run([str(BUILD), suite], stdout=subprocess.PIPE, text=True, check=False, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/build-slurm-root {suite} exited {done.returncode} (its progress is above)")
    return Path(done.stdout.strip().splitlines()[-1])


@functools.cache
def unavailable() -> str | None:
    """Why this machine cannot run a real-Slurm cluster (None: it can): root, namespaces, overlayfs, tools."""
    if os.geteuid() != 0:
        return "not root: the real-Slurm cluster needs namespaces, mounts and chroot (CI runs as root)"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists()]
    if missing:
        return f"missing {', '.join(missing)} (scripts/ensure-test-tools installs them)"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "no overlayfs in this kernel"
    probe = subprocess.run(
        ["unshare", "--net", "--mount", "--uts", "--pid", "--cgroup", "--fork", "true"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        return f"cannot create namespaces: {probe.stderr.strip()[:200]}"
    return None
