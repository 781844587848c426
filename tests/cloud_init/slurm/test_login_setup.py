"""gb300-login-setup, the login node's step: sackd serves the controller's configuration (configless), per-user
limits and the break-glass sshd setting take effect, and a second run changes nothing."""

from __future__ import annotations

import pytest

from .conftest import Sandbox

pytestmark = pytest.mark.slow  # every test runs a node script in a sandbox (subprocesses)

ENV = {"GB300_HEAD_HOSTNAME": "head", "GB300_SACKD_WAIT_SECONDS": "4"}
CONF = "run/slurm/conf/slurm.conf"


def _served(sandbox: Sandbox) -> None:
    """What sackd leaves once it reached the controller: the fetched slurm.conf under /run/slurm/conf."""
    sandbox.write(CONF, "ClusterName=lab\n")


def test_sackd_fetches_the_controllers_configuration(sandbox: Sandbox) -> None:
    """The step installs sackd, points it at the head (--conf-server, no copied slurm.conf), reloads systemd for the
    user-slice limits, starts sackd and records the login node ready."""
    _served(sandbox)
    result = sandbox.run("gb300-login-setup", env=ENV)
    assert result.returncode == 0, result.stderr
    assert sandbox.calls("gb300-slurm-install") == ["slurm-smd-sackd"]
    assert 'SACKD_OPTIONS="--conf-server head"' in (sandbox.root / "etc/default/sackd").read_text().splitlines()
    calls = sandbox.calls("systemctl")
    assert calls.index("daemon-reload") < calls.index("restart sackd")
    assert "enable sackd" in calls
    assert not (sandbox.root / "etc/slurm/slurm.conf").exists()
    assert (sandbox.root / "var/lib/gb300/slurm/login.done").read_text() == "head=head\n"


def test_a_second_run_does_not_restart_sackd(sandbox: Sandbox) -> None:
    """Run again with the same inputs, the step rewrites nothing and only makes sure sackd runs."""
    _served(sandbox)
    assert sandbox.run("gb300-login-setup", env=ENV).returncode == 0
    before = (sandbox.root / "etc/default/sackd").stat().st_mtime_ns
    (sandbox.path / "calls.log").unlink()
    assert sandbox.run("gb300-login-setup", env=ENV).returncode == 0
    assert (sandbox.root / "etc/default/sackd").stat().st_mtime_ns == before
    assert "restart sackd" not in sandbox.calls("systemctl")
    assert "start sackd" in sandbox.calls("systemctl")


def test_a_local_slurm_conf_is_refused(sandbox: Sandbox) -> None:
    """A slurm.conf in /etc/slurm would shadow the controller's: the step exits 1 saying so, before installing."""
    _served(sandbox)
    sandbox.write("etc/slurm/slurm.conf", "ClusterName=stale\n")
    result = sandbox.run("gb300-login-setup", env=ENV)
    assert result.returncode == 1
    assert "/etc/slurm/slurm.conf exists: the Slurm commands would read it instead" in result.stderr
    assert sandbox.calls("gb300-slurm-install") == []


def test_no_configuration_from_the_head_fails_with_the_wait(sandbox: Sandbox) -> None:
    """When sackd gets no configuration in time the step exits 1 naming the head and the wait, and records nothing."""
    result = sandbox.run("gb300-login-setup", env={**ENV, "GB300_SACKD_WAIT_SECONDS": "0"})
    assert result.returncode == 1
    assert "sackd has no configuration from head after 0s" in result.stderr
    assert not (sandbox.root / "var/lib/gb300/slurm/login.done").exists()


def test_the_break_glass_setting_reloads_sshd(sandbox: Sandbox) -> None:
    """With the payload's sshd drop-in that refuses the admin key, sshd is reloaded; without it, sshd is untouched."""
    _served(sandbox)
    assert sandbox.run("gb300-login-setup", env=ENV).returncode == 0
    assert not any("ssh" in c.split() for c in sandbox.calls("systemctl"))
    sandbox.write(
        "etc/ssh/sshd_config.d/50-gb300-break-glass.conf", "Match User azureuser\n    PubkeyAuthentication no\n"
    )
    assert sandbox.run("gb300-login-setup", env=ENV).returncode == 0
    assert "try-reload-or-restart ssh" in sandbox.calls("systemctl")


def test_without_the_head_name_the_step_fails_clearly(sandbox: Sandbox) -> None:
    """Without GB300_HEAD_HOSTNAME (slurm.env) the step exits 1 with one line naming it."""
    result = sandbox.run("gb300-login-setup", env={"GB300_SACKD_WAIT_SECONDS": "0"})
    assert result.returncode == 1
    assert "GB300_HEAD_HOSTNAME must be the controller's host name (got '')" in result.stderr
