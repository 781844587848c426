"""IMEX per job: the Slurm prolog/epilog pair in cloud-init/slurm/gb300-imex-{prolog,epilog}."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from .conftest import REPO, Sandbox

pytestmark = pytest.mark.slow  # every test runs a node script in a sandbox (subprocesses)

RACK_A = {"ClusterUUID": "5e797fc6-0f46-421a-8724-0e102c0f723c", "CliqueId": 32766}
RACK_B = {"ClusterUUID": "5e797fc6-0f46-421a-8724-0e102c0f721e", "CliqueId": 32767}
HOSTS = {"gpu-001": "10.0.4.11", "gpu-002": "10.0.4.12", "gpu-003": "10.0.4.13", "gpu-019": "10.0.4.29"}
JOB = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "gpu-[001-003,019]"}


def slurm_records(sandbox: Sandbox, hosts: dict[str, str], identities: dict[str, dict[str, object]]) -> None:
    """scontrol stand-in: expands the job's node list to ``hosts`` and shows their records (NodeAddr, Extra)."""
    names = "".join(f"{host}\\n" for host in hosts)
    records = "".join(
        f"NodeName={host} NodeAddr={ip} NodeHostName={host} State=ALLOCATED "
        + (
            f"Extra=gb300-nvlink:{identities[host]['ClusterUUID']}:{identities[host]['CliqueId']} "
            if host in identities
            else ""
        )
        + "Reason=\\n"
        for host, ip in hosts.items()
    )
    sandbox.replace(
        "scontrol",
        f"""printf 'scontrol %s\\n' "$*" >>"$SANDBOX/calls.log"
case "$1 $2" in
  "show hostnames") printf '{names}';;
  "show node") printf '{records}';;
  *) exit 1;;
esac
""",
    )


def job_nodes(sandbox: Sandbox, *, ready: bool = True) -> None:
    """Four job nodes: three in this node's rack, gpu-019 in another; IMEX answers READY or never."""
    slurm_records(sandbox, HOSTS, {host: RACK_B if host == "gpu-019" else RACK_A for host in HOSTS})
    sandbox.answer("nvidia-imex-ctl", "READY\n" if ready else "WAITING_FOR_PEERS\n")
    sandbox.write("etc/nvidia-imex/config.cfg", "IMEX_CMD_PORT=50005\nIMEX_CMD_ENABLED=1\n")
    sandbox.write("var/lib/gb300/fabric.json", json.dumps(RACK_A))


def test_prolog_writes_job_nodes_of_this_rack_and_starts_imex(sandbox: Sandbox) -> None:
    """The nodes file lists the IPs of the job's nodes in this NVLink domain, then nvidia-imex restarts."""
    job_nodes(sandbox)
    result = sandbox.run("gb300-imex-prolog", env=JOB)
    assert result.returncode == 0, result.stderr
    nodes = (sandbox.root / "etc/nvidia-imex/nodes_config.cfg").read_text()
    assert nodes == "10.0.4.11\n10.0.4.12\n10.0.4.13\n"
    assert "restart nvidia-imex" in sandbox.calls("systemctl")
    assert sandbox.calls("scontrol") == ["show hostnames gpu-[001-003,019]", "show node -o gpu-[001-003,019]"]


def test_prolog_without_fabric_files_lists_every_job_node(sandbox: Sandbox) -> None:
    """Without this node's fabric identity the prolog falls back to all of the job's nodes."""
    job_nodes(sandbox)
    (sandbox.root / "var/lib/gb300/fabric.json").unlink()
    result = sandbox.run("gb300-imex-prolog", env=JOB)
    assert result.returncode == 0, result.stderr
    nodes = (sandbox.root / "etc/nvidia-imex/nodes_config.cfg").read_text().split()
    assert nodes == list(HOSTS.values())


def test_prolog_lists_nodes_that_published_no_identity(sandbox: Sandbox) -> None:
    """A job node whose record carries no published identity yet is kept in the domain, not dropped."""
    job_nodes(sandbox)
    slurm_records(sandbox, HOSTS, {"gpu-001": RACK_A, "gpu-019": RACK_B})
    assert sandbox.run("gb300-imex-prolog", env=JOB).returncode == 0
    assert (sandbox.root / "etc/nvidia-imex/nodes_config.cfg").read_text().split() == list(HOSTS.values())[:3]


def test_prolog_second_run_keeps_running_imex(sandbox: Sandbox) -> None:
    """Run again for the same nodes while nvidia-imex is active, the prolog restarts nothing."""
    job_nodes(sandbox)
    assert sandbox.run("gb300-imex-prolog", env=JOB).returncode == 0
    sandbox.unit("nvidia-imex", "active")
    (sandbox.path / "calls.log").unlink()
    assert sandbox.run("gb300-imex-prolog", env=JOB).returncode == 0
    assert not any(call.startswith("restart") for call in sandbox.calls("systemctl"))


def test_prolog_times_out_with_one_clear_line(sandbox: Sandbox) -> None:
    """When IMEX never becomes READY the prolog fails after the timeout with a one-line reason."""
    job_nodes(sandbox, ready=False)
    result = sandbox.run("gb300-imex-prolog", env={**JOB, "GB300_IMEX_TIMEOUT": "2"})
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line == (
        "gb300-imex-prolog: job 4242: nvidia-imex not READY after 2s "
        "(last status: WAITING_FOR_PEERS; 3 nodes in nodes_config.cfg)"
    )
    assert "not READY" in (sandbox.root / "var/lib/gb300/imex/last-error").read_text()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SLURM_JOB_ID": "7"}, "SLURM_JOB_NODELIST is not set"),
        ({"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "gpu-[001-003,019,099]"}, "cannot resolve gpu-099"),
    ],
    ids=["no-nodelist", "unresolvable-host"],
)
def test_prolog_fails_clearly_on_bad_input(sandbox: Sandbox, env: dict[str, str], message: str) -> None:
    """A missing node list or a host without an address fails the prolog with that reason."""
    job_nodes(sandbox)
    with_unknown = {**HOSTS, "gpu-099": "unknown"}
    slurm_records(sandbox, with_unknown, dict.fromkeys(HOSTS, RACK_A))
    result = sandbox.run("gb300-imex-prolog", env=env)
    assert result.returncode == 1
    assert message in result.stderr


def test_prolog_refuses_to_wait_without_the_command_service(sandbox: Sandbox) -> None:
    """With IMEX's command service off, nvidia-imex-ctl -q can never answer: the prolog fails at once, saying so."""
    job_nodes(sandbox)
    sandbox.write("etc/nvidia-imex/config.cfg", "IMEX_CMD_PORT=50005\nIMEX_CMD_ENABLED=0\n")
    result = sandbox.run("gb300-imex-prolog", env=JOB)
    assert result.returncode == 1
    assert "IMEX command service is off in /etc/nvidia-imex/config.cfg" in result.stderr
    assert "restart nvidia-imex" not in sandbox.calls("systemctl")


def test_static_mode_leaves_imex_alone(sandbox: Sandbox) -> None:
    """With GB300_IMEX_MODE=static (IMEX always on) prolog and epilog do nothing."""
    job_nodes(sandbox)
    sandbox.write("etc/gb300/health.env", "GB300_IMEX_MODE=static\n")
    assert sandbox.run("gb300-imex-prolog", env=JOB).returncode == 0
    assert sandbox.run("gb300-imex-epilog", env=JOB).returncode == 0
    assert sandbox.calls("systemctl") == []
    assert not (sandbox.root / "etc/nvidia-imex/nodes_config.cfg").exists()


@pytest.mark.parametrize(("state", "stopped"), [("active", True), ("inactive", False)])
def test_epilog_stops_running_imex(sandbox: Sandbox, state: str, stopped: bool) -> None:
    """The epilog stops nvidia-imex when it runs and is a no-op otherwise."""
    sandbox.unit("nvidia-imex", state)
    result = sandbox.run("gb300-imex-epilog", env=JOB)
    assert result.returncode == 0
    assert ("stop nvidia-imex" in sandbox.calls("systemctl")) is stopped


def test_epilog_fails_when_imex_cannot_stop(sandbox: Sandbox) -> None:
    """If nvidia-imex does not stop, the epilog exits 1 so Slurm drains the node."""
    sandbox.unit("nvidia-imex", "active")
    sandbox.answer("systemctl-stop", "", rc=1)
    result = sandbox.run("gb300-imex-epilog", env=JOB)
    assert result.returncode == 1
    assert "cannot stop nvidia-imex" in result.stderr


@pytest.mark.parametrize("mode", ["per-job", "static"])
def test_epilog_runs_the_post_job_health_check(sandbox: Sandbox, mode: str) -> None:
    """Every job's epilog runs gb300-health-check --epilog, whatever the IMEX mode."""
    sandbox.write("etc/gb300/health.env", f"GB300_IMEX_MODE={mode}\n")
    check = sandbox.write("usr/local/sbin/gb300-health-check", '#!/usr/bin/env bash\necho "$*" >>"$SANDBOX/health"\n')
    check.chmod(0o755)
    result = sandbox.run("gb300-imex-epilog", env=JOB)
    assert result.returncode == 0, result.stderr
    assert (sandbox.path / "health").read_text() == "--epilog\n"


def _hooks(sandbox: Sandbox, point: str, on_failure: str) -> None:
    """The real run-hooks and lib.sh under the node root, with one failing hook of ``point`` in the signed table."""
    lib = sandbox.root / "usr/local/lib/gb300"
    (lib / "hooks").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "cloud-init/lib/run-hooks", lib / "run-hooks")
    shutil.copy(REPO / "cloud-init/lib/gb300-lib.sh", lib / "lib.sh")
    text = '#!/bin/sh\necho "$SLURM_JOB_ID" >"$GB300_ROOT/hook-saw"\nexit 4\n'
    hook = lib / "hooks" / "site-check"
    hook.write_text(text)
    hook.chmod(0o755)
    digest = hashlib.sha256(text.encode()).hexdigest()
    sandbox.write("etc/gb300/hooks.tsv", f"{point}\tsite-check\t30\t{on_failure}\t{digest}\n")
    sandbox.answer("hostname", "gpu-001\n")


@pytest.mark.parametrize(("on_failure", "code"), [("drain", 1), ("warn", 0)])
def test_prolog_runs_the_stacks_prolog_hooks(sandbox: Sandbox, on_failure: str, code: int) -> None:
    """A failing prolog hook declared ``drain`` drains the node naming the hook and fails the prolog (Slurm requeues
    the job); one declared ``warn`` is logged and the job goes on."""
    job_nodes(sandbox)
    _hooks(sandbox, "prolog", on_failure)
    result = sandbox.run("gb300-imex-prolog", env=JOB)
    assert result.returncode == code, result.stderr
    drains = [c for c in sandbox.calls("scontrol") if c.startswith("update")]
    if on_failure == "drain":
        assert drains == ["update nodename=gpu-001 state=drain reason=gb300-hook: site-check exited with status 4"]
        assert "a gb300:hooks prolog hook failed" in result.stderr
        assert "restart nvidia-imex" not in sandbox.calls("systemctl")
    else:
        assert drains == []
        assert "restart nvidia-imex" in sandbox.calls("systemctl")
    assert (sandbox.root / "hook-saw").read_text() == "4242\n"  # the hook ran, and saw the job


def test_epilog_runs_the_stacks_epilog_hooks_and_still_cleans_up(sandbox: Sandbox) -> None:
    """A failing epilog hook declared ``drain`` drains the node and fails the epilog, after nvidia-imex is stopped."""
    sandbox.unit("nvidia-imex", "active")
    _hooks(sandbox, "epilog", "drain")
    result = sandbox.run("gb300-imex-epilog", env=JOB)
    assert result.returncode == 1
    assert "a gb300:hooks epilog hook failed" in result.stderr
    assert "stop nvidia-imex" in sandbox.calls("systemctl")
    assert any(c.startswith("update nodename=gpu-001 state=drain") for c in sandbox.calls("scontrol"))
