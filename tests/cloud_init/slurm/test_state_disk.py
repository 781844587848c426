"""gb300-state-disk on the head: slurmctld's state and MariaDB's data live on the managed data disk, so a
reimaged head (a fresh OS, the same disk) finds them again. Run in the sandbox with a directory as the disk."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gb300.node.registry import SlurmView, slurm_node_files
from gb300.slurm.config import SlurmCluster, SlurmPool
from gb300.slurm.files import SlurmBootInputs

from .conftest import Sandbox

pytestmark = pytest.mark.slow  # node scripts run in a sandbox (subprocesses)

STEP = "gb300-state-disk"
LUN0 = "/dev/disk/azure/scsi1/lun0"
TRAIN = SlurmPool("train", "ref-train-r0001-", 18, "Standard_ND128isr_GB300_v6", 4, 128, 840499)

# The disk is a directory outside the root; the device node names it. mkfs wipes it and leaves a filesystem
# marker; mounting points the mount point at the disk (or, for --bind, at the source) as a symlink.
_BLKID = r"""printf 'blkid %s\n' "$*" >>"$SANDBOX/calls.log"
disk=$(cat "${*: -1}")
[ -e "$disk/.fs" ] || exit 2
case "$4" in TYPE) echo ext4 ;; UUID) cat "$disk/.fs" ;; esac
"""
_MKFS = r"""printf 'mkfs.ext4 %s\n' "$*" >>"$SANDBOX/calls.log"
disk=$(cat "${*: -1}")
rm -rf "${disk:?}"/* "$disk/.fs"
echo 5d0b6f3e-2f4c-4a51-9a37-0c1e2d3f4a5b >"$disk/.fs"
"""
_FINDMNT = r"""[ -L "${*: -1}" ]"""
_MOUNT = r"""printf 'mount %s\n' "$*" >>"$SANDBOX/calls.log"
if [ "$1" = --bind ]; then src=$2; dst=$3; else src=$(cat "$3"); dst=$4; fi
rmdir "$dst"
ln -s "$src" "$dst"
"""


def _head(sandbox: Sandbox, disk: Path) -> None:
    """A freshly imaged head VM: gb300's head files in place, the state disk attached at LUN 0."""
    cluster = SlurmCluster("ref", "ref-head", (TRAIN,), accounting_host="ref-head")
    for node_file in slurm_node_files(SlurmView("head", cluster, SlurmBootInputs("ref-head", slurmdbd=True))):
        target = sandbox.write(node_file.path.lstrip("/"), node_file.content)
        target.chmod(int(node_file.permissions, 8))
    sandbox.write(LUN0.lstrip("/"), str(disk))
    for name, body in (("blkid", _BLKID), ("mkfs.ext4", _MKFS), ("findmnt", _FINDMNT), ("mount", _MOUNT)):
        sandbox.replace(name, body)


def _reimage(sandbox: Sandbox, disk: Path) -> None:
    """Azure's reimage: the OS disk starts over from the image; the data disk and its contents stay."""
    shutil.rmtree(sandbox.root)
    sandbox.root.mkdir()
    (sandbox.path / "calls.log").unlink(missing_ok=True)
    _head(sandbox, disk)


@pytest.fixture
def disk(tmp_path: Path) -> Path:
    """The head's empty managed data disk, as a directory outside the sandbox root."""
    path = tmp_path / "lun0-disk"
    path.mkdir()
    return path


def _setup(sandbox: Sandbox) -> None:
    env = {"GB300_UNIT_DIR": str(sandbox.root / "opt/gb300/systemd")}
    for step in (STEP, "gb300-slurmctld-setup"):
        result = sandbox.run(step, env=env)
        assert result.returncode == 0, result.stderr


def test_first_boot_formats_the_empty_disk_and_binds_the_state_paths(sandbox: Sandbox, disk: Path) -> None:
    """On the first boot the disk is formatted once, mounted, and both state paths are bound from it in fstab."""
    _head(sandbox, disk)
    _setup(sandbox)
    assert len(sandbox.calls("mkfs.ext4")) == 1
    fstab = (sandbox.root / "etc/fstab").read_text().splitlines()
    assert any(line.split()[1:3] == ["/var/lib/gb300-state", "ext4"] for line in fstab)
    assert "/var/lib/gb300-state/slurmctld /var/spool/slurmctld none" in "\n".join(fstab)
    assert "/var/lib/gb300-state/mysql /var/lib/mysql none" in "\n".join(fstab)
    assert (sandbox.root / "var/spool/slurmctld").resolve() == (disk / "slurmctld").resolve()
    dropin = sandbox.root / "etc/systemd/system/slurmctld.service.d/gb300-state-disk.conf"
    assert "RequiresMountsFor=/var/lib/gb300-state /var/spool/slurmctld /var/lib/mysql" in dropin.read_text()


def test_second_run_changes_nothing(sandbox: Sandbox, disk: Path) -> None:
    """Run again on the same boot, the step formats and mounts nothing and writes no duplicate fstab line."""
    _head(sandbox, disk)
    _setup(sandbox)
    fstab = (sandbox.root / "etc/fstab").read_text()
    (sandbox.path / "calls.log").unlink()
    _setup(sandbox)
    assert sandbox.calls("mkfs.ext4") == []
    assert sandbox.calls("mount") == []
    assert (sandbox.root / "etc/fstab").read_text() == fstab


def test_state_survives_a_reimage(sandbox: Sandbox, disk: Path) -> None:
    """slurmctld's job state and MariaDB's files written before a reimage are there after it, unformatted."""
    _head(sandbox, disk)
    _setup(sandbox)
    (sandbox.root / "var/spool/slurmctld/job_state").write_text("job 4242 RUNNING\n")
    (sandbox.root / "var/lib/mysql/slurm_acct_db").mkdir()
    (sandbox.root / "var/lib/mysql/slurm_acct_db/ref_job_table.ibd").write_text("4242\n")
    _reimage(sandbox, disk)
    assert not (sandbox.root / "var/spool/slurmctld/job_state").exists()  # the OS-side path starts empty
    _setup(sandbox)
    assert sandbox.calls("mkfs.ext4") == []
    assert (sandbox.root / "var/spool/slurmctld/job_state").read_text() == "job 4242 RUNNING\n"
    assert (sandbox.root / "var/lib/mysql/slurm_acct_db/ref_job_table.ibd").read_text() == "4242\n"


def test_a_foreign_filesystem_is_never_formatted(sandbox: Sandbox, disk: Path) -> None:
    """A disk holding a filesystem gb300 did not make is refused, not reformatted."""
    _head(sandbox, disk)
    sandbox.replace("blkid", 'case "$4" in TYPE) echo xfs ;; UUID) echo u ;; esac\n')
    result = sandbox.run(STEP)
    assert result.returncode == 1
    assert "holds a xfs filesystem, not gb300's ext4: refusing to touch it" in result.stderr
    assert sandbox.calls("mkfs.ext4") == []


def test_a_missing_disk_fails_with_the_command_to_check(sandbox: Sandbox, disk: Path) -> None:
    """Without the data disk the step fails after its wait and says how to look at the VM's disks."""
    _head(sandbox, disk)
    (sandbox.root / LUN0.lstrip("/")).unlink()
    result = sandbox.run(STEP, env={"GB300_STATE_DISK_WAIT_SECONDS": "0"})
    assert result.returncode == 1
    assert "no state disk at /dev/disk/azure/scsi1/lun0" in result.stderr
    assert "storageProfile.dataDisks" in result.stderr
