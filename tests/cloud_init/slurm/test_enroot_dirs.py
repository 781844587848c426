"""enroot's directories on a GPU node, for real: gb300-pyxis-setup makes the parents, the Slurm prolog (through
gb300-imex-prolog) makes the job user's own directories, the epilog cleans and checks them; then other uids try
to plant or write. Real ownership needs root: as root (CI) these run; elsewhere they skip saying so, and under
CI (``CI`` set) a missing root fails them instead.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import SCRIPTS, Sandbox

pytestmark = pytest.mark.slow  # node scripts in a sandbox (subprocesses)

ALICE = 2001
MALLORY = 2002
NVME = "mnt/resource_nvme/enroot"
PARENTS = (f"{NVME}/cache", f"{NVME}/data", f"{NVME}/tmp", "run/enroot")


def _need_root() -> None:
    if os.geteuid() == 0:
        return
    if os.environ.get("CI"):
        pytest.fail("CI must run these as root: they check the real owner and mode of each directory")
    pytest.skip("not root: the enroot directory tests change file owners")


@pytest.fixture
def node(sandbox: Sandbox) -> Iterator[Sandbox]:
    """A sandbox whose fake root other uids can traverse (the pytest temp dir is 0700), with the real
    gb300-enroot-dirs at its node path and enroot configured by gb300-pyxis-setup."""
    _need_root()
    top = Path(tempfile.mkdtemp(prefix="gb300-enroot-"))
    shutil.copytree(sandbox.path, top, symlinks=True, dirs_exist_ok=True)
    for path in (top, *top.rglob("*")):
        if path.is_dir():
            path.chmod(0o755)
    node = Sandbox(top)
    tool = node.root / "usr/local/sbin/gb300-enroot-dirs"
    tool.parent.mkdir(parents=True)
    shutil.copy(SCRIPTS / "gb300-enroot-dirs", tool)
    node.write("etc/gb300/health.env", "GB300_IMEX_MODE=off\n")
    node.replace("enroot", 'echo "3.5.0"\n')
    node.write("usr/local/lib/slurm/spank_pyxis.so", "")
    (node.path / "bin" / "chown").unlink()  # the real chown: the parents must really become root's
    result = node.run("gb300-pyxis-setup", env={"GB300_ENROOT_VERSION": "3.5.0", "GB300_ENROOT_DIRS": ""})
    assert result.returncode == 0, result.stderr
    yield node
    shutil.rmtree(top, ignore_errors=True)


def _job(uid: int, job: str = "7") -> dict[str, str]:
    return {"SLURM_JOB_ID": job, "SLURM_JOB_UID": str(uid), "SLURM_JOB_GID": str(uid), "GB300_ENROOT_DIRS": ""}


def _prolog(node: Sandbox, uid: int) -> subprocess.CompletedProcess[str]:
    return node.run("gb300-imex-prolog", env=_job(uid))


def _epilog(node: Sandbox, uid: int) -> subprocess.CompletedProcess[str]:
    return node.run("gb300-imex-epilog", env=_job(uid))


def _as(uid: int, *command: str) -> subprocess.CompletedProcess[str]:
    """Run ``command`` as ``uid`` (no groups), the way a second user on the node would."""
    return subprocess.run(
        ["setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups", *command],
        capture_output=True,
        text=True,
        check=False,
    )


def _mode(path: Path) -> tuple[int, int]:
    info = path.lstat()
    return info.st_uid, stat.S_IMODE(info.st_mode)


def test_the_parents_are_roots_and_no_one_else_can_write_there(node: Sandbox) -> None:
    """After gb300-pyxis-setup every parent is root's, 0755, and a user cannot create an entry in it."""
    for parent in PARENTS:
        assert _mode(node.root / parent) == (0, 0o755), parent
        assert _as(MALLORY, "ls", str(node.root / parent)).returncode == 0  # the path is reachable: a fair test
        attempt = _as(MALLORY, "mkdir", str(node.root / parent / f"user-{ALICE}"))
        assert attempt.returncode != 0, parent
        assert not (node.root / parent / f"user-{ALICE}").exists()


def test_enroot_conf_names_a_directory_per_user_for_every_path(node: Sandbox) -> None:
    """Cache, data, temp and runtime paths each end in user-${UID} (enroot evaluates it as the running user)."""
    conf = (node.root / "etc/enroot/enroot.conf").read_text()
    for key, parent in zip(
        ("ENROOT_CACHE_PATH", "ENROOT_DATA_PATH", "ENROOT_TEMP_PATH", "ENROOT_RUNTIME_PATH"),
        (f"/{NVME}/cache", f"/{NVME}/data", f"/{NVME}/tmp", "/run/enroot"),
        strict=True,
    ):
        assert f"{key} {parent}/user-${{UID}}\n" in conf
    assert "group-" not in conf
    assert "${GID}" not in conf


def test_the_prolog_gives_the_job_user_private_directories_others_cannot_enter(node: Sandbox) -> None:
    """Each of the user's directories is theirs, 0700: the user writes there, a second user can neither list,
    write nor plant a layer in it."""
    result = _prolog(node, ALICE)
    assert result.returncode == 0, result.stderr
    for parent in PARENTS:
        mine = node.root / parent / f"user-{ALICE}"
        assert _mode(mine) == (ALICE, 0o700), parent
        assert _as(ALICE, "touch", str(mine / "layer")).returncode == 0
        assert _as(MALLORY, "ls", str(mine)).returncode != 0
        assert _as(MALLORY, "touch", str(mine / "planted")).returncode != 0
        assert not (mine / "planted").exists()


def test_a_directory_planted_before_the_job_is_removed_and_rebuilt(node: Sandbox) -> None:
    """A cache directory another user made for the victim (possible under the old 1777 layout), with a layer
    in it, is gone when the victim's job starts: the victim gets an empty directory of their own."""
    cache = node.root / PARENTS[0]
    planted = cache / f"user-{ALICE}"
    planted.mkdir(mode=0o777)
    (planted / "sha256:feed").write_text("planted layer")
    os.chown(planted, MALLORY, MALLORY)
    result = _prolog(node, ALICE)
    assert result.returncode == 0, result.stderr
    assert _mode(planted) == (ALICE, 0o700)
    assert list(planted.iterdir()) == []
    assert f"removed {planted}" in "".join(node.calls("logger"))


@pytest.mark.parametrize("kind", ["link", "file", "open-mode"])
def test_anything_but_the_users_own_private_directory_is_replaced(node: Sandbox, kind: str) -> None:
    """A link to another user's directory, a file, or the user's own directory left open (0777) is replaced
    by a fresh 0700 directory of the user's."""
    data = node.root / PARENTS[1]
    mine = data / f"user-{ALICE}"
    elsewhere = data / f"user-{MALLORY}"
    elsewhere.mkdir(mode=0o700)
    os.chown(elsewhere, MALLORY, MALLORY)
    if kind == "link":
        mine.symlink_to(elsewhere)
    elif kind == "file":
        mine.write_text("x")
    else:
        mine.mkdir()
        os.chown(mine, ALICE, ALICE)
        mine.chmod(0o777)
    assert _prolog(node, ALICE).returncode == 0
    assert _mode(mine) == (ALICE, 0o700)
    assert not mine.is_symlink()
    assert _mode(elsewhere) == (MALLORY, 0o700)


def test_the_epilog_cleans_the_users_scratch_and_removes_what_does_not_belong(node: Sandbox) -> None:
    """After the job: the user's temp and runtime directories are gone, their cache and data stay; a leftover
    of the old layout (cache/group-1000) and a directory whose owner does not match its name are removed."""
    assert _prolog(node, ALICE).returncode == 0
    (node.root / PARENTS[0] / f"user-{ALICE}" / "layer").write_text("cached")
    legacy = node.root / PARENTS[0] / "group-1000"
    legacy.mkdir()
    wrong = node.root / PARENTS[1] / f"user-{MALLORY}"
    wrong.mkdir(mode=0o700)
    os.chown(wrong, ALICE, ALICE)
    result = _epilog(node, ALICE)
    assert result.returncode == 0, result.stderr
    assert not (node.root / PARENTS[2] / f"user-{ALICE}").exists()
    assert not (node.root / PARENTS[3] / f"user-{ALICE}").exists()
    assert (node.root / PARENTS[0] / f"user-{ALICE}" / "layer").read_text() == "cached"
    assert _mode(node.root / PARENTS[1] / f"user-{ALICE}") == (ALICE, 0o700)
    assert not legacy.exists()
    assert not wrong.exists()


def test_a_parent_made_world_writable_again_is_taken_back_at_the_next_job(node: Sandbox) -> None:
    """If someone opens a parent (chmod 1777) or hands it to a user, the next prolog makes it root's 0755."""
    cache = node.root / PARENTS[0]
    cache.chmod(0o1777)
    os.chown(node.root / PARENTS[1], MALLORY, MALLORY)
    assert _prolog(node, ALICE).returncode == 0
    assert _mode(cache) == (0, 0o755)
    assert _mode(node.root / PARENTS[1]) == (0, 0o755)


def test_a_job_without_a_uid_fails_the_prolog_with_one_line(node: Sandbox) -> None:
    """Run outside slurmd (no SLURM_JOB_UID) the prolog exits 1 naming the variable; nothing is created."""
    env = {k: v for k, v in _job(ALICE).items() if k != "SLURM_JOB_UID"}
    result = node.run("gb300-imex-prolog", env=env)
    assert result.returncode == 1
    assert "SLURM_JOB_UID must be a uid" in result.stderr
    assert not (node.root / PARENTS[0] / f"user-{ALICE}").exists()


def test_nothing_happens_where_enroot_is_not_configured(sandbox: Sandbox) -> None:
    """On a node without <nvme>/enroot (no enroot) the prolog's enroot part does nothing and succeeds."""
    tool = sandbox.root / "usr/local/sbin/gb300-enroot-dirs"
    tool.parent.mkdir(parents=True)
    shutil.copy(SCRIPTS / "gb300-enroot-dirs", tool)
    sandbox.write("etc/gb300/health.env", "GB300_IMEX_MODE=off\n")
    result = sandbox.run("gb300-imex-prolog", env=_job(ALICE))
    assert result.returncode == 0, result.stderr
    assert not (sandbox.root / "run/enroot").exists()
