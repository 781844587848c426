"""A scratch machine for running rendered node bootstrap steps without root or hardware.

`Sandbox` takes a rendered cloud-config, applies its `write_files` under a scratch root (every node
script prefixes its paths with `${GB300_ROOT:-}`), and runs its `runcmd` entries in order the way
cloud-init does (each entry runs even after one fails). Hardware and system commands (nvidia-smi,
ibstat, mdadm, apt-get, dpkg-query, systemctl, mkfs.xfs, mount, lsblk, logger, curl, make, ...) are stand-ins
from tests/support/standin.py that print recordings from tests/fixtures/hw/ and keep machine state in
state.json. A `Machine` describes that state; `hpc_image_machine()` is a GB300 VM on Azure's
Ubuntu-HPC GB image, `plain_ubuntu_machine()` one on plain Ubuntu 24.04. Other tests (the Slurm health
checks) reuse this module to run their scripts.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.support.files import FIXTURES

HW_FIXTURES = FIXTURES / "hw"
STANDIN = Path(__file__).resolve().parent / "standin.py"


@dataclass
class Machine:
    """What the stand-ins report: recordings to print, installed packages, services, files."""

    nvidia_smi_q: str = "nvidia-smi-q.txt"
    ibstat: str = "ibstat.txt"
    lsblk: str = "lsblk.json"
    driver_version: str = "580.126.20"
    packages: dict[str, str] = field(default_factory=dict)
    holds: list[str] = field(default_factory=list)
    services: dict[str, dict[str, bool]] = field(default_factory=dict)
    sysctl: dict[str, str] = field(default_factory=dict)
    arch: str = "aarch64"
    kernel: str = "6.8.0-1029-azure-nvidia"
    hostname: str = "gb300-gpu-a-000001"
    root_source: str = "/dev/nvme0n1p1"
    # node path -> file contents, created under the root before the first run
    files: dict[str, str] = field(default_factory=dict)
    # kernel modules loaded at boot (directories under /sys/module)
    modules: list[str] = field(default_factory=list)
    # URL -> local file the stand-in curl serves for it (other URLs get a one-line text stub)
    downloads: dict[str, str] = field(default_factory=dict)
    # package -> the newer version an upgrade would install; package -> {package: version} it pulls in
    available: dict[str, str] = field(default_factory=dict)
    pulls: dict[str, dict[str, str]] = field(default_factory=dict)
    # what Ubuntu's archive installs for a package asked for without a version
    archive: dict[str, str] = field(default_factory=lambda: {"linux-azure-nvidia-6.8": "6.8.0-1029.32"})


CMDLINE_PLAIN = "BOOT_IMAGE=/vmlinuz-6.8.0-1017-azure root=PARTUUID=0a1b2c3d-01 ro console=tty1 console=ttyAMA0\n"
CMDLINE_GB = (
    "BOOT_IMAGE=/vmlinuz-6.8.0-1029-azure-nvidia root=PARTUUID=0a1b2c3d-01 ro console=tty1 console=ttyAMA0 "
    "iommu.passthrough=1 irqchip.gicv3_nolpi=y arm_smmu_v3.disable_msipolling=1 init_on_alloc=0 net.ifnames=0\n"
)


def hpc_image_machine() -> Machine:
    """A GB300 VM booted from microsoft-dsvm:ubuntu-hpc:2404-gb: the stack is present and pinned."""
    packages: dict[str, str] = {}
    holds: list[str] = []
    for line in (HW_FIXTURES / "dpkg-hpc-image.tsv").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        name, version, held = line.split("\t")
        packages[name] = version
        if held == "held":
            holds.append(name)
    running = {"enabled": True, "active": True}
    pkeys = {
        f"/sys/class/infiniband/mlx5_ib{i}/ports/1/pkeys/{n}": v
        for i in range(4)
        for n, v in (("0", "0x800b"), ("1", "0x7fff"), ("2", "0x0000"))
    }
    return Machine(
        packages=packages,
        holds=holds,
        services={
            "nvidia-persistenced": dict(running),
            "nvidia-dcgm": dict(running),
            "nvidia-imex": {"enabled": True, "active": False},
            "docker": dict(running),
            "walinuxagent": dict(running),
        },
        sysctl={
            "vm.zone_reclaim_mode": "0",
            "net.ipv4.neigh.default.gc_thresh1": "128",
            "net.ipv4.neigh.default.gc_thresh2": "512",
            "net.ipv4.neigh.default.gc_thresh3": "1024",
        },
        files={
            "/etc/os-release": (HW_FIXTURES / "os-release").read_text(),
            "/etc/waagent.conf": (HW_FIXTURES / "waagent.conf").read_text(),
            "/proc/cmdline": CMDLINE_GB,
            "/proc/driver/nvidia/version": (HW_FIXTURES / "proc-driver-nvidia-version.txt").read_text(),
            "/dev/nvidia-caps-imex-channels/channel0": "",
            "/etc/nvidia-imex/config.cfg": (HW_FIXTURES / "nvidia-imex-config.cfg").read_text(),
            "/usr/local/nccl-rdma-sharp-plugins/lib/libnccl-net.so": "ELF stand-in\n",
            "/opt/nccl-tests/build/all_reduce_perf": "ELF stand-in\n",
            "/etc/docker/daemon.json": '{"runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}}\n',
            "/etc/fstab": "LABEL=cloudimg-rootfs\t/\text4\tdiscard,commit=30,errors=remount-ro\t0 1\n",
            # Ubuntu's PAM files, which gb300-pam-adopt edits (shaped like Ubuntu 24.04's).
            "/etc/pam.d/sshd": (FIXTURES / "slurm/pam.d/sshd").read_text(),
            "/etc/pam.d/common-session": (FIXTURES / "slurm/pam.d/common-session").read_text(),
            **pkeys,
        },
        modules=["nvidia", "nvidia_uvm", "nvidia_peermem", "mlx5_ib"],
    )


def booted_into_grace_kernel(machine: Machine) -> Machine:
    """``machine`` after 15-kernel's reboot: the Grace kernel runs with Azure's command line."""
    machine.kernel = "6.8.0-1029-azure-nvidia"
    machine.files["/proc/cmdline"] = CMDLINE_GB
    machine.packages.setdefault("linux-azure-nvidia-6.8", "6.8.0-1029.32")
    return machine


DOCA_HOST_URL = (
    "https://www.mellanox.com/downloads/DOCA/DOCA_v3.2.2/host/doca-host_3.2.2-035000-25.10-ubuntu2404_arm64.deb"
)


def serve_doca_host(machine: Machine, directory: Path) -> str:
    """Make ``machine``'s network serve a stand-in doca-host .deb at versions.yaml's URL; returns its sha256
    (pin it in a test's checksums file for the node to accept it)."""
    deb = directory / "doca-host_3.2.2-035000-25.10-ubuntu2404_arm64.deb"
    deb.write_bytes(b"!<arch>\nstand-in doca-host repository package\n")
    machine.downloads[DOCA_HOST_URL] = str(deb)
    return hashlib.sha256(deb.read_bytes()).hexdigest()


def plain_ubuntu_machine() -> Machine:
    """A GB300 VM booted from plain Ubuntu 24.04 arm64: no NVIDIA stack, no nccl-tests, no plugin."""
    machine = hpc_image_machine()
    machine.packages = {"mdadm": "4.3-1ubuntu2.1", "xfsprogs": "6.6.0-1ubuntu2.1"}
    machine.holds = []
    machine.driver_version = ""
    machine.services = {"walinuxagent": {"enabled": True, "active": True}}
    machine.modules = ["mlx5_ib"]
    machine.kernel = "6.8.0-1017-azure"
    machine.files["/proc/cmdline"] = CMDLINE_PLAIN
    for path in (
        "/proc/driver/nvidia/version",
        "/dev/nvidia-caps-imex-channels/channel0",
        "/etc/nvidia-imex/config.cfg",
        "/usr/local/nccl-rdma-sharp-plugins/lib/libnccl-net.so",
        "/opt/nccl-tests/build/all_reduce_perf",
        "/etc/docker/daemon.json",
    ):
        del machine.files[path]
    return machine


@dataclass
class RunResult:
    """What one pass over runcmd did."""

    returncodes: list[tuple[str, int]]
    seconds: float
    output: str

    @property
    def ok(self) -> bool:
        """Every step exited 0."""
        return all(rc == 0 for _, rc in self.returncodes)


class Sandbox:
    """A scratch root, stand-in commands and a rendered cloud-config to run."""

    def __init__(self, base: Path, cloud_config: str, machine: Machine) -> None:
        self.base = base
        self.root = base / "root"
        self.bin = base / "bin"
        self.config: dict[str, Any] = yaml.safe_load(cloud_config)
        self.extra_env: dict[str, str] = {}  # e.g. http_proxy pointing at a stand-in Azure endpoint
        self.root.mkdir(parents=True)
        self.bin.mkdir()
        for command in _standin_commands():
            wrapper = self.bin / command
            wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "{STANDIN}" {command} "$@"\n')
            wrapper.chmod(0o755)
        for node_path, content in machine.files.items():
            target = self.path(node_path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        for module in machine.modules:
            self.path(f"/sys/module/{module}").mkdir(parents=True, exist_ok=True)
        state = {k: v for k, v in machine.__dict__.items() if k not in ("files", "modules")}
        state |= {"fixtures_dir": str(HW_FIXTURES), "arrays": {}, "filesystems": {}, "mounts": []}
        (base / "state.json").write_text(json.dumps(state, indent=1, sort_keys=True))

    def path(self, node_path: str) -> Path:
        """Where a node path lives inside the sandbox root."""
        return self.root / node_path.lstrip("/")

    def read(self, node_path: str) -> str:
        """The text of a node file."""
        return self.path(node_path).read_text()

    def state(self) -> dict[str, Any]:
        """The stand-ins' machine state (packages, services, arrays, mounts...)."""
        return json.loads((self.base / "state.json").read_text())

    def apply_write_files(self) -> None:
        """Place write_files under the root like cloud-init, leaving unchanged files untouched."""
        for entry in self.config.get("write_files", []):
            target = self.path(entry["path"])
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists() or target.read_text() != entry["content"]:
                target.write_text(entry["content"])
            target.chmod(int(entry.get("permissions", "0644"), 8))

    def env(self) -> dict[str, str]:
        """The environment the steps run with: stand-ins first on PATH, the root, no IB wait."""
        return {
            "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.base),
            "LANG": "C.UTF-8",
            "GB300_ROOT": str(self.root),
            "GB300_SANDBOX": str(self.base),
            "GB300_IB_WAIT_SECONDS": "0",
            **self.extra_env,
        }

    def run(self) -> RunResult:
        """Apply write_files and run every runcmd entry in order, as cloud-init's runcmd does."""
        started = time.perf_counter()
        self.apply_write_files()
        results: list[tuple[str, int]] = []
        output: list[str] = []
        for entry in self.config.get("runcmd", []):
            argv = [str(self.path(entry[0])), *entry[1:]]
            label = " ".join(entry[1:]) or Path(entry[0]).name
            if not Path(argv[0]).is_file():  # cloud-init's shell: a command that is not there exits 127
                results.append((label, 127))
                output.append(f"{entry[0]}: not found\n")
                continue
            proc = subprocess.run(argv, env=self.env(), capture_output=True, text=True, check=False)
            results.append((label, proc.returncode))
            output.append(proc.stdout + proc.stderr)
        return RunResult(results, time.perf_counter() - started, "".join(output))

    def write_runcmd_script(self) -> Path:
        """Write runcmd as the shell script cloud-init keeps at /var/lib/cloud/instance/scripts/runcmd (one quoted
        command per line, run in order whatever each returns), with each command's path under the root."""
        lines = ["#!/bin/sh"]
        for entry in self.config.get("runcmd", []):
            argv = [str(self.path(entry[0])), *entry[1:]]
            lines.append(" ".join("'" + a.replace("'", "'\\''") + "'" for a in argv))
        script = self.path("/var/lib/cloud/instance/scripts/runcmd")
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text("\n".join(lines) + "\n")
        script.chmod(0o700)
        return script

    def reboot(self) -> None:
        """What a reboot does to the disk: /run (a tmpfs) is empty again; everything else stays."""
        shutil.rmtree(self.path("/run"), ignore_errors=True)

    def start_unit(self, name: str) -> subprocess.CompletedProcess[str] | None:
        """Start a oneshot unit placed under /etc/systemd/system as systemd does at boot: ``None`` when a
        ``ConditionPathExists=`` is not met, else the result of its ``ExecStartPre=`` lines then ``ExecStart=``,
        with its ``Environment=``. Node paths in the command lines are taken under the root."""
        unit = self.read(f"/etc/systemd/system/{name}")
        settings = [line.split("=", 1) for line in unit.splitlines() if "=" in line and not line.startswith("#")]
        for key, value in settings:
            if key == "ConditionPathExists":
                negate, path = value.startswith("!"), value.lstrip("!")
                if self.path(path).exists() == negate:
                    return None
        env = self.env()
        env |= dict(v.split("=", 1) for k, v in settings if k == "Environment")
        proc: subprocess.CompletedProcess[str] | None = None
        for key, value in settings:
            if key not in ("ExecStartPre", "ExecStart"):
                continue
            program, *args = value.split()
            argv = [program, *(str(self.path(a)) if a.startswith("/") else a for a in args)]
            proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=600)
            if proc.returncode != 0:
                return proc
        return proc

    def calls(self) -> list[str]:
        """Every stand-in call so far, `READ ...` or `MUTATE ...`, in order."""
        log = self.base / "calls.log"
        return log.read_text().splitlines() if log.exists() else []

    def snapshot(self) -> dict[str, tuple[str, ...]]:
        """Every file and directory under the root (bar /run) with type, mode, content hash, mtime."""
        snap: dict[str, tuple[str, ...]] = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel_dir = Path(dirpath).relative_to(self.root)
            if rel_dir.parts[:1] == ("run",):
                continue
            for name in dirnames:
                st = (Path(dirpath) / name).lstat()
                snap[str(rel_dir / name) + "/"] = ("dir", oct(stat.S_IMODE(st.st_mode)))
            for name in filenames:
                p = Path(dirpath) / name
                st = p.lstat()
                digest = hashlib.sha256(p.read_bytes()).hexdigest()
                snap[str(rel_dir / name)] = (
                    "file",
                    oct(stat.S_IMODE(st.st_mode)),
                    digest,
                    str(st.st_mtime_ns),
                )
        return snap


def _standin_commands() -> list[str]:
    from tests.support import standin  # noqa: PLC0415 - the stand-in module needs GB300_SANDBOX only when run

    return list(standin.COMMANDS)


@dataclass
class TwoRuns:
    """A sandboxed node bootstrapped twice: both results, the files after the first, each run's calls."""

    box: Sandbox
    first: RunResult
    second: RunResult
    snapshot_after_first: dict[str, tuple[str, ...]]
    calls_in_first: list[str]
    calls_in_second: list[str]


def run_twice(box: Sandbox) -> TwoRuns:
    """Bootstrap ``box`` twice (the idempotence check every sandbox suite makes)."""
    first = box.run()
    calls_in_first = box.calls()
    snapshot = box.snapshot()
    second = box.run()
    return TwoRuns(box, first, second, snapshot, calls_in_first, box.calls()[len(calls_in_first) :])
