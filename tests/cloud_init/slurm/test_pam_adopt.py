"""ssh to a GPU node only for users with a job there: gb300-pam-adopt on PAM files shaped like Ubuntu 24.04's
(tests/fixtures/slurm/pam.d), as SchedMD's pam_slurm_adopt page asks (slurm.schedmd.com/pam_slurm_adopt.html)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gb300.paths import REPO_ROOT

from .conftest import FIXTURES, SCRIPTS, Sandbox
from .test_node_setup import slurmd_node

pytestmark = pytest.mark.slow  # node scripts in a sandbox (subprocesses)


def _account_stack(path: Path) -> list[str]:
    """The sshd account lines in order, includes named by what they include."""
    out = []
    for line in path.read_text().splitlines():
        words = line.split()
        if words[:1] == ["@include"] and words[1].endswith("account"):
            out.append(line)
        elif words[:1] in (["account"], ["-account"]):
            out.append(" ".join(words))
    return out


def _run(sandbox: Sandbox, **env: str) -> None:
    result = sandbox.run("gb300-pam-adopt", env=env)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def node(sandbox: Sandbox) -> Sandbox:
    """A sandbox with Ubuntu-shaped PAM files and the real gb300-pam-adopt on PATH."""
    shutil.copytree(FIXTURES / "pam.d", sandbox.root / "etc/pam.d")
    shutil.copy(SCRIPTS / "gb300-pam-adopt", sandbox.path / "bin" / "gb300-pam-adopt")
    return sandbox


def test_pam_slurm_adopt_ends_the_account_stack_after_an_admin_exemption(node: Sandbox) -> None:
    """sshd's account stack: the system's checks, then pam_access (sufficient, its own file), then
    pam_slurm_adopt, required (a missing module denies), last."""
    _run(node)
    assert _account_stack(node.root / "etc/pam.d/sshd") == [
        "account required pam_nologin.so",
        "@include common-account",
        "account sufficient pam_access.so accessfile=/etc/security/access-gb300-admins.conf",
        "account required pam_slurm_adopt.so action_adopt_failure=deny",
    ]


def test_only_root_and_the_admin_group_pass_without_a_job(node: Sandbox) -> None:
    """The access file lets root and the admin group (sudo by default, or GB300_ADMIN_GROUP) in and ends by
    refusing everyone else, who then meets pam_slurm_adopt."""
    _run(node)
    access = (node.root / "etc/security/access-gb300-admins.conf").read_text().splitlines()
    rules = [line for line in access if line and not line.startswith("#")]
    assert rules == ["+:root:ALL", "+:(sudo):ALL", "-:ALL:ALL"]
    _run(node, GB300_ADMIN_GROUP="hpcadmins")
    access = (node.root / "etc/security/access-gb300-admins.conf").read_text()
    assert "+:(hpcadmins):ALL\n-:ALL:ALL\n" in access
    assert "(sudo)" not in access


def test_pam_systemd_is_off_logind_masked_and_sshd_uses_pam(node: Sandbox) -> None:
    """pam_systemd is commented out of every common-session file (the other lines untouched), systemd-logind is
    stopped and masked, sshd gets UsePAM yes and is reloaded."""
    before = (node.root / "etc/pam.d/common-session").read_text().splitlines()
    _run(node)
    after = (node.root / "etc/pam.d/common-session").read_text().splitlines()
    assert [line for line in after if "pam_systemd" in line and not line.lstrip().startswith("#")] == []
    assert [a for a, b in zip(after, before, strict=True) if a != b] == [
        "# gb300-pam-adopt: off for pam_slurm_adopt # session\toptional\tpam_systemd.so"
    ]
    assert (node.root / "etc/ssh/sshd_config.d/10-gb300-pam.conf").read_text().splitlines()[-1] == "UsePAM yes"
    assert node.calls("systemctl") == ["mask --now systemd-logind.service", "reload ssh.service"]


def test_a_second_run_changes_nothing(node: Sandbox) -> None:
    """Rerun, the step writes no file, adds no second block and restarts nothing."""
    _run(node)
    files = {p: p.read_text() for p in (node.root / "etc").rglob("*") if p.is_file()}
    (node.path / "calls.log").unlink()
    _run(node)
    assert {p: p.read_text() for p in (node.root / "etc").rglob("*") if p.is_file()} == files
    assert node.calls("systemctl") == []
    assert (node.root / "etc/pam.d/sshd").read_text().count("pam_slurm_adopt.so") == 1


@pytest.mark.parametrize(
    ("change", "env", "message"),
    [
        ("drop-include", {}, "has no '@include common-account' line"),
        ("no-file", {}, "is missing: cannot restrict ssh"),
        (None, {"GB300_ADMIN_GROUP": "bad group"}, "GB300_ADMIN_GROUP must be a Linux group name"),
    ],
    ids=["no-account-stack", "no-sshd-pam", "bad-group"],
)
def test_what_it_cannot_do_is_one_line_and_nothing_is_half_done(
    node: Sandbox, change: str | None, env: dict[str, str], message: str
) -> None:
    """Without an account stack to add to, or with a group name Linux would refuse, the step exits 1 with one
    line and writes nothing."""
    sshd = node.root / "etc/pam.d/sshd"
    if change == "drop-include":
        sshd.write_text(sshd.read_text().replace("@include common-account\n", ""))
    elif change == "no-file":
        sshd.unlink()
    result = node.run("gb300-pam-adopt", env=env)
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert message in line
    assert not (node.root / "etc/security/access-gb300-admins.conf").exists()


def test_slurmd_setup_limits_ssh_and_slurm_contains_the_session(sandbox: Sandbox) -> None:
    """gb300-slurmd-setup runs the tool on every GPU node, and slurm.conf keeps PrologFlags=Contain, the extern
    step pam_slurm_adopt puts a session in."""
    result = sandbox.run("gb300-slurmd-setup", env=slurmd_node(sandbox))
    assert result.returncode == 0, result.stderr
    assert sandbox.calls("gb300-pam-adopt") == [""]
    flags = next(
        line
        for line in (REPO_ROOT / "templates/slurm/slurm.conf.j2").read_text().splitlines()
        if "PrologFlags=" in line
    )
    assert "Contain" in flags.split("=", 1)[1].split(",")
