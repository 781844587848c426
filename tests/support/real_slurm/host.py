"""One machine of the real-Slurm cluster: its own network, UTS, mount, PID and cgroup namespaces over the shared root.

A :class:`Host` is an overlay of the extracted Debian root (read-only lower, shared by every host of every
cluster of a release) and a writable layer of its own (``upper``: the files gb300 renders for it, written before
it starts). Its first process (``unshare --fork --kill-child``) mounts the overlay, ``/proc``, ``/sys``, a
``/dev`` of its own (with fake ``/dev/nvidia*`` character devices on GPU nodes) and a fresh ``/run``, sets its
host name, chroots into the overlay and waits; commands and daemons enter it with ``nsenter``. Killing that first
process (by PID) kills everything in its PID namespace, and its mounts go with its mount namespace; the network
namespace (``ip netns``) and the host's cgroup directory are removed by :meth:`Host.destroy`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_V1 = Path("/sys/fs/cgroup")

_INIT = r"""
set -euo pipefail
merged=$1 lower=$2 upper=$3 work=$4 name=$5 gpus=$6 ready=$7
mount --make-rprivate /
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$merged"
mount -t proc proc "$merged/proc"
mount -t sysfs sysfs "$merged/sys"
if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then
  mount -t cgroup2 cgroup2 "$merged/sys/fs/cgroup"
else
  mount -t tmpfs -o mode=0755 tmpfs "$merged/sys/fs/cgroup"
  while read -r _ point kind opts _; do
    case "$point" in /sys/fs/cgroup/*) ;; *) continue ;; esac
    mkdir -p "$merged$point"
    if [ "$kind" = cgroup2 ]; then
      mount -t cgroup2 cgroup2 "$merged$point"
    elif [ "$kind" = cgroup ]; then
      mount -t cgroup -o "$opts" cgroup "$merged$point"
    fi
  done </proc/self/mounts
fi
mount -t tmpfs -o mode=0755 tmpfs "$merged/dev"
for dev in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
  IFS=: read -r node major minor <<<"$dev"
  mknod -m 0666 "$merged/dev/$node" c "$major" "$minor"
done
for ((i = 0; i < gpus; i++)); do mknod -m 0666 "$merged/dev/nvidia$i" c 195 "$i"; done
[ "$gpus" -eq 0 ] || mknod -m 0666 "$merged/dev/nvidiactl" c 195 255
mkdir -p "$merged/dev/pts" "$merged/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$merged/dev/pts"
ln -s pts/ptmx "$merged/dev/ptmx"
mount -t tmpfs tmpfs "$merged/dev/shm"
mount -t tmpfs -o mode=0755 tmpfs "$merged/run"
hostname "$name"
touch "$ready"
exec chroot "$merged" /bin/bash -c 'trap : CHLD; while :; do sleep 3600 & wait; done'
"""


@dataclass
class Host:
    """One machine: ``name`` (its host name), ``address`` on the cluster's bridge, the directory holding its layers."""

    name: str
    address: str
    netns: str
    directory: Path
    lower: Path
    gpus: int = 0
    init: subprocess.Popen[bytes] | None = None
    pid1: int = 0
    cgroups: list[Path] = field(default_factory=list)
    daemons: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def upper(self) -> Path:
        """The host's writable layer: a file written here before :meth:`boot` is that file on the machine."""
        return self.directory / "upper"

    def boot(self) -> None:
        """Start the host's first process in its namespaces (its own cgroup first) and wait until it is chrooted."""
        for sub in ("upper", "work", "merged"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        ready = self.directory / "ready"
        self.cgroups = _cgroup_dirs(self.netns)
        script = "".join(f'echo $$ >"{d}/cgroup.procs"\n' for d in self.cgroups) + _exec_unshare()
        self.init = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{self.netns}", "bash", "-c", script, "init", _INIT,
             str(self.directory / "merged"), str(self.lower), str(self.upper), str(self.directory / "work"),
             self.name, str(self.gpus), str(ready)],
            stdout=(self.directory / "init.log").open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not ready.exists():
            if self.init.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start: {(self.directory / 'init.log').read_text()[-2000:]}")
            time.sleep(0.05)
        self.pid1 = _child_of(self.init.pid)
        merged = str(self.directory / "merged")
        while _root_of(self.pid1) != merged:  # "ready" comes just before PID 1 chroots
            if self.init.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not chroot: {(self.directory / 'init.log').read_text()[-2000:]}")
            time.sleep(0.02)

    def enter(self) -> list[str]:
        """The prefix that runs a command inside this host (its namespaces and root), with a clean environment."""
        return [
            "nsenter", "-t", str(self.pid1), "-m", "-u", "-n", "-p", "-C", "-r", "-w", "--",
            "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", f"HOSTNAME={self.name}",
        ]  # fmt: skip

    def run(self, argv: list[str], timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside this host and wait for it."""
        done = subprocess.run(
            [*self.enter(), *argv], capture_output=True, text=True, timeout=timeout, check=False, errors="replace"
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{self.name}: {argv} exited {done.returncode}: {done.stderr[-2000:]}")
        return done

    def start(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        """Start a long-running ``argv`` (a daemon in the foreground) inside this host; its output goes to a log."""
        log = (self.directory / f"{name}.out").open("ab")
        process = subprocess.Popen([*self.enter(), *argv], stdout=log, stderr=subprocess.STDOUT)
        self.daemons[name] = process
        return process

    def stop(self, name: str) -> None:
        """Stop the daemon started as ``name`` (SIGTERM to its process inside the host, then wait)."""
        process = self.daemons.pop(name)
        if process.poll() is None:
            child = _child_of(process.pid, wait=1)
            if child:
                os.kill(child, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                if child:
                    os.kill(child, signal.SIGKILL)
                process.wait(timeout=10)

    def destroy(self) -> None:
        """Kill the host's first process (and with it every process in its PID namespace), then its cgroups."""
        for process in self.daemons.values():
            if process.poll() is None:
                process.kill()
        if self.init is not None and self.init.poll() is None:
            self.init.kill()  # unshare --kill-child: its child, PID 1 of the namespace, gets SIGKILL
            self.init.wait(timeout=30)
        for process in self.daemons.values():
            process.wait(timeout=30)
        for directory in self.cgroups:
            _remove_cgroup(directory)


def _exec_unshare() -> str:
    return 'exec unshare --mount --uts --pid --cgroup --fork --kill-child=SIGKILL bash -c "$1" init "${@:2}"\n'


def _child_of(pid: int, wait: float = 10) -> int:
    """The (first) child process of ``pid``; 0 when it has none within ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            children = []
        if children:
            return int(children[0])
        if time.monotonic() > deadline:
            return 0
        time.sleep(0.02)


def _root_of(pid: int) -> str:
    try:
        return str(Path(f"/proc/{pid}/root").readlink())
    except OSError:
        return ""


def _cgroup_dirs(name: str) -> list[Path]:
    """A cgroup of its own for a host, under this process's cgroup in every hierarchy (v1 and v2)."""
    made: list[Path] = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers.startswith("name="):
            continue
        if controllers:
            base = CGROUP_V1 / controllers
        else:
            base = CGROUP_V1 / "unified" if (CGROUP_V1 / "unified").is_dir() else CGROUP_V1
        if not (base / "cgroup.procs").exists():
            continue
        directory = base / path.lstrip("/") / f"gb300-real-slurm-{name}"
        directory.mkdir(exist_ok=True)
        if base.name == "cpuset":
            for knob in ("cpuset.cpus", "cpuset.mems"):
                (directory / knob).write_text((directory.parent / knob).read_text())
        made.append(directory)
    return made


def _remove_cgroup(directory: Path) -> None:
    """Remove a host's cgroup tree, deepest first (the processes in it are gone)."""
    if not directory.is_dir():
        return
    for sub in sorted((p for p in directory.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            sub.rmdir()
    with contextlib.suppress(OSError):
        directory.rmdir()
