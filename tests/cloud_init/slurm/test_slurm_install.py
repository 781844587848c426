"""gb300-slurm-install: Slurm 25.11 from Microsoft's repository at the pinned version, preferred and held."""

from __future__ import annotations

import pytest

from gb300.facts.software import load_software
from gb300.slurm.files import SlurmBootInputs, render_slurm_env

from .conftest import REPO, Sandbox

pytestmark = pytest.mark.slow  # every test runs a node script in a sandbox (subprocesses)

KEY = REPO / "tests" / "fixtures" / "keys" / "repo-signing.asc"
KEY_FPR = "C08AF28EE2631D8C289BEAC2E32B5DBF675A3747"


def slurm_node(sandbox: Sandbox, *, installed: dict[str, str] | None = None, slurm_uid: str | None = None) -> None:
    """A node with the bootstrap library, slurm.env as gb300 renders it (the repository key pinned to the test
    key) and stand-ins for the package tools; ``installed`` is package -> version already on the node."""
    software = load_software()
    slurm = software.component("slurm")
    [repo] = [r for r in software.repos if r.name == slurm.repo]
    repo = type(repo)(**{**repo.__dict__, "key_fingerprints": (KEY_FPR,)})
    inputs = SlurmBootInputs(
        "head",
        slurm_version=slurm.version,
        slurm_apt_version=slurm.apt_version,
        slurm_packages=slurm.packages,
        slurm_repo=repo,
    )
    sandbox.write("etc/gb300/slurm.env", render_slurm_env(inputs))
    sandbox.write("usr/local/lib/gb300/lib.sh", (REPO / "cloud-init/lib/gb300-lib.sh").read_text())
    rows = "".join(f"  {pkg}) echo 'install ok installed {ver}';;\n" for pkg, ver in (installed or {}).items())
    sandbox.replace("dpkg-query", f'case "${{*: -1}}" in\n{rows}  *) exit 1;;\nesac\n')
    passwd = f"slurm:x:{slurm_uid}:{slurm_uid}::/var/lib/slurm:/usr/sbin/nologin" if slurm_uid else ""
    sandbox.replace(
        "getent",
        'printf \'getent %s\\n\' "$*" >>"$SANDBOX/calls.log"\n'
        'if [ -e "$SANDBOX/useradd.done" ]; then echo "slurm:x:11100:11100::/:/usr/sbin/nologin"; exit 0; fi\n'
        f'[ -n "{passwd}" ] && [ "$1" = passwd ] && {{ echo "{passwd}"; exit 0; }}\n'
        '[ "$1" = group ] && [ -n "' + passwd + '" ] && exit 0\nexit 2\n',
    )
    for tool in ("apt-get", "apt-mark", "groupadd"):
        sandbox.replace(tool, f'printf \'{tool} %s\\n\' "$*" >>"$SANDBOX/calls.log"\n')
    sandbox.replace("useradd", 'printf \'useradd %s\\n\' "$*" >>"$SANDBOX/calls.log"\ntouch "$SANDBOX/useradd.done"\n')
    sandbox.replace(
        "curl",
        'printf \'curl %s\\n\' "$*" >>"$SANDBOX/calls.log"\n'
        'out=""; prev=""; for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done\n'
        f'cp "{KEY}" "$out"\n',
    )


def test_a_fresh_node_gets_microsoft_slurm_at_the_pin_preferred_and_held(sandbox: Sandbox) -> None:
    """Plain Ubuntu: the slurm user (uid 11100), the preference over Ubuntu's Slurm, Microsoft's repository with
    its checked key, the common packages plus the role's daemon at 25.11.5-*, all held."""
    slurm_node(sandbox)
    result = sandbox.run("gb300-slurm-install", "slurm-smd-slurmd")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "--uid 11100" in sandbox.calls("useradd")[0]
    pref = (sandbox.root / "etc/apt/preferences.d/gb300-slurm").read_text()
    assert 'Pin: origin "packages.microsoft.com"\nPin-Priority: 990' in pref
    assert "Pin: release o=Ubuntu\nPin-Priority: -1" in pref
    source = (sandbox.root / "etc/apt/sources.list.d/gb300-slurm-microsoft.list").read_text()
    assert source == (
        "deb [signed-by=/etc/apt/keyrings/gb300-slurm-microsoft.asc] "
        "https://packages.microsoft.com/repos/slurm-ubuntu-noble stable main\n"
    )
    [install] = [c for c in sandbox.calls("apt-get") if " install " in f" {c} "]
    assert install.split()[-5:] == [
        "slurm-smd=25.11.5-*",
        "slurm-smd-client=25.11.5-*",
        "slurm-smd-dev=25.11.5-*",
        "slurm-smd-libpam-slurm-adopt=25.11.5-*",
        "slurm-smd-slurmd=25.11.5-*",
    ]
    assert sandbox.calls("apt-mark")[-1].split()[1:] == [
        "slurm-smd", "slurm-smd-client", "slurm-smd-dev", "slurm-smd-libpam-slurm-adopt", "slurm-smd-slurmd",
    ]  # fmt: skip


def test_an_image_listing_the_repository_keeps_its_entry(sandbox: Sandbox) -> None:
    """When the image already lists Microsoft's Slurm repository (same URL and suite), no second entry with
    another signed-by keyring is added: apt-get update would fail on the conflict."""
    slurm_node(sandbox, slurm_uid="11100")
    sandbox.write(
        "etc/apt/sources.list.d/slurm.list",
        "deb [arch=arm64 signed-by=/usr/share/keyrings/microsoft-prod.gpg] "
        "https://packages.microsoft.com/repos/slurm-ubuntu-noble/ stable main\n",
    )
    result = sandbox.run("gb300-slurm-install")
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (sandbox.root / "etc/apt/sources.list.d/gb300-slurm-microsoft.list").exists()
    assert sandbox.calls("curl") == []
    assert "using that entry and its keyring" in result.stdout
    assert sandbox.calls("useradd") == []


def test_the_pinned_version_already_installed_installs_nothing(sandbox: Sandbox) -> None:
    """A second run (everything at 25.11.5) installs nothing and holds only what is not held yet."""
    packages = ("slurm-smd", "slurm-smd-client", "slurm-smd-dev", "slurm-smd-libpam-slurm-adopt")
    slurm_node(sandbox, installed=dict.fromkeys(packages, "25.11.5-1"), slurm_uid="11100")
    result = sandbox.run("gb300-slurm-install")
    assert result.returncode == 0, result.stdout + result.stderr
    assert [c for c in sandbox.calls("apt-get") if "install" in c] == []
    assert sandbox.calls("curl") == []


@pytest.mark.parametrize(
    ("installed", "uid", "message"),
    [
        ({"slurm-smd": "23.11.4-1"}, "11100", "slurm-smd 23.11.4-1 is installed but Slurm 25.11.5 is pinned"),
        ({}, "998", "user slurm has uid 998, expected 11100 on every node"),
    ],
    ids=["other-slurm", "other-uid"],
)
def test_a_node_that_cannot_match_the_pin_fails_with_a_reason(
    sandbox: Sandbox, installed: dict[str, str], uid: str, message: str
) -> None:
    """Another Slurm version or another slurm uid stops the step with one reason; nothing is installed."""
    slurm_node(sandbox, installed=installed, slurm_uid=uid)
    result = sandbox.run("gb300-slurm-install")
    assert result.returncode == 1
    assert message in result.stderr
    assert [c for c in sandbox.calls("apt-get") if "install" in c] == []
