"""Node setup steps: the munge key from Key Vault, pyxis/enroot configuration, slurmd's configless setup."""

from __future__ import annotations

import base64
import json
import os
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from gb300.slurm.config import SlurmPool
from gb300.slurm.files import SlurmBootInputs, render_slurm_env

from .conftest import REPO, Sandbox

pytestmark = pytest.mark.slow  # every test runs a node script in a sandbox (subprocesses)

KEY = bytes(range(256)) * 4
VAULT_ENV = {"GB300_KEYVAULT_NAME": "kv-gb300-ref", "GB300_MUNGE_SECRET_NAME": "munge-key"}
RETRYING = {**VAULT_ENV, "GB300_VAULT_WAIT_SECONDS": "30", "GB300_VAULT_RETRY_DELAY_SECONDS": "1"}


def key_vault(
    sandbox: Sandbox,
    secret: str,
    *,
    imds_ok: bool = True,
    tags: list[dict[str, str]] | None = None,
    answers: tuple[int, ...] = (),
) -> None:
    """curl stand-in: IMDS returns a token (and ``tags``); Key Vault answers each of ``answers`` (HTTP statuses,
    written by ``-w '\\n%{http_code}'`` as curl does) once, in order, then ``secret`` for the bearer token."""
    token = json.dumps({"access_token": "tok-123", "token_type": "Bearer"})
    tag_list = json.dumps(tags or [])
    body = json.dumps({"value": secret, "id": "https://kv-gb300-ref.vault.azure.net/secrets/munge-key/1"})
    (sandbox.path / "vault-answers").write_text("".join(f"{a}\n" for a in answers))
    sandbox.replace(
        "curl",
        f"""url="${{*: -1}}"
printf 'curl %s\\n' "$*" >>"$SANDBOX/calls.log"
case "$url" in
  http://169.254.169.254/metadata/instance/compute/tagsList*) echo '{tag_list}';;
  http://169.254.169.254/*) {"echo '" + token + "'" if imds_ok else "exit 22"};;
  https://kv-gb300-ref.vault.azure.net/secrets/munge-key\\?api-version=7.4)
    grep -qx 'Authorization: Bearer tok-123' || {{ printf '{{"error": {{"code": "Unauthorized"}}}}\\n401'; exit 0; }}
    next=$(head -n 1 "$SANDBOX/vault-answers")
    if [ -n "$next" ]; then
      sed -i 1d "$SANDBOX/vault-answers"
      printf '{{"error": {{"code": "Forbidden"}}}}\\n%s' "$next"
      exit 0
    fi
    printf '%s\\n200' '{body}';;
  *) exit 6;;
esac
""",
    )


def test_munge_key_is_fetched_and_installed_once(sandbox: Sandbox) -> None:
    """The key from Key Vault lands in /etc/munge/munge.key 0400 munge:munge; a rerun restarts nothing."""
    key_vault(sandbox, base64.b64encode(KEY).decode())
    result = sandbox.run("gb300-munge-key", env=VAULT_ENV)
    assert result.returncode == 0, result.stderr
    key = sandbox.root / "etc/munge/munge.key"
    assert key.read_bytes() == KEY
    assert stat.S_IMODE(key.stat().st_mode) == 0o400
    assert sandbox.calls("chown")[0].startswith("munge:munge ")
    assert sandbox.calls("systemctl") == ["restart munge"]
    imds, vault = sandbox.calls("curl")
    assert "-H Metadata:true" in imds
    assert "resource=https%3A%2F%2Fvault.azure.net" in imds
    assert "tok-123" not in vault
    (sandbox.path / "calls.log").unlink()
    assert sandbox.run("gb300-munge-key", env=VAULT_ENV).returncode == 0
    assert sandbox.calls("systemctl") == []


def test_vault_name_comes_from_the_vm_tag_when_unset(sandbox: Sandbox) -> None:
    """Without GB300_KEYVAULT_NAME the step reads the VM's gb300-keyvault tag from IMDS and uses that vault."""
    key_vault(sandbox, base64.b64encode(KEY).decode(), tags=[{"name": "gb300-keyvault", "value": "kv-gb300-ref"}])
    result = sandbox.run("gb300-munge-key", env={"GB300_MUNGE_SECRET_NAME": "munge-key"})
    assert result.returncode == 0, result.stderr
    assert (sandbox.root / "etc/munge/munge.key").read_bytes() == KEY
    assert any("tagsList" in call for call in sandbox.calls("curl"))


def test_user_assigned_identity_is_named_in_the_token_request(sandbox: Sandbox) -> None:
    """With GB300_IDENTITY_CLIENT_ID the IMDS request asks for that identity's token."""
    key_vault(sandbox, base64.b64encode(KEY).decode())
    env = {**VAULT_ENV, "GB300_IDENTITY_CLIENT_ID": "0b8c6c1e-1111-2222-3333-444455556666"}
    assert sandbox.run("gb300-munge-key", env=env).returncode == 0
    assert "&client_id=0b8c6c1e-1111-2222-3333-444455556666" in sandbox.calls("curl")[0]


@pytest.mark.parametrize(
    ("secret", "imds_ok", "env", "message"),
    [
        ("x", False, VAULT_ENV, "no managed identity token from IMDS"),
        ("not base64!", True, VAULT_ENV, "is not a base64 munge key"),
        (base64.b64encode(b"short").decode(), True, VAULT_ENV, "is 5 bytes; munge needs at least 32"),
        ("x", True, {"GB300_MUNGE_SECRET_NAME": "munge-key"}, "no Key Vault name: GB300_KEYVAULT_NAME is unset"),
        ("x", True, {**VAULT_ENV, "GB300_KEYVAULT_NAME": "x"}, "GB300_KEYVAULT_NAME must be a Key Vault name"),
    ],
    ids=["imds-down", "not-base64", "too-short", "no-vault-name", "bad-vault-name"],
)
def test_munge_key_failures_are_one_clear_line(
    sandbox: Sandbox, secret: str, imds_ok: bool, env: dict[str, str], message: str
) -> None:
    """Each way the fetch can fail exits 1 with a one-line reason and leaves no key behind."""
    key_vault(sandbox, secret, imds_ok=imds_ok)
    result = sandbox.run("gb300-munge-key", env=env)
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert message in line
    assert not (sandbox.root / "etc/munge/munge.key").exists()
    assert not (sandbox.root / "etc/munge/munge.key.gb300-new").exists()


def test_munge_key_fetch_waits_out_403_and_404(sandbox: Sandbox) -> None:
    """A node that boots before its role assignment or secret is effective retries 403/404 and then succeeds."""
    key_vault(sandbox, base64.b64encode(KEY).decode(), answers=(403, 404))
    result = sandbox.run("gb300-munge-key", env=RETRYING)
    assert result.returncode == 0, result.stderr
    assert (sandbox.root / "etc/munge/munge.key").read_bytes() == KEY
    assert len([c for c in sandbox.calls("curl") if "vault.azure.net/secrets" in c]) == 3
    assert sum("answered HTTP 403" in c or "answered HTTP 404" in c for c in sandbox.calls("logger")) == 2


def test_munge_key_fetch_gives_up_after_the_wait(sandbox: Sandbox) -> None:
    """The wait is bounded: with no time left a 403 fails the step with one line naming the status."""
    key_vault(sandbox, base64.b64encode(KEY).decode(), answers=(403, 403, 403))
    result = sandbox.run("gb300-munge-key", env={**RETRYING, "GB300_VAULT_WAIT_SECONDS": "0"})
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert "HTTP 403 after 0s" in line
    assert not (sandbox.root / "etc/munge/munge.key").exists()


def test_munge_key_fetch_does_not_retry_other_errors(sandbox: Sandbox) -> None:
    """An answer that waiting cannot fix (400) fails at once, without retries."""
    key_vault(sandbox, base64.b64encode(KEY).decode(), answers=(400,))
    result = sandbox.run("gb300-munge-key", env=RETRYING)
    assert result.returncode == 1
    assert "(HTTP 400)" in result.stderr
    assert len([c for c in sandbox.calls("curl") if "vault.azure.net/secrets" in c]) == 1


def test_pyxis_setup_configures_enroot_on_nvme(sandbox: Sandbox) -> None:
    """With enroot and pyxis installed the step only writes enroot.conf pointing at per-user directories on the
    NVMe scratch and has gb300-enroot-dirs check their parents."""
    sandbox.replace("enroot", 'echo "3.5.0"\n')
    sandbox.write("usr/local/lib/slurm/spank_pyxis.so", "")
    result = sandbox.run("gb300-pyxis-setup", env={"GB300_ENROOT_VERSION": "3.5.0"})
    assert result.returncode == 0, result.stderr
    conf = (sandbox.root / "etc/enroot/enroot.conf").read_text()
    assert "ENROOT_DATA_PATH /mnt/resource_nvme/enroot/data/user-${UID}\n" in conf
    assert not [line for line in conf.splitlines() if " /tmp" in line and not line.startswith("#")]
    assert sandbox.calls("gb300-enroot-dirs") == ["check"]
    assert sandbox.calls("curl") == []


def test_pyxis_setup_without_pins_leaves_the_scheduler_usable(sandbox: Sandbox) -> None:
    """Without enroot and no pinned version the step installs nothing, says why, and lets the node join Slurm."""
    if shutil.which("enroot", path="/usr/bin:/bin"):
        pytest.skip("enroot is installed on this machine")
    result = sandbox.run("gb300-pyxis-setup", env={"PATH": f"{sandbox.path / 'bin'}:/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert "GB300_ENROOT_VERSION is not set" in result.stderr
    reason = (sandbox.root / "var/lib/gb300/slurm/containers.unavailable").read_text()
    assert "GB300_ENROOT_VERSION is not set" in reason
    assert not (sandbox.root / "var/lib/gb300/slurm/pyxis-setup.done").exists()
    assert sandbox.calls("curl") == []


def _git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    done = subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True, env={**os.environ, **env}
    )
    return done.stdout.strip()


def _upstream(sandbox: Sandbox, name: str, makefile: str) -> tuple[str, str, str]:
    """A real git repository standing in for NVIDIA's: (file:// URL, the tagged commit, a later commit)."""
    repo = sandbox.path / "upstream" / name
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "Makefile").write_text(makefile)
    _git(repo, "add", "Makefile")
    _git(repo, "commit", "-q", "-m", "release")
    tagged = _git(repo, "rev-parse", "HEAD")
    (repo / "NEWS").write_text("after the release\n")
    _git(repo, "add", "NEWS")
    _git(repo, "commit", "-q", "-m", "later")
    return f"file://{repo}", tagged, _git(repo, "rev-parse", "HEAD")


# Each target records what it was asked to do; nothing is built or installed on this machine.
_RECORDING_MAKEFILE = 'all install setcap:\n\t@echo "make $@ $(prefix) $(FORCE_GLIBC)" >> $(SANDBOX)/calls.log\n'


def _containers_env(sandbox: Sandbox) -> tuple[dict[str, str], dict[str, str]]:
    """slurm.env values for a GPU node whose enroot and pyxis pins point at local upstreams."""
    sandbox.replace("apt-get", 'printf \'apt-get %s\\n\' "$*" >>"$SANDBOX/calls.log"\n')
    enroot_url, enroot_commit, enroot_later = _upstream(sandbox, "enroot", _RECORDING_MAKEFILE)
    pyxis_url, pyxis_commit, _ = _upstream(sandbox, "pyxis", _RECORDING_MAKEFILE)
    env = {
        "PATH": f"{sandbox.path / 'bin'}:/usr/bin:/bin",
        "SANDBOX": str(sandbox.path),
        "GB300_ENROOT_VERSION": "3.5.0",
        "GB300_ENROOT_GIT": enroot_url,
        "GB300_ENROOT_COMMIT": enroot_commit,
        "GB300_ENROOT_PACKAGES": "build-essential git jq",
        "GB300_PYXIS_VERSION": "0.21.0",
        "GB300_PYXIS_GIT": pyxis_url,
        "GB300_PYXIS_COMMIT": pyxis_commit,
        "GB300_PYXIS_PACKAGES": "build-essential git",
    }
    return env, {"enroot_later": enroot_later}


def test_pyxis_setup_builds_enroot_and_pyxis_at_their_pinned_commits(sandbox: Sandbox) -> None:
    """A GPU node clones each repository, checks out exactly the pinned commit and builds and installs it there."""
    if shutil.which("enroot", path="/usr/bin:/bin"):
        pytest.skip("enroot is installed on this machine")
    env, _ = _containers_env(sandbox)
    result = sandbox.run("gb300-pyxis-setup", env=env)
    assert result.returncode == 0, result.stderr
    cache = sandbox.root / "var/cache/gb300"
    assert _git(cache / "enroot", "rev-parse", "HEAD") == env["GB300_ENROOT_COMMIT"]
    assert _git(cache / "pyxis", "rev-parse", "HEAD") == env["GB300_PYXIS_COMMIT"]
    assert not (cache / "enroot" / "NEWS").exists()  # the later commit is not what was built
    makes = sandbox.calls("make")
    assert makes == ["install /usr/local 1", "setcap /usr/local ", "all  ", "install /usr/local "]
    assert sandbox.calls("gb300-slurm-install") == [""]  # pyxis builds against the pinned Slurm
    installs = [c for c in sandbox.calls("apt-get") if c.startswith("install")]
    assert installs == ["install -y -q build-essential git jq", "install -y -q build-essential git"]
    assert (sandbox.root / "etc/enroot/enroot.conf").exists()
    assert (sandbox.root / "var/lib/gb300/slurm/pyxis-setup.done").exists()
    assert not (sandbox.root / "var/lib/gb300/slurm/containers.unavailable").exists()


def test_pyxis_setup_refuses_a_commit_the_repository_lacks(sandbox: Sandbox) -> None:
    """A pin that names no commit of the repository fails the step and builds nothing."""
    if shutil.which("enroot", path="/usr/bin:/bin"):
        pytest.skip("enroot is installed on this machine")
    env, _ = _containers_env(sandbox)
    env["GB300_ENROOT_COMMIT"] = "0" * 40
    result = sandbox.run("gb300-pyxis-setup", env=env)
    assert result.returncode == 1
    assert f"has no commit {'0' * 40}" in result.stderr
    assert sandbox.calls("make") == []
    assert not (sandbox.root / "var/lib/gb300/slurm/pyxis-setup.done").exists()


def test_pyxis_setup_without_a_pinned_commit_leaves_the_scheduler_usable(sandbox: Sandbox) -> None:
    """No commit for enroot's tag: nothing is cloned or built, the reason is recorded, and the step succeeds."""
    if shutil.which("enroot", path="/usr/bin:/bin"):
        pytest.skip("enroot is installed on this machine")
    env, _ = _containers_env(sandbox)
    env["GB300_ENROOT_COMMIT"] = "-"
    result = sandbox.run("gb300-pyxis-setup", env=env)
    assert result.returncode == 0, result.stderr
    reason = (sandbox.root / "var/lib/gb300/slurm/containers.unavailable").read_text().strip()
    where = "infra/gb300/data/checksums.yaml (run gb300 software lock)"
    assert reason == f"no commit pinned for {env['GB300_ENROOT_GIT']} in {where}"
    assert not (sandbox.root / "var/cache/gb300/enroot").exists()
    assert sandbox.calls("make") == []


def test_the_head_builds_pyxis_and_never_installs_enroot(sandbox: Sandbox) -> None:
    """GB300_INSTALL_ENROOT=0 (the head): pyxis is built at its pinned commit; no enroot, no NVMe dirs."""
    env, _ = _containers_env(sandbox)
    env["GB300_INSTALL_ENROOT"] = "0"
    result = sandbox.run("gb300-pyxis-setup", env=env)
    assert result.returncode == 0, result.stderr
    assert sandbox.calls("make") == ["all  ", "install /usr/local "]
    assert sandbox.calls("gb300-slurm-install") == [""]
    assert not (sandbox.root / "var/cache/gb300/enroot").exists()
    assert not (sandbox.root / "etc/enroot").exists()
    assert not (sandbox.root / "mnt").exists()
    assert (sandbox.root / "var/lib/gb300/slurm/pyxis-setup.done").exists()


NODE_ENV = {
    "GB300_HEAD_HOSTNAME": "head",
    "GB300_SLURM_POOL": "train",
    "GB300_SLURM_CPUS": "128",
    "GB300_SLURM_SOCKETS": "2",
    "GB300_SLURM_CORES_PER_SOCKET": "64",
    "GB300_SLURM_THREADS_PER_CORE": "1",
    "GB300_SLURM_REAL_MEMORY_MIB": "840499",
    "GB300_SLURM_GPUS": "4",
}
DROPIN = "etc/systemd/system/slurmd.service.d/gb300-dynamic.conf"


def slurmd_node(sandbox: Sandbox) -> dict[str, str]:
    """A GPU node with slurmd installed and the gb300 units shipped; returns the step's environment."""
    sandbox.replace("slurmd", "exit 0\n")
    for unit in ("gb300-health-boot.service", "gb300-fabric-publish.service", "gb300-scheduled-events.service"):
        sandbox.write(f"units-src/{unit}", (REPO / "cloud-init/slurm/systemd" / unit).read_text())
    return {**NODE_ENV, "GB300_UNIT_DIR": str(sandbox.root / "units-src")}


def slurmd_argv(sandbox: Sandbox) -> list[str]:
    """The words systemd makes of $SLURMD_OPTIONS from the drop-in (it splits at whitespace, honouring quotes)."""
    lines = (sandbox.root / DROPIN).read_text().splitlines()
    assert "[Service]" in lines
    [environment] = [line for line in lines if line.startswith("Environment=")]
    [assignment] = shlex.split(environment.removeprefix("Environment="))
    name, _, value = assignment.partition("=")
    assert name == "SLURMD_OPTIONS"
    return shlex.split(value)


def test_slurmd_setup_starts_a_dynamic_node_of_its_pool(sandbox: Sandbox) -> None:
    """slurmd registers as a dynamic node (-Z) of its pool with its shape, socket layout and GPUs, configless."""
    result = sandbox.run("gb300-slurmd-setup", env=slurmd_node(sandbox))
    assert result.returncode == 0, result.stderr
    assert slurmd_argv(sandbox) == [
        "-Z",
        "--conf-server",
        "head",
        "--conf",
        "CPUs=128 Sockets=2 CoresPerSocket=64 ThreadsPerCore=1 RealMemory=840499 Gres=gpu:4 Feature=train",
    ]
    assert "SLURMD_OPTIONS=" not in (sandbox.root / "etc/default/slurmd").read_text()  # it would override the drop-in
    # The boot gate's drained registration (written on failure) overrides the drop-in's own options.
    assert "EnvironmentFile=-/run/gb300/slurmd-gate.env" in (sandbox.root / DROPIN).read_text().splitlines()
    register = (sandbox.root / "etc/gb300/slurmd-register.env").read_text()
    assert "GB300_SLURMD_CONF_SERVER=head\n" in register
    assert f"GB300_SLURMD_NODE_CONF='{slurmd_argv(sandbox)[-1]}'" in register
    calls = sandbox.calls("systemctl")
    assert calls.index("daemon-reload") < calls.index("restart slurmd")
    assert calls.index("start gb300-health-boot.service") < calls.index("restart slurmd")
    assert (sandbox.root / "etc/systemd/system/gb300-health-boot.service").exists()
    assert (sandbox.root / "var/lib/gb300/slurm/slurmd-setup.done").exists()
    assert sandbox.calls("gb300-slurm-install") == ["slurm-smd-slurmd"]


def test_slurmd_setup_reads_its_inputs_from_slurm_env(sandbox: Sandbox) -> None:
    """The pool, node shape and socket layout come from /etc/gb300/slurm.env as gpu_files renders it."""
    env = slurmd_node(sandbox)
    inputs = SlurmBootInputs("head", "kv-gb300-ref").for_pool(
        SlurmPool("dev", "ref-dev-r0001-", 18, "Standard_ND96isr_H100_v5", 8, 96, 500000, 1, 3, 2, 48, 1)
    )
    sandbox.write("etc/gb300/slurm.env", render_slurm_env(inputs))
    result = sandbox.run("gb300-slurmd-setup", env={"GB300_UNIT_DIR": env["GB300_UNIT_DIR"]})
    assert result.returncode == 0, result.stderr
    want = "CPUs=96 Sockets=2 CoresPerSocket=48 ThreadsPerCore=1 RealMemory=500000 Gres=gpu:8 Feature=dev"
    assert slurmd_argv(sandbox)[-1] == want


def test_slurmd_setup_on_a_cpu_node_registers_without_gpus_or_fabric(sandbox: Sandbox) -> None:
    """A CPU pool's node (GB300_SLURM_GPUS=0) registers with its features and no Gres=, and installs and starts no
    fabric publisher (it has no NVLink fabric), but keeps the boot gate and the Scheduled Events watcher."""
    env = {**slurmd_node(sandbox), "GB300_SLURM_POOL": "prep", "GB300_SLURM_GPUS": "0"}
    env |= {"GB300_SLURM_FEATURES": "prep,cpu", "GB300_SLURM_CPUS": "32", "GB300_SLURM_SOCKETS": "1"}
    env |= {"GB300_SLURM_CORES_PER_SOCKET": "16", "GB300_SLURM_THREADS_PER_CORE": "2"}
    result = sandbox.run("gb300-slurmd-setup", env=env)
    assert result.returncode == 0, result.stderr
    conf = slurmd_argv(sandbox)[-1]
    assert conf == "CPUs=32 Sockets=1 CoresPerSocket=16 ThreadsPerCore=2 RealMemory=840499 Feature=prep,cpu"
    calls = sandbox.calls("systemctl")
    assert "start gb300-health-boot.service" in calls
    assert "start gb300-scheduled-events.service" in calls
    assert not any("gb300-fabric-publish" in call for call in calls)
    assert not (sandbox.root / "etc/systemd/system/gb300-fabric-publish.service").exists()


def test_slurmd_setup_refuses_features_that_do_not_start_with_the_pool(sandbox: Sandbox) -> None:
    """Features that do not start with the node's pool exit 1 naming the input: the pool's partition would miss it."""
    env = {**slurmd_node(sandbox), "GB300_SLURM_GPUS": "0", "GB300_SLURM_FEATURES": "cpu,train"}
    result = sandbox.run("gb300-slurmd-setup", env=env)
    assert result.returncode == 1
    assert "GB300_SLURM_FEATURES must be the pool's name, then features (got 'cpu,train')" in result.stderr
    assert not (sandbox.root / DROPIN).exists()


def test_slurmd_setup_refuses_a_layout_that_does_not_add_up(sandbox: Sandbox) -> None:
    """Sockets x cores x threads other than the CPUs exits 1 naming the inputs, and writes no drop-in."""
    env = {**slurmd_node(sandbox), "GB300_SLURM_CORES_PER_SOCKET": "32"}
    result = sandbox.run("gb300-slurmd-setup", env=env)
    assert result.returncode == 1
    assert "must equal GB300_SLURM_CPUS (got 2 x 32 x 1, 128)" in result.stderr
    assert not (sandbox.root / DROPIN).exists()


def test_slurmd_setup_rerun_does_not_restart_slurmd(sandbox: Sandbox) -> None:
    """A second run with the same inputs rewrites nothing and only makes sure slurmd is started."""
    env = slurmd_node(sandbox)
    assert sandbox.run("gb300-slurmd-setup", env=env).returncode == 0
    before = (sandbox.root / DROPIN).stat().st_mtime_ns
    (sandbox.path / "calls.log").unlink()
    assert sandbox.run("gb300-slurmd-setup", env=env).returncode == 0
    assert (sandbox.root / DROPIN).stat().st_mtime_ns == before
    assert "restart slurmd" not in sandbox.calls("systemctl")
    assert "start slurmd" in sandbox.calls("systemctl")


@pytest.mark.parametrize(
    ("unset", "message"),
    [
        ("GB300_SLURM_POOL", "GB300_SLURM_POOL must be the node's pool name (got '')"),
        ("GB300_SLURM_GPUS", "GB300_SLURM_GPUS must be a whole number, 0 on a CPU node (got '')"),
        ("GB300_SLURM_SOCKETS", "GB300_SLURM_SOCKETS must be a positive integer (got '')"),
    ],
)
def test_slurmd_setup_without_node_shape_fails_clearly(sandbox: Sandbox, unset: str, message: str) -> None:
    """Without its pool or shape the step exits 1 with one line naming the input, and writes no drop-in."""
    env = slurmd_node(sandbox)
    env.pop(unset)
    result = sandbox.run("gb300-slurmd-setup", env=env)
    assert result.returncode == 1
    assert message in result.stderr
    assert not (sandbox.root / DROPIN).exists()
