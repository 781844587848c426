"""Root for the real-Slurm cluster: nothing as root, ``sudo -n`` where that works (CI runners), else unavailable.

Every command that needs root (namespaces, mounts, ``ip``, ownership in a host's layer, signals to the daemons,
removing what the cluster left) goes through :func:`prefix`; the test process itself stays the user it is.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path


@functools.cache
def sudo() -> tuple[str, ...] | None:
    """The prefix that runs a command as root here: none as root, ``sudo -n`` where that works; None: no root."""
    if os.geteuid() == 0:
        return ()
    if (
        shutil.which("sudo")
        and subprocess.run(["sudo", "-n", "true"], capture_output=True, check=False).returncode == 0
    ):
        return ("sudo", "-n")
    return None


def prefix() -> list[str]:
    """:func:`sudo`, for a caller that has checked that root is available (:func:`.root.unavailable`)."""
    found = sudo()
    if found is None:
        raise RuntimeError("the real-Slurm cluster needs root or passwordless sudo")
    return list(found)


def run(argv: Sequence[str], *, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``argv`` as root; its output captured."""
    done = subprocess.run(
        [*prefix(), *argv], capture_output=True, text=True, errors="replace", timeout=timeout, check=False
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"{list(argv)} exited {done.returncode}: {done.stderr[-1000:]}")
    return done


def read(path: Path) -> str:
    """A file's text read as root ('' when it is missing): daemon logs in a host's layer are not the user's."""
    done = run(["cat", str(path)], check=False)
    return done.stdout if done.returncode == 0 else ""
