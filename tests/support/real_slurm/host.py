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

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.real_slurm import priv

_INIT = r"""
set -euo pipefail
merged=$1 lower=$2 upper=$3 work=$4 name=$5 gpus=$6 fixture=$7
mount --make-rprivate /
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$merged"
mount -t proc proc "$merged/proc"
mount -t sysfs sysfs "$merged/sys"
if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then
  mount -t cgroup2 -o nsdelegate cgroup2 "$merged/sys/fs/cgroup" 2>/dev/null ||
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
# What udev and systemd link on every machine: bash's process substitution reads /dev/fd/N.
ln -s /proc/self/fd "$merged/dev/fd"
for i in 0:stdin 1:stdout 2:stderr; do ln -s "/proc/self/fd/${i%%:*}" "$merged/dev/${i#*:}"; done
mount -t tmpfs tmpfs "$merged/dev/shm"
mount -t tmpfs -o mode=0755 tmpfs "$merged/run"
# The host's processes live in /system.slice (as services under systemd): slurmd resets limits in its parent.
for dir in "$merged"/sys/fs/cgroup/*/ "$merged/sys/fs/cgroup/"; do
  [ -e "$dir/cgroup.procs" ] || continue
  mkdir -p "$dir/system.slice"
  for knob in cpuset.cpus cpuset.mems; do
    [ ! -e "$dir/$knob" ] || cat "$dir/$knob" >"$dir/system.slice/$knob"
  done
  echo $$ >"$dir/system.slice/cgroup.procs"
  if [ -e "$dir/cgroup.subtree_control" ]; then # cgroup v2: hand the host's controllers on to its services
    for controller in $(cat "$dir/cgroup.controllers"); do
      echo "+$controller" >"$dir/cgroup.subtree_control" 2>/dev/null || true
    done
  fi
done
mkdir -p "$merged/run/.fixture"
mount --bind "$fixture" "$merged/run/.fixture"
hostname "$name"
exec chroot "$merged" /bin/bash -c 'touch /run/.fixture/ready; trap : CHLD; while :; do sleep 3600 & wait; done'
"""


_BOOT = r"""
# As root: the host's cgroups (cgroups.join: where its processes go; cgroups.remove: what to remove afterwards),
# then its namespaces. cgroup v1 (or hybrid): a child of this process's cgroup in every hierarchy; cgroup v2 only:
# a tree at the hierarchy's root with the controllers handed down (the caller's own cgroup may hold processes).
set -euo pipefail
netns=$1 dir=$2 uptime=$3
shift 3
echo $$ >"$dir/init.pid"
: >"$dir/cgroups.join"
: >"$dir/cgroups.remove"
tag="gb300-real-slurm-$netns"
if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then
  top="/sys/fs/cgroup/$tag"
  mkdir -p "$top/host"
  echo "$top" >>"$dir/cgroups.remove"
  for controller in $(cat "$top/cgroup.controllers"); do
    echo "+$controller" >"$top/cgroup.subtree_control" 2>/dev/null || true
  done
  echo $$ >"$top/host/cgroup.procs"
  echo "$top/host/system.slice" >>"$dir/cgroups.join"
else
  while IFS=: read -r _ controllers path; do
    case "$controllers" in
      name=*) continue ;;
      "") base=/sys/fs/cgroup/unified ;;
      *) base="/sys/fs/cgroup/$controllers" ;;
    esac
    [ -e "$base/cgroup.procs" ] || continue
    cg="$base${path%/}/$tag"
    mkdir -p "$cg"
    for knob in cpuset.cpus cpuset.mems; do
      [ ! -e "$cg/$knob" ] || cat "${cg%/*}/$knob" >"$cg/$knob"
    done
    echo $$ >"$cg/cgroup.procs"
    echo "$cg" >>"$dir/cgroups.remove"
    echo "$cg/system.slice" >>"$dir/cgroups.join"
  done </proc/self/cgroup
fi
exec nsenter --net="/run/netns/$netns" unshare --mount --uts --pid --cgroup --time --boottime="-$uptime" --fork \
  --kill-child=SIGKILL bash -c "$1" init "${@:2}"
"""
_JOIN = 'while read -r d; do echo $$ >"$d/cgroup.procs"; done <"$1"; shift; exec "$@"'
"""Run as root before ``nsenter``: the command joins the host's /system.slice (nsenter enters the cgroup namespace
only, not a cgroup in it)."""
_PIDFILE = 'echo $$ >"/run/.fixture/$1.pid"; shift; exec "$@"'
"""Run inside the host before a daemon: its PID in the host's PID namespace, for :meth:`Host.stop`."""


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
    daemons: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def upper(self) -> Path:
        """The host's writable layer: a file written here before :meth:`boot` is that file on the machine."""
        return self.directory / "upper"

    def boot(self) -> None:
        """Start the host's first process in its cgroup and namespaces and wait until it has chrooted."""
        for sub in ("upper", "work", "merged", "fixture"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        ready = self.directory / "fixture" / "ready"
        priv.run(["rm", "-f", str(ready)])
        self.init = subprocess.Popen(
            [*priv.prefix(), "bash", "-c", _BOOT, "boot", self.netns, str(self.directory), str(_uptime() - 1), _INIT,
             str(self.directory / "merged"), str(self.lower), str(self.upper), str(self.directory / "work"),
             self.name, str(self.gpus), str(self.directory / "fixture")],
            stdout=(self.directory / "init.log").open("ab"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not ready.exists():
            if self.init.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start: {(self.directory / 'init.log').read_text()[-2000:]}")
            time.sleep(0.05)
        self.pid1 = _child_of(int((self.directory / "init.pid").read_text()))

    def enter(self) -> list[str]:
        """The prefix that runs a command inside this host (its namespaces, root and /system.slice), as root, with
        a clean environment."""
        return [
            *priv.prefix(), "bash", "-c", _JOIN, "join", str(self.directory / "cgroups.join"),
            "nsenter", "-t", str(self.pid1), "-m", "-u", "-n", "-p", "-C", "-T", "-r", "-w", "--",
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
        process = subprocess.Popen(
            [*self.enter(), "bash", "-c", _PIDFILE, "pidfile", name, *argv], stdout=log, stderr=subprocess.STDOUT
        )
        self.daemons[name] = process
        return process

    def stop(self, name: str) -> None:
        """Stop the daemon started as ``name``: SIGTERM to its PID inside the host, SIGKILL after 20 s."""
        process = self.daemons.pop(name)
        pid = (self.directory / "fixture" / f"{name}.pid").read_text().strip()
        for signal_name, wait in (("TERM", 20), ("KILL", 10)):
            if process.poll() is not None:
                return
            self.run(["kill", f"-{signal_name}", pid], check=False)
            try:
                process.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue

    def destroy(self) -> None:
        """Kill the host's ``unshare`` (its child, PID 1 of the host, gets SIGKILL, and with it every process of the
        PID namespace; the mounts go with the mount namespace), then remove the host's cgroups."""
        pid_file = self.directory / "init.pid"
        if self.init is not None and self.init.poll() is None and pid_file.exists():
            priv.run(["kill", "-KILL", pid_file.read_text().strip()], check=False)
            self.init.wait(timeout=30)
        for process in self.daemons.values():
            process.wait(timeout=30)
        self.daemons.clear()
        self.init = None
        remove = self.directory / "cgroups.remove"
        if remove.exists():
            priv.run(["bash", "-c", _REMOVE_CGROUPS, "remove", str(remove)], check=False)


_REMOVE_CGROUPS = r"""
# The PID namespace's processes die after its PID 1: retry until their cgroups are empty (10 s at most).
for _ in $(seq 100); do
  left=0
  while read -r d; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || left=1
  done <"$1"
  [ "$left" = 1 ] || exit 0
  sleep 0.1
done
exit 1
"""


def _uptime() -> int:
    return int(float(Path("/proc/uptime").read_text().split()[0]))


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
