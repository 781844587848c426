"""The rendered GPU node bootstrap, run twice in a sandbox with recorded hardware output."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from gb300.facts.software import CHECKSUMS_FILE, load_software
from gb300.node.boot_context import BootstrapContext
from gb300.node.custom_data import render_custom_data
from tests.support.bootstrap_helpers import REFERENCE_CLUSTER, render_role
from tests.support.files import FIXTURES
from tests.support.sandbox import (
    CMDLINE_GB,
    DOCA_HOST_URL,
    HW_FIXTURES,
    Machine,
    Sandbox,
    TwoRuns,
    booted_into_grace_kernel,
    hpc_image_machine,
    plain_ubuntu_machine,
    run_twice,
    serve_doca_host,
)

pytestmark = pytest.mark.slow

SENTINEL = "/var/lib/gb300/bootstrap.done"
STATUS = "/var/lib/gb300/status"


def _sandbox(tmp_path: Path, machine: Machine | None = None, cloud_config: str | None = None) -> Sandbox:
    return Sandbox(
        tmp_path / "node",
        cloud_config or render_role("gpu-node").cloud_config,
        machine or hpc_image_machine(),
    )


def _status(box: Sandbox) -> dict[str, str]:
    lines = box.read(STATUS).splitlines()
    return dict(line.split(": ", 1) for line in lines)


@pytest.fixture(scope="module")
def hpc_node_run_twice(tmp_path_factory: pytest.TempPathFactory) -> TwoRuns:
    """One sandboxed GPU node on the Ubuntu-HPC GB image, bootstrapped twice (shared: ~10 s a run)."""
    runs = run_twice(_sandbox(tmp_path_factory.mktemp("hpc")))
    print(f"\nfast path (HPC image, first run): {runs.first.seconds:.2f} s; re-run: {runs.second.seconds:.2f} s")
    return runs


def test_first_run_on_the_hpc_image_marks_the_node_ready(hpc_node_run_twice: TwoRuns) -> None:
    """On the Ubuntu-HPC GB image every step passes, fabric.json is written and the sentinel is last."""
    box, first = hpc_node_run_twice.box, hpc_node_run_twice.first
    assert first.ok, first.output
    assert _status(box) == {"state": "ready"}
    assert box.path(SENTINEL).exists()
    sentinel_mtime = box.path(SENTINEL).stat().st_mtime_ns
    records = sorted(box.path("/var/lib/gb300/steps").iterdir())
    assert all(r.stat().st_mtime_ns <= sentinel_mtime for r in records)
    fabric = json.loads(box.read("/var/lib/gb300/fabric.json"))
    assert fabric == {
        "ClusterUUID": "7c3f9a12-4b8e-4d21-a6f0-93e5b1c2d478",
        "CliqueId": 32766,
        "State": "Completed",
        "Status": "Success",
        "gpus": 4,
    }
    assert "OS.EnableRDMA=y" in box.read("/etc/waagent.conf").splitlines()
    assert len(json.loads(box.read("/var/lib/gb300/ib.json"))) == 4


def test_first_run_raids_only_the_data_nvme_and_persists_it(hpc_node_run_twice: TwoRuns) -> None:
    """The RAID0 takes the 4 data namespaces, never the NVMe OS disk, and is in mdadm.conf and fstab."""
    box = hpc_node_run_twice.box
    state = box.state()
    members = state["arrays"]["/dev/md/gb300_nvme"]["members"]
    assert members == ["/dev/nvme1n1", "/dev/nvme2n1", "/dev/nvme3n1", "/dev/nvme4n1"]
    assert "/mnt/resource_nvme" in state["mounts"]
    assert "/mnt/resource_nvme xfs defaults,nofail,noatime 0 2" in box.read("/etc/fstab")
    assert box.read("/etc/mdadm/mdadm.conf").startswith("ARRAY /dev/md/gb300_nvme ")


def test_first_run_skips_installs_and_holds_pinned_packages(hpc_node_run_twice: TwoRuns) -> None:
    """On the HPC image nothing is installed (all found at their pins) and pinned packages end up held."""
    box = hpc_node_run_twice.box
    assert not [c for c in box.calls() if c.startswith("MUTATE apt-get")]
    # enroot is built from its pinned commit into /usr/local (no package to hold).
    assert {"libnccl2", "nvidia-imex", "doca-ofed"} <= set(box.state()["holds"])


def test_reference_gpu_node_turns_the_imex_command_service_on(hpc_node_run_twice: TwoRuns) -> None:
    """The reference GPU custom data sets IMEX_CMD_ENABLED=1 and IMEX_CMD_PORT=50005 in the package's config.cfg,
    keeping its other keys, so nvidia-imex-ctl -q (the prolog's readiness check) can answer."""
    config = hpc_node_run_twice.box.read("/etc/nvidia-imex/config.cfg").splitlines()
    assert "IMEX_CMD_ENABLED=1" in config
    assert "IMEX_CMD_PORT=50005" in config
    assert "IMEX_CMD_ENABLED=0" not in config
    assert "SERVER_PORT=50000" in config
    assert len(config) == len((HW_FIXTURES / "nvidia-imex-config.cfg").read_text().splitlines())


def test_reference_gpu_node_gets_azures_gb_tuning(hpc_node_run_twice: TwoRuns) -> None:
    """Open files 1048576, the rack-scale network buffers and sunrpc slots applied, NUMA binding for systemd."""
    box = hpc_node_run_twice.box
    limits = box.read("/etc/security/limits.d/90-gb300.conf").splitlines()
    assert {"* soft nofile 1048576", "* hard nofile 1048576"} <= set(limits)
    sysctl = box.state()["sysctl"]
    assert sysctl["net.core.rmem_max"] == "2147483647"
    assert sysctl["net.ipv4.tcp_rmem"] == "4096 67108864 1073741824"
    assert sysctl["sunrpc.tcp_max_slot_table_entries"] == "128"
    assert "sunrpc" in box.read("/etc/modules-load.d/gb300.conf").split()
    numa = box.read("/etc/systemd/system.conf.d/90-gb300-numa.conf").splitlines()
    assert {"[Manager]", "NUMAPolicy=bind", "NUMAMask=0-1"} <= set(numa)


def test_second_run_changes_nothing(hpc_node_run_twice: TwoRuns) -> None:
    """Run again, the bootstrap rewrites no file and issues no changing command."""
    run = hpc_node_run_twice
    assert run.second.ok, run.second.output
    assert run.box.snapshot() == run.snapshot_after_first
    assert [c for c in run.calls_in_second if c.startswith("MUTATE")] == []


def test_broken_nvlink_fabric_fails_with_a_clear_reason(tmp_path: Path) -> None:
    """A GPU reporting ClusterUUID all zeros stops the bootstrap; the status says why; no sentinel."""
    machine = hpc_image_machine()
    machine.nvidia_smi_q = "nvidia-smi-q-fabric-zero-uuid.txt"
    box = _sandbox(tmp_path, machine)
    result = box.run()
    assert not result.ok
    status = _status(box)
    assert status["state"] == "failed"
    assert status["step"] == "80-fabric"
    assert "ClusterUUID 00000000-0000-0000-0000-000000000000 (all zeros)" in status["reason"]
    assert not box.path(SENTINEL).exists()
    assert ("99-ready", 1) in result.returncodes


def test_down_infiniband_port_fails_with_a_clear_reason(tmp_path: Path) -> None:
    """An IB port that is Down stops the bootstrap before later steps; the status names the port."""
    machine = hpc_image_machine()
    machine.ibstat = "ibstat-port-down.txt"
    box = _sandbox(tmp_path, machine)
    result = box.run()
    status = _status(box)
    assert status["step"] == "60-infiniband"
    assert "mlx5_ib2 port 1 is Down (Polling), expected Active" in status["reason"]
    assert not box.path(SENTINEL).exists()
    assert not box.state()["arrays"], "later steps must not run after a failure"
    assert not result.ok


def test_version_drift_is_reported_not_accepted(tmp_path: Path) -> None:
    """An image with a different NCCL than the pin fails and says how to accept it deliberately."""
    machine = hpc_image_machine()
    machine.packages["libnccl2"] = "2.28.3-1+cuda13.0"
    box = _sandbox(tmp_path, machine)
    assert not box.run().ok
    status = _status(box)
    assert status["step"] == "40-nccl"
    assert "found version 2.28.3-1+cuda13.0 but 2.29.3-1+cuda13.0 is pinned" in status["reason"]
    assert 'gb300:software.nccl: "2.28.3-1+cuda13.0"' in status["reason"]


KEYS = FIXTURES / "keys"
# The primary-key fingerprints of the fixture keys (gpg --show-keys tests/fixtures/keys/<name>.asc).
REPO_KEY = ("repo-signing.asc", "C08AF28EE2631D8C289BEAC2E32B5DBF675A3747")
OTHER_KEY = ("other-signing.asc", "838914C0EC5A6D8D321EBA14368FCF6C86A57DBA")


def _plain_ubuntu_box(
    tmp_path: Path, pinned: str | None, served: str | None, *, doca_pinned: bool = True, booted: bool = True
) -> Sandbox:
    """Plain Ubuntu with every repository key pinned to `pinned` (None: no key pinned) in a checksums file,
    and the stand-in curl serving the fixture key `served` (None: a text stub) at every key URL. The network
    serves a stand-in doca-host .deb, pinned by its own sha256 when `doca_pinned` (else the shipped pin stays,
    which the stand-in does not match). `booted`: the node already runs the Grace kernel (after 15-kernel's reboot)."""
    repos = load_software().repos
    keys = {r.key_url: {"fingerprints": [pinned], "status": "verified", "source": "test"} for r in repos}
    checksums = tmp_path / "checksums.yaml"
    shipped = yaml.safe_load(CHECKSUMS_FILE.read_text())  # the shipped file pins, with test keys instead
    machine = plain_ubuntu_machine()
    if booted:
        booted_into_grace_kernel(machine)
    if served is not None:
        machine.downloads = {r.key_url: str(KEYS / served) for r in repos}
    doca_sha = serve_doca_host(machine, tmp_path)
    if doca_pinned:
        shipped["files"][DOCA_HOST_URL] = {"sha256": doca_sha, "status": "verified", "source": "test"}
    checksums.write_text(yaml.safe_dump({"files": shipped["files"], "keys": keys if pinned else {}}))
    ctx = BootstrapContext(
        role="gpu-node",
        cluster_name=REFERENCE_CLUSTER,
        pool_name="gpu-a",
        software=load_software(checksums=checksums),
    )
    return _sandbox(tmp_path, machine, render_custom_data(ctx).cloud_config)


def test_plain_ubuntu_refuses_a_repository_key_with_no_pinned_fingerprint(tmp_path: Path) -> None:
    """A repository whose key has no fingerprint in checksums.yaml is never added; the reason says what to run."""
    box = _plain_ubuntu_box(tmp_path, pinned=None, served=REPO_KEY[0])
    assert not box.run().ok
    status = _status(box)
    assert status["step"] == "20-nvidia-driver"
    assert "pins no fingerprint" in status["reason"]
    assert "gb300 software lock" in status["reason"]
    assert not [c for c in box.calls() if c.startswith("MUTATE curl")]
    assert not box.path("/etc/apt/sources.list.d/gb300-cuda-sbsa.list").exists()


def test_plain_ubuntu_refuses_a_repository_key_that_is_not_the_pinned_one(tmp_path: Path) -> None:
    """A vendor URL that serves a different (rotated or substituted) key is refused and nothing is trusted."""
    box = _plain_ubuntu_box(tmp_path, pinned=REPO_KEY[1], served=OTHER_KEY[0])
    assert not box.run().ok
    status = _status(box)
    assert status["step"] == "20-nvidia-driver"
    assert f"signing key {OTHER_KEY[1]}" in status["reason"]
    assert "is not pinned" in status["reason"]
    assert not box.path("/etc/apt/keyrings/gb300-cuda-sbsa.asc").exists()
    assert not [c for c in box.calls() if c.startswith("MUTATE apt-get") and " install " in c]


def test_plain_ubuntu_refuses_a_key_url_that_serves_no_key(tmp_path: Path) -> None:
    """An error page or any non-key file at the key URL fails the step with a reason, not an apt error later."""
    box = _plain_ubuntu_box(tmp_path, pinned=REPO_KEY[1], served=None)
    assert not box.run().ok
    assert "holds no OpenPGP public key" in _status(box)["reason"]


def test_plain_ubuntu_installs_pinned_versions_from_vendor_repositories(tmp_path: Path) -> None:
    """With the keys' fingerprints pinned, plain Ubuntu installs each pinned package, then stops at nccl-tests'
    tarball (the stand-in curl serves something else than the pinned source)."""
    box = _plain_ubuntu_box(tmp_path, pinned=REPO_KEY[1], served=REPO_KEY[0])
    box.run()
    installs = " ".join(c for c in box.calls() if c.startswith("MUTATE apt-get") and " install " in c)
    for pinned in (
        "nvidia-driver-pinning-580.126.20=580.126.20-*",
        "nvidia-driver-580-open=580.126.20-*",
        "/var/lib/gb300/downloads/doca-host_3.2.2-035000-25.10-ubuntu2404_arm64.deb",
        "doca-ofed=3.2.2-*",
        "cuda-toolkit-13-0=13.0.*",
        "nvidia-imex=580.126.20-*",
        "libnccl2=2.29.3-1+cuda13.0",
    ):
        assert pinned in installs
    # DOCA comes from the pinned file, never from an online repository with an unpinnable key.
    assert installs.index("doca-host_3.2.2") < installs.index("doca-ofed=3.2.2-*")
    assert not list(box.path("/etc/apt/sources.list.d").glob("gb300-doca*"))
    assert "signed-by=/etc/apt/keyrings/gb300-cuda-sbsa.asc" in box.read("/etc/apt/sources.list.d/gb300-cuda-sbsa.list")
    assert box.path("/etc/apt/keyrings/gb300-cuda-sbsa.asc").read_bytes() == (KEYS / REPO_KEY[0]).read_bytes()
    # Each key is downloaded once: the repositories shared by several components reuse the checked file.
    key_downloads = [c for c in box.calls() if c.startswith("MUTATE curl") and c.endswith("3bf863cc.pub")]
    assert len(key_downloads) == 1
    # nccl-tests is built from source; what the stand-in curl serves is not the pinned tarball.
    status = _status(box)
    assert status["step"] == "40-nccl"
    assert status["reason"] == (
        "checksum mismatch for https://github.com/NVIDIA/nccl-tests/archive/v2.17.6.tar.gz: "
        "expected sha256 38974e70342150ede0e3fb8fd24bfe60ccbde90fa20241716ba8bb338e6b61a0"
    )
    assert not [c for c in box.calls() if c.startswith("MUTATE make")]
    assert not box.path("/opt/nccl-tests/build").exists()
    assert not list(box.path("/var/lib/gb300/downloads/nccl-tests").iterdir()), "the bad download is removed"


def test_plain_ubuntu_refuses_a_doca_host_file_whose_sha256_differs(tmp_path: Path) -> None:
    """What the network serves for the doca-host .deb does not match the shipped sha256 (Azure's pin): the step
    fails naming the URL and the expected sha256, nothing from it is installed, the bad file is not kept."""
    box = _plain_ubuntu_box(tmp_path, pinned=REPO_KEY[1], served=REPO_KEY[0], doca_pinned=False)
    assert not box.run().ok
    status = _status(box)
    assert status["step"] == "25-doca-ofed"
    assert status["reason"] == (
        f"checksum mismatch for {DOCA_HOST_URL}: "
        "expected sha256 0343656f130b79b7392742f9f7890fb59d6a1489fa020ccab26adc714e727b04"
    )
    installs = [c for c in box.calls() if c.startswith("MUTATE apt-get") and " install " in c]
    assert not [c for c in installs if "doca" in c]
    assert not box.path("/var/lib/gb300/downloads/doca-host_3.2.2-035000-25.10-ubuntu2404_arm64.deb").exists()


def test_plain_ubuntu_reboots_into_the_grace_kernel_and_the_bootstrap_resumes(tmp_path: Path) -> None:
    """Plain Ubuntu: 15-kernel installs linux-azure-nvidia-6.8, writes Azure's command line for GRUB, enables
    gb300-resume.service and reboots once; no later step runs before the reboot. After it, the unit runs the
    bootstrap again, 15-kernel (not complete before the reboot) passes and the steps carry on."""
    box = _plain_ubuntu_box(tmp_path, pinned=REPO_KEY[1], served=REPO_KEY[0], booted=False)
    first = box.run()
    assert first.ok, first.output
    assert _status(box)["state"] == "rebooting"
    assert box.state()["reboots"] == 1
    assert box.state()["packages"]["linux-azure-nvidia-6.8"] == "6.8.0-1029.32"
    grub = box.read("/etc/default/grub.d/90-gb300.cfg")
    assert 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu.passthrough=1 irqchip.gicv3_nolpi=y ' in grub
    assert box.state()["services"]["gb300-resume"]["enabled"]
    assert not box.path("/var/lib/gb300/steps/20-nvidia-driver.done").exists()
    assert not box.path(SENTINEL).exists()
    # The reboot: the Grace kernel with the new command line; then what gb300-resume.service runs.
    state = box.state()
    state["kernel"] = "6.8.0-1029-azure-nvidia"
    (box.base / "state.json").write_text(json.dumps(state))
    box.path("/proc/cmdline").write_text(CMDLINE_GB)
    assert not box.path("/var/lib/gb300/steps/15-kernel.done").exists(), "a step that reboots is not complete"
    box.write_runcmd_script()
    box.reboot()
    resumed = box.start_unit("gb300-resume.service")
    assert resumed is not None
    assert not box.path("/var/lib/gb300/reboot-pending").exists()
    assert "running 6.8.0-1029-azure-nvidia" in box.read("/var/lib/gb300/steps/15-kernel.done")
    assert box.path("/var/lib/gb300/steps/25-doca-ofed.done").exists()
    assert box.state()["reboots"] == 1


def test_a_reboot_that_does_not_bring_the_grace_kernel_fails_instead_of_looping(tmp_path: Path) -> None:
    """If the node comes back on the old kernel, 15-kernel fails with a reason rather than rebooting again."""
    box = _plain_ubuntu_box(tmp_path, pinned=REPO_KEY[1], served=REPO_KEY[0], booted=False)
    box.run()
    box.path("/var/lib/gb300/reboot-pending").unlink()
    assert not box.run().ok
    status = _status(box)
    assert status["step"] == "15-kernel"
    assert (
        "rebooted once for the azure-nvidia kernel and its command line, still running 6.8.0-1017-azure"
        in (status["reason"])
    )
    assert box.state()["reboots"] == 1


def test_an_automatic_upgrade_cannot_replace_the_kernel_or_the_pinned_packages(tmp_path: Path) -> None:
    """After the bootstrap, unattended-upgrades (the stand-in honours dpkg holds as apt does) moves an unpinned
    package but not the kernel, its meta packages or any pinned package, and installs no new kernel."""
    machine = hpc_image_machine()
    machine.packages["linux-image-6.8.0-1029-azure-nvidia"] = "6.8.0-1029.32"
    machine.packages["linux-image-azure-nvidia-6.8"] = "6.8.0-1029.32"
    machine.packages["curl"] = "8.5.0-2ubuntu10.1"
    machine.holds = []  # nothing held by the image: the bootstrap must do it
    machine.available = {
        "linux-azure-nvidia-6.8": "6.8.0-1040.44",
        "linux-image-azure-nvidia-6.8": "6.8.0-1040.44",
        "linux-image-6.8.0-1029-azure-nvidia": "6.8.0-1029.33",
        "libnccl2": "2.30.1-1+cuda13.0",
        "nvidia-imex": "580.159.04-1",
        "doca-ofed": "3.3.0-001000",
        "datacenter-gpu-manager-4-core": "1:4.6.0-1",
        "curl": "8.5.0-2ubuntu10.6",
    }
    kernel_1040 = {"linux-image-6.8.0-1040-azure-nvidia": "6.8.0-1040.44"}
    machine.pulls = {"linux-azure-nvidia-6.8": kernel_1040, "linux-image-azure-nvidia-6.8": kernel_1040}
    box = _sandbox(tmp_path, machine)
    assert box.run().ok
    before = dict(box.state()["packages"])
    upgrade = subprocess.run(["unattended-upgrade"], env=box.env(), capture_output=True, text=True, check=False)
    assert upgrade.returncode == 0, upgrade.stderr
    after = box.state()["packages"]
    assert after["curl"] == "8.5.0-2ubuntu10.6", "the upgrade ran"
    assert {p: v for p, v in after.items() if p != "curl"} == {p: v for p, v in before.items() if p != "curl"}
    assert "linux-image-6.8.0-1040-azure-nvidia" not in after


def test_an_existing_nvme_array_is_assembled_not_recreated(tmp_path: Path) -> None:
    """When the data NVMe already hold the scratch array, the step assembles it and never re-creates it."""
    box = _sandbox(tmp_path)
    state = box.state()
    array = {"name": "gb300_nvme", "members": ["/dev/nvme1n1", "/dev/nvme2n1", "/dev/nvme3n1", "/dev/nvme4n1"]}
    state["superblocks"] = {"/dev/md/gb300_nvme": array}
    state["filesystems"] = {"/dev/md/gb300_nvme": {"type": "xfs", "uuid": "0d1c2b3a-4f5e-4d6c-8b7a-9f8e7d6c5b4a"}}
    (box.base / "state.json").write_text(json.dumps(state))
    assert box.run().ok
    calls = box.calls()
    assert any(c.startswith("MUTATE mdadm --assemble") for c in calls)
    assert not [c for c in calls if c.startswith(("MUTATE mdadm --create", "MUTATE mkfs"))]
    assert "UUID=0d1c2b3a-4f5e-4d6c-8b7a-9f8e7d6c5b4a /mnt/resource_nvme xfs" in box.read("/etc/fstab")
