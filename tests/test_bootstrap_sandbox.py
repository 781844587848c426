"""The rendered GPU node bootstrap, run twice in a sandbox with recorded hardware output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bootstrap_helpers import REFERENCE_CLUSTER, render_role
from gb300.bootstrap import BootstrapContext, load_software, render_custom_data
from gb300.bootstrap.software import CHECKSUMS_FILE
from sandbox import HW_FIXTURES, Machine, Sandbox, TwoRuns, hpc_image_machine, plain_ubuntu_machine, run_twice

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
    assert {"libnccl2", "nvidia-imex", "doca-ofed", "enroot"} <= set(box.state()["holds"])


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
    assert "found version 2.28.3-1+cuda13.0 but 2.29.7 is pinned" in status["reason"]
    assert 'gb300:software.nccl: "2.28.3-1+cuda13.0"' in status["reason"]


KEYS = Path(__file__).parent / "fixtures" / "keys"
# The primary-key fingerprints of the fixture keys (gpg --show-keys tests/fixtures/keys/<name>.asc).
REPO_KEY = ("repo-signing.asc", "C08AF28EE2631D8C289BEAC2E32B5DBF675A3747")
OTHER_KEY = ("other-signing.asc", "838914C0EC5A6D8D321EBA14368FCF6C86A57DBA")


def _plain_ubuntu_box(tmp_path: Path, pinned: str | None, served: str | None) -> Sandbox:
    """Plain Ubuntu with every repository key pinned to `pinned` (None: no key pinned) in a checksums file,
    and the stand-in curl serving the fixture key `served` (None: a text stub) at every key URL."""
    repos = load_software().repos
    keys = {r.key_url: {"fingerprints": [pinned], "status": "verified", "source": "test"} for r in repos}
    checksums = tmp_path / "checksums.yaml"
    shipped = yaml.safe_load(CHECKSUMS_FILE.read_text())  # the shipped file pins, with test keys instead
    checksums.write_text(yaml.safe_dump({"files": shipped["files"], "keys": keys if pinned else {}}))
    machine = plain_ubuntu_machine()
    if served is not None:
        machine.downloads = {r.key_url: str(KEYS / served) for r in repos}
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
        "nvidia-driver-580-open=580.126.20-*",
        "doca-ofed=3.2.2-*",
        "cuda-toolkit-13-0=13.0.*",
        "nvidia-imex=580.126.20-*",
        "libnccl2=2.29.7-*",
    ):
        assert pinned in installs
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
