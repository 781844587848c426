"""Node setup steps: the munge key from Key Vault, pyxis/enroot configuration, slurmd's configless setup."""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
import shutil
import stat

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


ENROOT_DEBS = (
    "https://github.com/NVIDIA/enroot/releases/download/v3.5.0/enroot_3.5.0-1_arm64.deb",
    "https://github.com/NVIDIA/enroot/releases/download/v3.5.0/enroot+caps_3.5.0-1_arm64.deb",
)
PYXIS_URL = "https://github.com/NVIDIA/pyxis/archive/refs/tags/v0.20.0.tar.gz"


def _serving(sandbox: Sandbox) -> dict[str, str]:
    """curl writes 'served <url>' to its -o file; returns URL -> the sha256 of what it serves."""
    sandbox.replace(
        "curl",
        'printf \'curl %s\\n\' "$*" >>"$SANDBOX/calls.log"\n'
        'out=""; prev=""; for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done\n'
        'printf \'served %s\\n\' "${*: -1}" >"$out"\n',
    )
    sandbox.replace("dpkg", "echo arm64\n")
    sandbox.replace("apt-get", 'printf \'apt-get %s\\n\' "$*" >>"$SANDBOX/calls.log"\n')
    return {url: hashlib.sha256(f"served {url}\n".encode()).hexdigest() for url in (*ENROOT_DEBS, PYXIS_URL)}


def _enroot_env(sandbox: Sandbox, shas: list[str]) -> dict[str, str]:
    return {
        "PATH": f"{sandbox.path / 'bin'}:/usr/bin:/bin",
        "GB300_ENROOT_VERSION": "3.5.0",
        "GB300_ENROOT_DEBS": " ".join(ENROOT_DEBS),
        "GB300_ENROOT_SHA256S": " ".join(shas),
    }


def test_pyxis_setup_installs_the_pinned_enroot_packages(sandbox: Sandbox) -> None:
    """With both .debs pinned, the step downloads each once, checks it, and installs both with apt."""
    if shutil.which("enroot", path="/usr/bin:/bin"):
        pytest.skip("enroot is installed on this machine")
    served = _serving(sandbox)
    sandbox.write("usr/local/lib/slurm/spank_pyxis.so", "")
    result = sandbox.run("gb300-pyxis-setup", env=_enroot_env(sandbox, [served[u] for u in ENROOT_DEBS]))
    assert result.returncode == 0, result.stderr
    assert [c.split()[-1] for c in sandbox.calls("curl")] == list(ENROOT_DEBS)
    [install] = [c for c in sandbox.calls("apt-get") if c.startswith("install")]
    assert install.endswith(
        "var/cache/gb300/enroot_3.5.0-1_arm64.deb "
        + str(sandbox.root)
        + "/var/cache/gb300/enroot+caps_3.5.0-1_arm64.deb"
    )
    assert (sandbox.root / "etc/enroot/enroot.conf").exists()
    assert not (sandbox.root / "var/lib/gb300/slurm/containers.unavailable").exists()


@pytest.mark.parametrize(
    ("sha_of_second", "message"),
    [
        (
            "-",
            "no sha256 pinned for " + ENROOT_DEBS[1] + " in infra/gb300/data/checksums.yaml (run gb300 software lock)",
        ),
        ("0" * 64, None),
    ],
    ids=["unpinned", "mismatch"],
)
def test_pyxis_setup_refuses_an_unpinned_or_wrong_enroot_package(
    sandbox: Sandbox, sha_of_second: str, message: str | None
) -> None:
    """An unpinned .deb is not downloaded (containers unavailable, Slurm unaffected); a wrong one fails the step."""
    if shutil.which("enroot", path="/usr/bin:/bin"):
        pytest.skip("enroot is installed on this machine")
    served = _serving(sandbox)
    result = sandbox.run("gb300-pyxis-setup", env=_enroot_env(sandbox, [served[ENROOT_DEBS[0]], sha_of_second]))
    assert not [c for c in sandbox.calls("apt-get") if c.startswith("install")]
    if message is None:
        assert result.returncode == 1
        assert f"checksum mismatch for {ENROOT_DEBS[1]}" in result.stderr
    else:
        assert result.returncode == 0, result.stderr
        assert (sandbox.root / "var/lib/gb300/slurm/containers.unavailable").read_text().strip() == message
        assert sandbox.calls("curl") == []


def test_pyxis_setup_refuses_an_enroot_package_for_another_architecture(sandbox: Sandbox) -> None:
    """arm64 pins on an amd64 machine are never installed: containers are unavailable and the reason says why."""
    if shutil.which("enroot", path="/usr/bin:/bin"):
        pytest.skip("enroot is installed on this machine")
    served = _serving(sandbox)
    sandbox.replace("dpkg", "echo amd64\n")
    result = sandbox.run("gb300-pyxis-setup", env=_enroot_env(sandbox, [served[u] for u in ENROOT_DEBS]))
    assert result.returncode == 0, result.stderr
    reason = (sandbox.root / "var/lib/gb300/slurm/containers.unavailable").read_text()
    assert "not for this node's architecture (amd64)" in reason
    assert sandbox.calls("curl") == []


def test_the_head_builds_pyxis_and_never_installs_enroot(sandbox: Sandbox) -> None:
    """GB300_INSTALL_ENROOT=0 (the head): the pinned pyxis tarball is fetched and built; no enroot, no NVMe dirs."""
    served = _serving(sandbox)
    sandbox.replace("tar", 'printf \'tar %s\\n\' "$*" >>"$SANDBOX/calls.log"\n')
    sandbox.replace("make", 'printf \'make %s\\n\' "$*" >>"$SANDBOX/calls.log"\n')
    env = {
        "GB300_INSTALL_ENROOT": "0",
        "GB300_PYXIS_VERSION": "0.20.0",
        "GB300_PYXIS_URL": PYXIS_URL,
        "GB300_PYXIS_SHA256": served[PYXIS_URL],
    }
    result = sandbox.run("gb300-pyxis-setup", env=env)
    assert result.returncode == 0, result.stderr
    assert [c.split()[-1] for c in sandbox.calls("curl")] == [PYXIS_URL]
    assert len(sandbox.calls("make")) == 2  # build, install
    # Built against the pinned Slurm's slurm-smd-dev (gb300-slurm-install puts it in place first).
    assert sandbox.calls("gb300-slurm-install") == [""]
    assert [c for c in sandbox.calls("apt-get") if c.startswith("install")] == ["install -y -q build-essential"]
    assert not [c for c in sandbox.calls("apt-get") if "enroot" in c]
    assert not (sandbox.root / "etc/enroot").exists()
    assert not (sandbox.root / "mnt").exists()
    assert (sandbox.root / "var/lib/gb300/slurm/pyxis-setup.done").exists()


NODE_ENV = {
    "GB300_HEAD_HOSTNAME": "head",
    "GB300_SLURM_POOL": "train",
    "GB300_SLURM_CPUS": "128",
    "GB300_SLURM_REAL_MEMORY_MIB": "840499",
    "GB300_SLURM_GPUS": "4",
}
DROPIN = "etc/systemd/system/slurmd.service.d/gb300-dynamic.conf"


def slurmd_node(sandbox: Sandbox) -> dict[str, str]:
    """A GPU node with slurmd installed and the gb300 units shipped; returns the step's environment."""
    sandbox.replace("slurmd", "exit 0\n")
    for unit in ("gb300-health-boot.service", "gb300-fabric-publish.service"):
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
    """slurmd registers as a dynamic node (-Z) of its pool with its shape and GPUs, configless from the head."""
    result = sandbox.run("gb300-slurmd-setup", env=slurmd_node(sandbox))
    assert result.returncode == 0, result.stderr
    assert slurmd_argv(sandbox) == [
        "-Z",
        "--conf-server",
        "head",
        "--conf",
        "CPUs=128 RealMemory=840499 Gres=gpu:4 Feature=train",
    ]
    assert "SLURMD_OPTIONS=" not in (sandbox.root / "etc/default/slurmd").read_text()  # it would override the drop-in
    calls = sandbox.calls("systemctl")
    assert calls.index("daemon-reload") < calls.index("restart slurmd")
    assert calls.index("start gb300-health-boot.service") < calls.index("restart slurmd")
    assert (sandbox.root / "etc/systemd/system/gb300-health-boot.service").exists()
    assert (sandbox.root / "var/lib/gb300/slurm/slurmd-setup.done").exists()
    assert sandbox.calls("gb300-slurm-install") == ["slurm-smd-slurmd"]


def test_slurmd_setup_reads_its_inputs_from_slurm_env(sandbox: Sandbox) -> None:
    """The pool and node shape come from /etc/gb300/slurm.env as gpu_files renders it."""
    env = slurmd_node(sandbox)
    inputs = SlurmBootInputs("head", "kv-gb300-ref").for_pool(
        SlurmPool("dev", "ref-dev-r0001-", 18, "Standard_ND128isr_GB300_v6", 4, 96, 500000)
    )
    sandbox.write("etc/gb300/slurm.env", render_slurm_env(inputs))
    result = sandbox.run("gb300-slurmd-setup", env={"GB300_UNIT_DIR": env["GB300_UNIT_DIR"]})
    assert result.returncode == 0, result.stderr
    assert slurmd_argv(sandbox)[-1] == "CPUs=96 RealMemory=500000 Gres=gpu:4 Feature=dev"


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
        ("GB300_SLURM_POOL", "GB300_SLURM_POOL must be the node's GPU pool name (got '')"),
        ("GB300_SLURM_GPUS", "GB300_SLURM_GPUS must be a positive integer (got '')"),
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
