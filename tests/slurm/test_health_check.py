"""The node health gate (cloud-init/slurm/gb300-health-check) against recorded command output."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gb300.slurm.health import health_spec, render_health_env

from .conftest import Sandbox

pytestmark = pytest.mark.slow  # every test runs a node script in a sandbox (subprocesses)

NODE = "gpu-007"
SHOW_IDLE = f"NodeName={NODE} Arch=aarch64 CPUTot=128 State=IDLE ThreadsPerCore=1\n"


MOUNTS = ("/mnt/resource_nvme", "/lustre")


def healthy(sandbox: Sandbox, *, dcgm_periodic: int = 1, mounts: tuple[str, ...] = MOUNTS) -> None:
    """Lay out a node where every check passes (periodic DCGM level raised so the diag runs too)."""
    spec = health_spec("Standard_ND128isr_GB300_v6", gpus=4, ib_ports=4, ib_rate_gbps=800, ib_rate_status="conflict")
    env = render_health_env(spec, nvme_mount="/mnt/resource_nvme", mounts=mounts)
    env += f"GB300_DCGM_DIAG_LEVEL_PERIODIC={dcgm_periodic}\n"
    sandbox.write("etc/gb300/health.env", env)
    sandbox.write(
        "proc/mounts",
        "/dev/root / ext4 rw 0 0\n/dev/md0 /mnt/resource_nvme xfs rw,noatime 0 0\n"
        "10.0.2.4@tcp:/lustrefs /lustre lustre rw,flock 0 0\n",
    )
    for port in range(4):
        sandbox.write(f"sys/class/infiniband/mlx5_ib{port}/ports/1/pkeys/0", "0x7fff\n")
        sandbox.write(f"sys/class/infiniband/mlx5_ib{port}/ports/1/pkeys/1", "0x8031\n")
    sandbox.write("dev/nvidia-caps-imex-channels/channel0", "")
    sandbox.write("etc/nvidia-imex/config.cfg", "SERVER_PORT=50000\nIMEX_CMD_PORT=50005\nIMEX_CMD_ENABLED=1\n")
    sandbox.unit("nvidia-dcgm", "active")
    sandbox.unit("nvidia-imex", "inactive")
    sandbox.answer_fixture("nvidia-smi", "nvidia-smi-q.gb300.healthy.txt")
    sandbox.answer_fixture("ibstat", "ibstat.gb300.healthy.txt")
    sandbox.answer_fixture("dcgmi", "dcgmi-diag-r1.pass.txt")
    sandbox.answer_fixture("dmesg", "dmesg.clean.txt")
    sandbox.answer("scontrol-show", SHOW_IDLE)


def run_check(sandbox: Sandbox, *args: str) -> tuple[int, list[str]]:
    result = sandbox.run("gb300-health-check", *args, env={"GB300_NODENAME": NODE})
    assert "Traceback" not in result.stderr
    return result.returncode, sandbox.calls("scontrol")


def drains(calls: list[str]) -> list[str]:
    return [c for c in calls if c.startswith("update") and "state=drain" in c]


def test_no_configured_mounts_means_no_mount_check(sandbox: Sandbox) -> None:
    """With no mounts configured (GB300_MOUNTS empty) a node with nothing mounted passes the gate."""
    healthy(sandbox, mounts=())
    sandbox.write("proc/mounts", "/dev/root / ext4 rw 0 0\n")
    rc, calls = run_check(sandbox)
    assert rc == 0
    assert drains(calls) == []


def test_healthy_node_is_not_drained(sandbox: Sandbox) -> None:
    """A node whose every check passes exits 0 and is neither drained nor resumed."""
    healthy(sandbox)
    rc, calls = run_check(sandbox)
    assert rc == 0
    assert calls == [f"show node {NODE} -o"]
    assert (sandbox.root / "var/lib/gb300/health/last.result").read_text() == "pass\n"


def _fixture(command: str, name: str) -> Callable[[Sandbox], None]:
    return lambda s: s.answer_fixture(command, name)


def _remove(relative: str) -> Callable[[Sandbox], None]:
    return lambda s: (s.root / relative).unlink()


FAILURES: list[tuple[str, Callable[[Sandbox], None], str]] = [
    (
        "gpu-missing",
        _fixture("nvidia-smi", "nvidia-smi-q.gb300.three-gpus.txt"),
        "3 GPUs visible, expected 4",
    ),
    (
        "fabric-in-progress",
        _fixture("nvidia-smi", "nvidia-smi-q.gb300.fabric-in-progress.txt"),
        "fabric State=In Progress Status=N/A (expected Completed/Success)",
    ),
    (
        "fabric-zero-uuid",
        _fixture("nvidia-smi", "nvidia-smi-q.gb300.zero-uuid.txt"),
        "fabric ClusterUUID 00000000-0000-0000-0000-000000000000 is all zeros (fabric failure)",
    ),
    (
        "nvidia-smi-fails",
        lambda s: s.answer("nvidia-smi", "NVIDIA-SMI has failed\n", rc=9),
        "nvidia-smi -q failed",
    ),
    ("ib-port-down", _fixture("ibstat", "ibstat.gb300.port-down.txt"), "IB mlx5_ib1 Down"),
    (
        "ib-rate-low",
        _fixture("ibstat", "ibstat.gb300.rate-200.txt"),
        "IB mlx5_ib3 at 200 Gb/s (accepted: 400 800)",
    ),
    (
        "ib-pkey-not-joined",
        lambda s: (s.root / "sys/class/infiniband/mlx5_ib2/ports/1/pkeys/1").write_text("0x0000\n"),
        "IB mlx5_ib2 has no full-member pkey",
    ),
    ("dcgm-down", lambda s: s.unit("nvidia-dcgm", "inactive"), "nvidia-dcgm service not active"),
    ("imex-failed", lambda s: s.unit("nvidia-imex", "failed"), "nvidia-imex service failed"),
    (
        "kernel-without-nvidia-module",
        lambda s: (s.answer("uname", "6.8.0-1040-azure-nvidia\n"), (s.path / "rc" / "modinfo").write_text("1")),
        "kernel 6.8.0-1040-azure-nvidia has no nvidia module",
    ),
    ("imex-channel-missing", _remove("dev/nvidia-caps-imex-channels/channel0"), "IMEX channel0 missing"),
    (
        "imex-command-service-off",
        lambda s: s.write("etc/nvidia-imex/config.cfg", "IMEX_CMD_PORT=50005\nIMEX_CMD_ENABLED=0\n"),
        "IMEX command service off",
    ),
    (
        "imex-running-not-ready",
        lambda s: (s.unit("nvidia-imex", "active"), s.answer("nvidia-imex-ctl", "UNAVAILABLE\n")),
        "nvidia-imex runs but nvidia-imex-ctl -q says UNAVAILABLE (expected READY)",
    ),
    (
        "dcgm-diag-fails",
        _fixture("dcgmi", "dcgmi-diag-r1.fail.txt"),
        "dcgmi diag -r 1 failed: Page Retirement/Row Remap",
    ),
    ("xid-79", _fixture("dmesg", "dmesg.xid79.txt"), "XID in kernel log: 79@0009:06:00"),
    (
        "nvme-unmounted",
        lambda s: s.write("proc/mounts", "10.0.2.4@tcp:/lustrefs /lustre lustre rw 0 0\n"),
        "/mnt/resource_nvme not mounted",
    ),
    (
        "lustre-unmounted",
        lambda s: s.write("proc/mounts", "/dev/md0 /mnt/resource_nvme xfs rw 0 0\n"),
        "/lustre not mounted",
    ),
    ("expectations-missing", _remove("etc/gb300/health.env"), "expectations file"),
]


@pytest.mark.parametrize(("case", "breakage", "reason"), FAILURES, ids=[f[0] for f in FAILURES])
def test_each_failure_drains_with_its_reason(
    sandbox: Sandbox, case: str, breakage: Callable[[Sandbox], None], reason: str
) -> None:
    """Each broken check drains the node once with a one-line 'gb300:' reason naming what failed."""
    healthy(sandbox)
    breakage(sandbox)
    rc, calls = run_check(sandbox)
    assert rc == 1
    [drain] = drains(calls)
    assert drain.startswith(f"update nodename={NODE} state=drain reason=gb300: ")
    assert reason in drain
    assert "\n" not in drain


def test_boot_gate_refuses_a_kernel_without_the_lustre_module(sandbox: Sandbox) -> None:
    """With Lustre in the stack, a running kernel that has NVIDIA's modules but not Lustre's fails the boot check,
    naming the kernel and the module."""
    healthy(sandbox)
    spec = health_spec("Standard_ND128isr_GB300_v6", gpus=4, ib_ports=4, ib_rate_gbps=800, ib_rate_status="conflict")
    env = render_health_env(spec, nvme_mount="/mnt/resource_nvme", mounts=("/mnt/resource_nvme",), lustre=True)
    sandbox.write("etc/gb300/health.env", env)
    sandbox.answer("uname", "6.8.0-1040-azure-nvidia\n")
    sandbox.replace("modinfo", '[ "${*: -1}" != lustre ]\n')
    result = sandbox.run("gb300-health-check", "--boot")
    assert result.returncode == 1
    boot = (sandbox.root / "var/lib/gb300/health/boot.result").read_text()
    assert "kernel 6.8.0-1040-azure-nvidia has no lustre module" in boot
    assert "has no nvidia module" not in boot


@pytest.mark.parametrize(
    ("fixture", "drained"),
    [("ibstat.gb300.rate-800.txt", False), ("dmesg.xid13.txt", False)],
    ids=["ib-800-accepted", "xid-13-is-application"],
)
def test_tolerated_readings_pass(sandbox: Sandbox, fixture: str, drained: bool) -> None:
    """An 800 Gb/s port (the conflicting catalog value) and an application XID do not drain."""
    healthy(sandbox)
    sandbox.answer_fixture(fixture.split(".", maxsplit=1)[0], fixture)
    rc, calls = run_check(sandbox)
    assert (rc == 1) is drained
    assert drains(calls) == []


def test_rate_differing_from_catalog_is_logged(sandbox: Sandbox) -> None:
    """When ports run at 400 and the catalog says 800 (conflict), the gate passes and logs a note."""
    healthy(sandbox)
    run_check(sandbox)
    [note] = [c for c in sandbox.calls("logger") if "note:" in c]
    assert "400 Gb/s" in note
    assert "800" in note
    assert "conflict" in note


@pytest.mark.parametrize(
    ("reason", "resumed"),
    [
        ("gb300: XID in kernel log: 79@0009:06:00 [root@2026-11-30T09:00:00]", True),
        ("maintenance [admin@x]", False),
    ],
    ids=["drained-by-gb300", "drained-by-admin"],
)
def test_pass_resumes_only_gb300_drains(sandbox: Sandbox, reason: str, resumed: bool) -> None:
    """A passing check resumes a node drained by gb300 and leaves an admin's drain alone."""
    healthy(sandbox)
    sandbox.answer("scontrol-show", f"NodeName={NODE} State=IDLE+DRAIN ThreadsPerCore=1 Reason={reason}\n")
    rc, calls = run_check(sandbox)
    assert rc == 0
    assert (f"update nodename={NODE} state=resume" in calls) is resumed


def test_already_drained_with_same_reason_is_not_drained_again(sandbox: Sandbox) -> None:
    """Running the gate again on a node it already drained for the same reason changes nothing."""
    healthy(sandbox)
    sandbox.unit("nvidia-dcgm", "inactive")
    sandbox.answer(
        "scontrol-show",
        f"NodeName={NODE} State=IDLE+DRAIN Reason=gb300: nvidia-dcgm service not active [root@2026-11-30]\n",
    )
    rc, calls = run_check(sandbox)
    assert rc == 1
    assert drains(calls) == []


def test_boot_mode_records_result_and_periodic_run_keeps_drain(sandbox: Sandbox) -> None:
    """--boot writes boot.result without calling scontrol; a later periodic run drains on that failure."""
    healthy(sandbox, dcgm_periodic=0)
    sandbox.answer_fixture("dcgmi", "dcgmi-diag-r1.fail.txt")
    rc, calls = run_check(sandbox, "--boot")
    assert rc == 1
    assert calls == []
    result = (sandbox.root / "var/lib/gb300/health/boot.result").read_text()
    assert result.startswith("fail: dcgmi diag -r 1 failed")
    rc, calls = run_check(sandbox)
    [drain] = drains(calls)
    assert "reason=gb300: boot check: dcgmi diag -r 1 failed" in drain


def test_periodic_run_skips_dcgm_diag_at_level_zero(sandbox: Sandbox) -> None:
    """The periodic run (slurmd kills it after 60 s) does not start dcgmi diag when its level is 0."""
    healthy(sandbox, dcgm_periodic=0)
    rc, _ = run_check(sandbox)
    assert rc == 0
    assert sandbox.calls("dcgmi") == []
