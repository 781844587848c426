"""The node health gate (cloud-init/slurm/gb300-health-check) against recorded command output."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import pytest

from gb300.slurm.health import health_spec, render_health_env
from tests.support.systemd_env import environment_file, exec_words

from .conftest import FIXTURES, Sandbox

pytestmark = pytest.mark.slow  # every test runs a node script in a sandbox (subprocesses)

NODE = "gpu-007"
SHOW_IDLE = f"NodeName={NODE} Arch=aarch64 CPUTot=128 State=IDLE ThreadsPerCore=1\n"
SPEC = health_spec("Standard_ND128isr_GB300_v6", gpus=4, ib_ports=4, ib_rate_gbps=800, ib_rate_status="conflict")
SOFT_RUNS = 3  # gb300:health.softFailuresToDrain in these tests
# The DCGM field ids the gate asks `dcgmi dmon` for, in its order (the fixture's columns follow it).
FIELD_IDS = list(dict.fromkeys(w.field_id for w in SPEC.field_watches))


def dmon_output(changes: dict[tuple[int, int], str] | None = None) -> str:
    """The healthy `dcgmi dmon` fixture with {(gpu, field id): value} cells replaced."""
    lines = []
    for line in (FIXTURES / "dcgmi-dmon.gb300.healthy.txt").read_text().splitlines():
        cells = line.split()
        if cells[:1] != ["GPU"]:
            lines.append(line)
            continue
        for (gpu, field_id), value in (changes or {}).items():
            if cells[1] == str(gpu):
                cells[2 + FIELD_IDS.index(field_id)] = value
        lines.append("    ".join(cells))
    return "\n".join(lines) + "\n"


GEMM_STANDIN = """out="$SANDBOX/out/ubergemm-gpu$2"
[ -e "$out" ] || out="$SANDBOX/out/ubergemm"
printf 'ubergemm %s\\n' "$*" >>"$SANDBOX/calls.log"
cat "$out"
"""


MOUNTS = ("/mnt/resource_nvme", "/lustre")


def healthy(sandbox: Sandbox, *, dcgm_periodic: int = 1, mounts: tuple[str, ...] = MOUNTS) -> None:
    """Lay out a node where every check passes (periodic DCGM level raised so the diag runs too)."""
    env = render_health_env(SPEC, soft_failures_to_drain=SOFT_RUNS, nvme_mount="/mnt/resource_nvme", mounts=mounts)
    env += f"GB300_DCGM_DIAG_LEVEL_PERIODIC={dcgm_periodic}\nGB300_GEMM_BINARY={sandbox.path / 'bin' / 'ubergemm'}\n"
    sandbox.write("etc/gb300/health.env", env)
    sandbox.write(
        "proc/mounts",
        "/dev/root / ext4 rw 0 0\n/dev/md0 /mnt/resource_nvme xfs rw,noatime 0 0\n"
        "10.0.2.4@tcp:/lustrefs /lustre lustre rw,flock 0 0\n",
    )
    for port in range(4):
        sandbox.write(f"sys/class/infiniband/mlx5_ib{port}/ports/1/pkeys/0", "0x7fff\n")
        sandbox.write(f"sys/class/infiniband/mlx5_ib{port}/ports/1/pkeys/1", "0x8031\n")
        sandbox.write(f"sys/class/infiniband/mlx5_ib{port}/ports/1/link_layer", "InfiniBand\n")
        sandbox.write(f"sys/class/infiniband/mlx5_ib{port}/ports/1/counters/link_downed", "1\n")
    sandbox.write("sys/class/infiniband/mlx5_an0/ports/1/link_layer", "Ethernet\n")
    sandbox.write("sys/class/infiniband/mlx5_an0/ports/1/counters/link_downed", "40\n")
    sandbox.write("dev/nvidia-caps-imex-channels/channel0", "")
    sandbox.write("etc/nvidia-imex/config.cfg", "SERVER_PORT=50000\nIMEX_CMD_PORT=50005\nIMEX_CMD_ENABLED=1\n")
    sandbox.unit("nvidia-dcgm", "active")
    sandbox.unit("nvidia-imex", "inactive")
    sandbox.answer_fixture("nvidia-smi", "nvidia-smi-q.gb300.healthy.txt")
    sandbox.answer_fixture("ibstat", "ibstat.gb300.healthy.txt")
    sandbox.answer_fixture("dcgmi", "dcgmi-diag-r1.pass.txt")
    sandbox.answer_fixture("dmesg", "dmesg.clean.txt")
    sandbox.answer("dcgmi-dmon", dmon_output())
    sandbox.replace("ubergemm", GEMM_STANDIN)
    sandbox.answer_fixture("ubergemm", "ubergemm.gb300.ok.txt")
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


def _dmon(gpu: int, field_id: int, value: str) -> Callable[[Sandbox], None]:
    return lambda s: s.answer("dcgmi-dmon", dmon_output({(gpu, field_id): value}))


def _link_downed_history(s: Sandbox) -> None:
    """mlx5_ib2's link_downed counter read 1 an hour ago and reads 4 now."""
    s.write("var/lib/gb300/health/ib-link-downed/mlx5_ib2", f"{int(time.time()) - 3600} 1\n")
    s.write("sys/class/infiniband/mlx5_ib2/ports/1/counters/link_downed", "4\n")


# Hardware faults: one failed run drains the node. (case, breakage, text the drain reason must contain)
HARD: list[tuple[str, Callable[[Sandbox], None], str]] = [
    (
        "gpu-missing",
        _fixture("nvidia-smi", "nvidia-smi-q.gb300.three-gpus.txt"),
        "gpus: 3 GPUs visible, expected 4",
    ),
    (
        "fabric-in-progress",
        _fixture("nvidia-smi", "nvidia-smi-q.gb300.fabric-in-progress.txt"),
        "gpus: fabric State=In Progress Status=N/A (expected Completed/Success)",
    ),
    (
        "fabric-zero-uuid",
        _fixture("nvidia-smi", "nvidia-smi-q.gb300.zero-uuid.txt"),
        "fabric ClusterUUID 00000000-0000-0000-0000-000000000000 is all zeros (fabric failure)",
    ),
    (
        "fabric-health-degraded",
        _fixture("nvidia-smi", "nvidia-smi-q.gb300.fabric-degraded.txt"),
        "fabric-health: NVLink fabric unhealthy: GPU 00000019:06:00.0 Summary=Unhealthy, "
        "GPU 00000019:06:00.0 Bandwidth=Degraded, GPU 00000019:06:00.0 Route Unhealthy=True",
    ),
    (
        "nvidia-smi-fails",
        lambda s: s.answer("nvidia-smi", "NVIDIA-SMI has failed\n", rc=9),
        "gpus: nvidia-smi -q failed",
    ),
    (
        "kernel-without-nvidia-module",
        lambda s: (s.answer("uname", "6.8.0-1040-azure-nvidia\n"), (s.path / "rc" / "modinfo").write_text("1")),
        "kernel-modules: kernel 6.8.0-1040-azure-nvidia has no nvidia module",
    ),
    (
        "dcgm-diag-fails",
        _fixture("dcgmi", "dcgmi-diag-r1.fail.txt"),
        "dcgm-diag: dcgmi diag -r 1 failed: Page Retirement/Row Remap",
    ),
    ("xid-79", _fixture("dmesg", "dmesg.xid79.txt"), "xid: XID in kernel log: 79@0009:06:00"),
    ("ecc-double-bit", _dmon(1, 311, "2"), "ecc-dbe: GPU 1 reads 2 (limit gt 0)"),
    ("row-remap-failure", _dmon(2, 395, "1"), "row-remap-failure: GPU 2 reads 1 (limit ne 0)"),
    ("recovery-action-reset", _dmon(0, 1523, "1"), "recovery-action: GPU 0 reads 1 (limit in 1,2,4)"),
    ("recovery-action-reboot", _dmon(3, 1523, "2"), "recovery-action: GPU 3 reads 2"),
    (
        "ib-link-flapping",
        _link_downed_history,
        "ib-link-downed: flapping: mlx5_ib2 link_downed +3 in 10800 s",
    ),
    ("expectations-missing", _remove("etc/gb300/health.env"), "expectations: expectations file"),
]

# Faults that may pass on their own: the node drains after SOFT_RUNS failed runs in a row.
SOFT: list[tuple[str, Callable[[Sandbox], None], str]] = [
    ("ib-port-down", _fixture("ibstat", "ibstat.gb300.port-down.txt"), "ib: IB mlx5_ib1 Down"),
    (
        "ib-rate-low",
        _fixture("ibstat", "ibstat.gb300.rate-200.txt"),
        "ib: IB mlx5_ib3 at 200 Gb/s (accepted: 400 800)",
    ),
    (
        "ib-pkey-not-joined",
        lambda s: (s.root / "sys/class/infiniband/mlx5_ib2/ports/1/pkeys/1").write_text("0x0000\n"),
        "ib: IB mlx5_ib2 has no full-member pkey",
    ),
    ("dcgm-down", lambda s: s.unit("nvidia-dcgm", "inactive"), "services: nvidia-dcgm service not active"),
    ("imex-failed", lambda s: s.unit("nvidia-imex", "failed"), "services: nvidia-imex service failed"),
    ("imex-channel-missing", _remove("dev/nvidia-caps-imex-channels/channel0"), "services: IMEX channel0 missing"),
    (
        "imex-command-service-off",
        lambda s: s.write("etc/nvidia-imex/config.cfg", "IMEX_CMD_PORT=50005\nIMEX_CMD_ENABLED=0\n"),
        "services: IMEX command service off",
    ),
    (
        "imex-running-not-ready",
        lambda s: (s.unit("nvidia-imex", "active"), s.answer("nvidia-imex-ctl", "UNAVAILABLE\n")),
        "services: nvidia-imex runs but nvidia-imex-ctl -q says UNAVAILABLE (expected READY)",
    ),
    (
        "nvme-unmounted",
        lambda s: s.write("proc/mounts", "10.0.2.4@tcp:/lustrefs /lustre lustre rw 0 0\n"),
        "mounts: /mnt/resource_nvme not mounted",
    ),
    (
        "lustre-unmounted",
        lambda s: s.write("proc/mounts", "/dev/md0 /mnt/resource_nvme xfs rw 0 0\n"),
        "mounts: /lustre not mounted",
    ),
    ("gpu-hot", _dmon(2, 150, "95"), "gpu-temperature: GPU 2 reads 95 (limit gt 93)"),
    ("hw-thermal-slowdown", _dmon(0, 112, "64"), "clock-events: GPU 0 reads 0x40 (limit bitmask 0xE8)"),
    ("persistence-off", _dmon(1, 66, "0"), "persistence-mode: GPU 1 reads 0 (limit ne 1)"),
    ("pages-pending-retirement", _dmon(3, 392, "2"), "retired-pages-pending: GPU 3 reads 2 (limit gt 0)"),
    ("nvlink-ber-high", _dmon(0, 1218, "2.500E-06"), "nvlink-ber: GPU 0 reads 2.500E-06 (limit gt 1e-06)"),
    ("recovery-drain-p2p", _dmon(1, 1523, "3"), "recovery-action-drain-p2p: GPU 1 reads 3 (limit in 3)"),
    (
        "dcgm-fields-unreadable",
        lambda s: s.answer("dcgmi-dmon", "Error: unable to establish a connection to the host engine\n", rc=255),
        "dcgm-fields: dcgmi dmon -e 150,112,66,1523,395,392,311,1218: no readings: Error: unable to establish",
    ),
]


@pytest.mark.parametrize(("case", "breakage", "reason"), HARD, ids=[f[0] for f in HARD])
def test_hardware_fault_drains_at_once(
    sandbox: Sandbox, case: str, breakage: Callable[[Sandbox], None], reason: str
) -> None:
    """Each hardware fault drains the node on its first failed run, with a one-line 'gb300: <check>:' reason."""
    healthy(sandbox)
    breakage(sandbox)
    rc, calls = run_check(sandbox)
    assert rc == 1
    [drain] = drains(calls)
    assert drain.startswith(f"update nodename={NODE} state=drain reason=gb300: ")
    assert reason in drain
    assert "\n" not in drain


@pytest.mark.parametrize(("case", "breakage", "reason"), SOFT, ids=[f[0] for f in SOFT])
def test_soft_failure_drains_only_when_repeated(
    sandbox: Sandbox, case: str, breakage: Callable[[Sandbox], None], reason: str
) -> None:
    """A soft failure does not drain until it has failed softFailuresToDrain runs in a row; then it does."""
    healthy(sandbox)
    breakage(sandbox)
    for _ in range(SOFT_RUNS - 1):
        rc, calls = run_check(sandbox)
        assert rc == 0
        assert drains(calls) == []
    rc, calls = run_check(sandbox)
    assert rc == 1
    [drain] = drains(calls)
    assert drain.startswith(f"update nodename={NODE} state=drain reason=gb300: ")
    assert reason in drain
    assert f"(failed {SOFT_RUNS} runs in a row)" in drain


def test_a_pass_resets_the_soft_failure_count(sandbox: Sandbox) -> None:
    """Soft failures separated by a passing run never reach the drain count."""
    healthy(sandbox)
    for hot in (True, True, False, True, True):
        sandbox.answer("dcgmi-dmon", dmon_output({(2, 150): "95"} if hot else None))
        rc, calls = run_check(sandbox)
        assert rc == 0
        assert drains(calls) == []


def test_field_watches_read_the_fields_the_fixture_has() -> None:
    """The gate asks dcgmi dmon for the data's field ids in the order the fixture's columns assume."""
    header = (FIXTURES / "dcgmi-dmon.gb300.healthy.txt").read_text().splitlines()[0].split()
    assert len(header) - 1 == len(FIELD_IDS) == 8
    assert FIELD_IDS == [150, 112, 66, 1523, 395, 392, 311, 1218]


def test_boot_gate_refuses_a_kernel_without_the_lustre_module(sandbox: Sandbox) -> None:
    """With Lustre in the stack, a running kernel that has NVIDIA's modules but not Lustre's fails the boot check,
    naming the kernel and the module."""
    healthy(sandbox)
    env = render_health_env(
        SPEC,
        soft_failures_to_drain=SOFT_RUNS,
        nvme_mount="/mnt/resource_nvme",
        mounts=("/mnt/resource_nvme",),
        lustre=True,
    )
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


@pytest.mark.parametrize(
    ("reason", "replaced"),
    [("gb300-heal: XID 79", False), ("maintenance", False), ("gb300-rollout: reimage ref-gpu-r0001", True)],
)
def test_failure_leaves_another_owners_drain_alone(sandbox: Sandbox, reason: str, replaced: bool) -> None:
    """A failing check keeps a person's or the remediation loop's drain reason (their resume is not undone), and
    replaces the rollout's, which reads the gate's verdict from it (docs/rollout.md)."""
    healthy(sandbox)
    sandbox.answer_fixture("dmesg", "dmesg.xid79.txt")
    sandbox.answer("scontrol-show", f"NodeName={NODE} State=IDLE+DRAIN ThreadsPerCore=1 Reason={reason}\n")
    rc, calls = run_check(sandbox)
    assert rc == 1
    assert bool(drains(calls)) is replaced
    assert (sandbox.root / "var/lib/gb300/health/last.result").read_text().startswith("gb300: xid:")


def test_already_drained_with_same_reason_is_not_drained_again(sandbox: Sandbox) -> None:
    """Running the gate again on a node it already drained for the same reason changes nothing."""
    healthy(sandbox)
    sandbox.answer_fixture("dmesg", "dmesg.xid79.txt")
    sandbox.answer(
        "scontrol-show",
        f"NodeName={NODE} State=IDLE+DRAIN Reason=gb300: xid: XID in kernel log: 79@0009:06:00 (reboot or report "
        "the node) [root@2026-11-30]\n",
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
    assert result.startswith("fail: dcgm-diag: dcgmi diag -r 1 failed")
    rc, calls = run_check(sandbox)
    [drain] = drains(calls)
    assert "reason=gb300: boot check: dcgm-diag: dcgmi diag -r 1 failed" in drain


REGISTER = "GB300_SLURMD_CONF_SERVER=head\nGB300_SLURMD_NODE_CONF='CPUs=128 Sockets=2 Gres=gpu:4 Feature=train'\n"
GATE_ENV = "run/gb300/slurmd-gate.env"


def test_a_failed_boot_gate_registers_the_node_drained(sandbox: Sandbox) -> None:
    """A failed --boot gives slurmd (through its drop-in's EnvironmentFile) the node's registration plus State=DRAIN
    and the gate's reason, quoted so systemd and Slurm read it whole; a passing boot takes it away again."""
    healthy(sandbox, dcgm_periodic=0)
    sandbox.write("etc/gb300/slurmd-register.env", REGISTER)
    sandbox.answer_fixture("dcgmi", "dcgmi-diag-r1.fail.txt")
    rc, calls = run_check(sandbox, "--boot")
    assert rc == 1
    assert calls == []  # no record yet, nothing for scontrol to do
    options = exec_words(environment_file((sandbox.root / GATE_ENV).read_text())["SLURMD_OPTIONS"])
    assert options[:4] == ["-Z", "--conf-server", "head", "--conf"]
    conf = options[4]
    assert conf.startswith('CPUs=128 Sockets=2 Gres=gpu:4 Feature=train State=DRAIN Reason="gb300: boot check: ')
    reason = conf.split('Reason="', 1)[1]
    assert reason.endswith('"')
    assert "dcgm-diag: dcgmi diag -r 1 failed" in reason
    assert not set(reason[:-1]) & set("'\"\\$`#")

    sandbox.answer_fixture("dcgmi", "dcgmi-diag-r1.pass.txt")
    rc, _ = run_check(sandbox, "--boot")
    assert rc == 0
    assert not (sandbox.root / GATE_ENV).exists()


def test_the_check_slurmd_runs_before_registering_leaves_an_unknown_node_alone(sandbox: Sandbox) -> None:
    """At slurmd start (before the node has a record) a failing check exits 0 without a refused drain: the
    registration itself carries the drain."""
    healthy(sandbox, dcgm_periodic=0)
    sandbox.answer_fixture("dcgmi", "dcgmi-diag-r1.fail.txt")
    run_check(sandbox, "--boot")
    sandbox.answer("scontrol-show", "", rc=1)  # slurm_load_node: Invalid node name specified
    (sandbox.path / "calls.log").unlink()
    rc, calls = run_check(sandbox)
    assert rc == 0
    assert drains(calls) == []


def test_periodic_run_skips_dcgm_diag_at_level_zero(sandbox: Sandbox) -> None:
    """The periodic run (slurmd kills it after 60 s) does not start dcgmi diag when its level is 0."""
    healthy(sandbox, dcgm_periodic=0)
    rc, _ = run_check(sandbox)
    assert rc == 0
    assert [c for c in sandbox.calls("dcgmi") if c.startswith("diag")] == []


def test_boot_runs_gemm_on_every_gpu_and_passes_at_expected_speed(sandbox: Sandbox) -> None:
    """At boot ubergemm runs once per GPU for the data's duration; ~1,850 TFLOPS per GPU passes."""
    healthy(sandbox)
    rc, _ = run_check(sandbox, "--boot")
    assert rc == 0
    assert sorted(sandbox.calls("ubergemm")) == [f"--adapters {gpu} --time_to_run 60" for gpu in range(4)]
    assert (sandbox.root / "var/lib/gb300/health/boot.result").read_text() == "pass\n"


def test_boot_fails_on_a_gpu_below_the_gemm_threshold(sandbox: Sandbox) -> None:
    """A GPU whose GEMM rate is under the reportToAzure threshold fails the boot check, naming GPU and rate."""
    healthy(sandbox)
    sandbox.answer_fixture("ubergemm-gpu2", "ubergemm.gb300.low.txt")
    rc, _ = run_check(sandbox, "--boot")
    assert rc == 1
    result = (sandbox.root / "var/lib/gb300/health/boot.result").read_text()
    assert result.startswith("fail: gemm: GEMM below 1720 TFLOPS: GPU 2 1650 TFLOPS")
    _, calls = run_check(sandbox)
    [drain] = drains(calls)
    assert "reason=gb300: boot check: gemm: GEMM below 1720 TFLOPS: GPU 2 1650 TFLOPS" in drain


def test_periodic_run_does_not_run_gemm(sandbox: Sandbox) -> None:
    """The GEMM test (a minute of full load) runs only at boot, never in slurmd's periodic check."""
    healthy(sandbox)
    run_check(sandbox)
    run_check(sandbox, "--epilog")
    assert sandbox.calls("ubergemm") == []


def test_soft_failure_at_boot_counts_but_does_not_fail_boot(sandbox: Sandbox) -> None:
    """A soft failure at boot leaves boot.result passing and counts as the first of the consecutive failures."""
    healthy(sandbox)
    sandbox.unit("nvidia-dcgm", "inactive")
    rc, _ = run_check(sandbox, "--boot")
    assert rc == 0
    assert (sandbox.root / "var/lib/gb300/health/soft/services").read_text() == "1\n"
    for expected_drains in [0] * (SOFT_RUNS - 2) + [1]:
        _, calls = run_check(sandbox)
        assert len(drains(calls)) == expected_drains


def test_epilog_drains_a_hardware_fault_and_exits_zero(sandbox: Sandbox) -> None:
    """After a job, a hardware fault drains the node with a gb300 reason; the epilog itself succeeds."""
    healthy(sandbox)
    sandbox.answer("dcgmi-dmon", dmon_output({(1, 311): "1"}))
    rc, calls = run_check(sandbox, "--epilog")
    assert rc == 0
    [drain] = drains(calls)
    assert "reason=gb300: ecc-dbe: GPU 1 reads 1 (limit gt 0)" in drain


def test_epilog_runs_the_post_job_checks_only(sandbox: Sandbox) -> None:
    """The epilog runs the GPU checks and a quick diagnostic, not the IB or mount checks."""
    healthy(sandbox)
    sandbox.answer_fixture("ibstat", "ibstat.gb300.port-down.txt")
    rc, calls = run_check(sandbox, "--epilog")
    assert rc == 0
    assert drains(calls) == []
    assert sandbox.calls("ibstat") == []
    assert "diag -r 1" in sandbox.calls("dcgmi")


def test_epilog_never_resumes(sandbox: Sandbox) -> None:
    """A passing epilog leaves a node gb300 drained alone: it runs fewer checks than the periodic run."""
    healthy(sandbox)
    sandbox.answer("scontrol-show", f"NodeName={NODE} State=IDLE+DRAIN Reason=gb300: mounts: /shared not mounted\n")
    rc, calls = run_check(sandbox, "--epilog")
    assert rc == 0
    assert not [c for c in calls if "state=resume" in c]


def test_link_downed_samples_outside_the_window_do_not_count(sandbox: Sandbox) -> None:
    """Three link-downs spread over more than three hours are not flapping."""
    healthy(sandbox)
    sandbox.write("var/lib/gb300/health/ib-link-downed/mlx5_ib2", f"{int(time.time()) - 4 * 3600} 1\n")
    sandbox.write("sys/class/infiniband/mlx5_ib2/ports/1/counters/link_downed", "4\n")
    rc, calls = run_check(sandbox)
    assert rc == 0
    assert drains(calls) == []


def test_link_downed_ignores_ethernet_ports(sandbox: Sandbox) -> None:
    """The Ethernet port's link_downed counter (mlx5_an0) is not an InfiniBand link and never drains."""
    healthy(sandbox)
    sandbox.write("var/lib/gb300/health/ib-link-downed/mlx5_an0", f"{int(time.time()) - 60} 1\n")
    rc, calls = run_check(sandbox)
    assert rc == 0
    assert drains(calls) == []


def test_periodic_run_stays_far_inside_slurms_limit(sandbox: Sandbox) -> None:
    """With answers at once, the periodic run takes a few seconds of its own, far below slurmd's 60 s kill."""
    healthy(sandbox, dcgm_periodic=0)
    start = time.monotonic()
    rc, _ = run_check(sandbox)
    elapsed = time.monotonic() - start
    assert rc == 0
    assert elapsed < 10, elapsed


def test_a_lasting_soft_failure_drains_once(sandbox: Sandbox) -> None:
    """Once drained for a lasting soft failure, later runs find the same reason and do not drain again."""
    healthy(sandbox)
    sandbox.unit("nvidia-dcgm", "inactive")
    for _ in range(SOFT_RUNS):
        _, calls = run_check(sandbox)
    [drain] = drains(calls)
    reason = drain.split("reason=", 1)[1]
    sandbox.answer("scontrol-show", f"NodeName={NODE} State=IDLE+DRAIN Reason={reason} [root@2026-11-30]\n")
    rc, calls = run_check(sandbox)
    assert rc == 1
    assert drains(calls) == [drain]  # the calls log is cumulative: still only the first drain


BOOT_ID = "5f0c2b7e-8d1a-4c55-9e3b-2a6f1d0c9b41"
TEARDOWN_WINDOW = SPEC.xid_teardown_window_s  # data/remediation.yaml evidence.xid.teardownBenign


def _xid45_at(sandbox: Sandbox, seconds: float) -> None:
    """The clean kernel log plus an XID 45 (the driver's preemptive cleanup) at ``seconds`` since boot."""
    clean = (FIXTURES / "dmesg.clean.txt").read_text()
    line = f"[{seconds:12.6f}] NVRM: Xid (PCI:0009:06:00): 45, pid=3121, name=python, Ch 00000008\n"
    sandbox.answer("dmesg", clean + line)


def _job_ends(sandbox: Sandbox, job: str, uptime: float) -> subprocess.CompletedProcess[str]:
    """Job ``job`` ends with the node up ``uptime`` seconds: the Slurm epilog runs the gate with --epilog."""
    sandbox.write("proc/uptime", f"{uptime:.2f} 1000.00\n")
    return sandbox.run("gb300-health-check", "--epilog", env={"GB300_NODENAME": NODE, "SLURM_JOB_ID": job})


def test_the_teardown_xid_is_read_from_the_remediation_data() -> None:
    """The gate's teardown codes and window are data/remediation.yaml's, and XID 45 is one of them."""
    assert 45 in SPEC.xid_teardown
    assert TEARDOWN_WINDOW > 0
    env = render_health_env(SPEC, soft_failures_to_drain=1, nvme_mount="/mnt/resource_nvme", mounts=())
    assert f"GB300_XID_TEARDOWN_WINDOW_S={TEARDOWN_WINDOW}\n" in env
    assert "GB300_XID_TEARDOWN=" in env


def test_xid_45_at_a_jobs_teardown_is_benign_in_the_epilog_and_after(sandbox: Sandbox) -> None:
    """An XID 45 logged seconds before the epilog of the job that just ended is logged as benign, not drained:
    neither by the epilog's run nor by slurmd's periodic runs afterwards, while the kernel log still holds it."""
    healthy(sandbox)
    sandbox.write("proc/sys/kernel/random/boot_id", BOOT_ID + "\n")
    _xid45_at(sandbox, 8120.0)
    result = _job_ends(sandbox, "4242", 8123.0)
    assert result.returncode == 0, result.stderr
    assert drains(sandbox.calls("scontrol")) == []
    ends = sandbox.root / "var/lib/gb300/health/job-ends"
    boot, uptime, _, job = ends.read_text().split()
    assert (boot, float(uptime), job) == (BOOT_ID, 8123.0, "4242")
    assert ends.stat().st_mode & 0o077 == 0  # root only
    [note] = [c for c in sandbox.calls("logger") if "benign" in c]
    assert "45@0009:06:00 job 4242" in note

    sandbox.write("proc/uptime", f"{8123.0 + 10 * TEARDOWN_WINDOW:.2f} 1000.00\n")  # much later, another run
    rc, calls = run_check(sandbox)
    assert rc == 0
    assert drains(calls) == []
    assert len([c for c in sandbox.calls("logger") if "benign" in c]) == 1  # logged once, not every run


@pytest.mark.parametrize(
    ("xid_at", "boot_id"),
    [(8123.0 - 2 * TEARDOWN_WINDOW, BOOT_ID), (8123.0 + 2 * TEARDOWN_WINDOW, BOOT_ID), (8120.0, "another-boot")],
    ids=["long-before-the-end", "long-after-the-end", "end-recorded-in-another-boot"],
)
def test_xid_45_away_from_a_jobs_end_is_logged_not_drained(sandbox: Sandbox, xid_at: float, boot_id: str) -> None:
    """An XID 45 outside the window around every job end of this boot is still the application's (NVIDIA's XID
    catalog puts it in WORKFLOW_XID_45, data/remediation.yaml evidence.xid.neverDrain): logged as a warning-class
    XID, never a drain (issue 38: a mid-job XID 45 used to drain and reboot a healthy node)."""
    healthy(sandbox)
    sandbox.write("proc/sys/kernel/random/boot_id", BOOT_ID + "\n")
    sandbox.write("var/lib/gb300/health/job-ends", f"{boot_id} 8123.00 1764600000 4242\n")
    _xid45_at(sandbox, xid_at)
    sandbox.write("proc/uptime", f"{xid_at + 60:.2f} 1000.00\n")
    rc, calls = run_check(sandbox)
    assert rc == 0
    assert drains(calls) == []
    assert any("warning-class XID in kernel log: 45@0009:06:00" in c for c in sandbox.calls("logger"))


@pytest.mark.parametrize("code", [121, 13, 45])
def test_the_gates_never_drain_list_holds_the_catalogs_no_action_buckets(code: int) -> None:
    """The gate's never-drain XIDs are Azure's health agent's warnings plus every XID NVIDIA's catalog files under
    a bucket with no action on the machine (121: corrected C2C; 13: the application's; 45: a teardown), and the
    head's loop reads the same list, so the gate never drains what the loop would not repair."""
    from gb300.config.remediation import RemediationSettings  # noqa: PLC0415
    from gb300.heal import policy as heal_policy  # noqa: PLC0415 - the loop's policy, as the plan builds it

    assert code in SPEC.xid_warning
    assert code in heal_policy.load(RemediationSettings()).xid_warning
    assert 79 not in SPEC.xid_warning  # fallen off the bus: a machine fault


def test_only_teardown_codes_are_excused_at_a_jobs_end(sandbox: Sandbox) -> None:
    """XID 79 (fallen off the bus) in the epilog of a job that just ended is still a fault and drains."""
    healthy(sandbox)
    sandbox.write("proc/sys/kernel/random/boot_id", BOOT_ID + "\n")
    sandbox.answer_fixture("dmesg", "dmesg.xid79.txt")  # XID 79 at 8123.55 s
    result = _job_ends(sandbox, "4242", 8125.0)
    assert result.returncode == 0
    [drain] = drains(sandbox.calls("scontrol"))
    assert "xid: XID in kernel log: 79@0009:06:00" in drain
