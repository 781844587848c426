"""`gb300 init NAME`: a new stack with its own cluster name, signing key and SSH key that plans cleanly; every
refusal is exit 2 on one line and writes nothing; the repository's tests hold with the new stack present."""

from __future__ import annotations

import ipaddress
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gb300 import cli, config
from gb300.node import manifest
from gb300.rules import identity

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDuptD3soyOcGeTftsws1pF9pLvy/fYHdTEGGBbeVuI6 ops@example"
# A real Ed25519 public key of nobody's (made once with ssh-keygen -t ed25519); not the shipped example.
OWN_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIADDzJxvaxYSYM901ZPfxr7kcSikvxUfUG9YOOBv67WK me@lab"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the project's Pulumi.yaml and stacks/ as the current directory, with HOME in the temp folder and
    an SSH key at ~/.ssh/id_ed25519.pub."""
    root = tmp_path / "repo"
    (root / "stacks").mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    for stack in ("dev", "reference"):
        shutil.copy(ROOT / "stacks" / f"Pulumi.{stack}.yaml", root / "stacks" / f"Pulumi.{stack}.yaml")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519.pub").write_text(OWN_KEY + "\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(root)
    return root


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["dev"], "stacks/Pulumi.dev.yaml exists; gb300 init never overwrites a stack file"),
        (["mylab", "--ssh-public-key", "EXAMPLE"], "is the shipped stacks' example key"),
        (["mylab", "--ssh-public-key", "PRIVATE"], "is a private key; give the public key"),
        (["mylab", "--ssh-public-key", "MISSING"], "cannot be read"),
        (["mylab", "--signing-key", "stacks/mylab.pem"], "a private key must stay out of the repository"),
        (["mylab", "--signing-key", "TAKEN"], "exists; gb300 never overwrites a signing key"),
        (["my/lab"], "NAME must be 1-100 letters"),
        (["2024"], "no cluster name can be derived"),
        (["mylab", "--cluster-name", "dev"], "'dev' is already the cluster name of stack 'dev'"),
        (["mylab", "--cluster-name", "My_Lab"], "--cluster-name must be lowercase letters"),
        (["mylab", "--cluster-name", "averylongname"], "at most 12 characters"),
        (["mylab", "--location", "mars"], "gb300:cluster.location: is not an Azure region"),
        (["mylab", "--racks", "0"], "--racks must be at least 1"),
        (["mylab", "--address-space", "10.40.128.0/17"], "overlaps the address space of stack 'reference'"),
    ],
)
def test_init_refuses_with_one_line_and_writes_nothing(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    """A stack file or key that exists, the example or a private SSH key, a key inside the project, a name that
    makes no cluster name, a taken cluster name or a region Azure lacks: exit 2, one line, no file written."""
    words = {
        "EXAMPLE": tmp_path / "example.pub",
        "PRIVATE": tmp_path / "id_ed25519",
        "MISSING": tmp_path / "nothing.pub",
        "TAKEN": tmp_path / "taken.pem",
    }
    words["EXAMPLE"].write_text(EXAMPLE_KEY + "\n")
    words["PRIVATE"].write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----\n")
    words["TAKEN"].write_text("a key\n")
    before = _files(project) | _files(tmp_path / "home")
    code = cli.main(["init", *[str(words.get(a, a)) for a in argv]])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1, err
    assert expected in err[0]
    assert _files(project) | _files(tmp_path / "home") == before
    assert (tmp_path / "taken.pem").read_text() == "a key\n"


def test_init_without_an_ssh_key_names_the_defaults(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no --ssh-public-key and no ~/.ssh key: exit 2 naming the files it looked for and ssh-keygen."""
    (tmp_path / "home" / ".ssh" / "id_ed25519.pub").unlink()
    assert cli.main(["init", "mylab"]) == 2
    err = capsys.readouterr().err
    assert "~/.ssh/id_ed25519.pub, ~/.ssh/id_rsa.pub" in err
    assert "ssh-keygen -t ed25519" in err
    assert not (project / "stacks" / "Pulumi.mylab.yaml").exists()


def test_init_writes_a_stack_of_its_own_that_plans_cleanly(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gb300 init mylab, then gb300 plan --stack mylab passes with no stack-identity finding; nothing of dev's
    identity is left (cluster name, SSH key, signing key, env tag, the pipelines' ServicePrincipal, its address
    space); dev's comments stay; the private key is 0600 in a 0700 folder and is the stack's key; the day-1 commands
    are printed: az login, pulumi login, the subscription and the policy-pack preview before up."""
    assert cli.main(["init", "mylab"]) == 0
    out = capsys.readouterr().out.splitlines()
    key = tmp_path / "home" / ".gb300" / "mylab-payload.pem"
    assert out == [
        "Next:",
        "  gb300 plan --stack mylab",
        "  az login",
        "  pulumi login",
        "  pulumi stack init mylab",
        '  pulumi config set azure-native:subscriptionId "$(az account show --query id -o tsv)" --stack mylab',
        "  pulumi preview --stack mylab --policy-pack policies",
        f'  GB300_PAYLOAD_SIGNING_KEY="$(cat {key})" pulumi up --stack mylab',
    ]
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    written = project / "stacks" / "Pulumi.mylab.yaml"
    text = written.read_text()
    dev = (project / "stacks" / "Pulumi.dev.yaml").read_text()
    comments = [line.strip() for line in dev.splitlines()[1:] if line.strip().startswith("#")]
    assert [c for c in comments if c not in text] == [
        "# The pipelines (deploy.yml, azure-pipelines.yml) deploy this stack as a service principal."
    ]
    raw = config.load_stack_file(written)
    dev_raw = config.load_stack_file(project / "stacks" / "Pulumi.dev.yaml")
    assert raw["cluster"]["name"] == "mylab"
    assert raw["cluster"]["tags"] == {"owner": "ml-platform", "env": "mylab"}
    assert raw["access"]["sshPublicKey"] == OWN_KEY
    payload = raw["storage"]["nodePayload"]
    assert payload["deployerPrincipalType"] == "User"
    private = manifest.load_private_key(key.read_text(), source=str(key))
    assert payload["signingPublicKey"] == manifest.public_key_line(private)
    assert payload["signingPublicKey"] != dev_raw["storage"]["nodePayload"]["signingPublicKey"]
    spaces = {config.load_stack_file(p)["network"]["addressSpace"] for p in (project / "stacks").glob("Pulumi.*")}
    assert len(spaces) == len(list((project / "stacks").glob("Pulumi.*")))
    # Everything else is dev's, as the template says it.
    assert {k: v for k, v in raw.items() if k not in {"cluster", "access", "storage", "network"}} == {
        k: v for k, v in dev_raw.items() if k not in {"cluster", "access", "storage", "network"}
    }
    assert cli.main(["plan", "--stack", "mylab", "--quiet"]) == 0
    planned = capsys.readouterr().out
    assert identity.RULE_ID not in planned
    assert planned.rstrip().endswith("plan passes")


def test_init_answers_the_template_region_size_and_deployer_by_flags(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--from reference --deployer service-principal --location --zone --vm-size --racks --cluster-name each land
    in the file; the quota family of the size and its vCPUs are named."""
    argv = [
        "init", "prod.eu", "--from", "reference", "--deployer", "service-principal", "--location", "westus3",
        "--zone", "2", "--vm-size", "Standard_ND128isrG5_GB300_v6", "--racks", "2",
        "--signing-key", str(tmp_path / "keys" / "prod.pem"),
    ]  # fmt: skip
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "standardNDISRGB300V6Family: 4,608 vCPUs in westus3" in err
    raw = config.load_stack_file(project / "stacks" / "Pulumi.prod.eu.yaml")
    assert raw["cluster"]["name"] == "prod-eu"
    assert (raw["cluster"]["location"], raw["cluster"]["zone"]) == ("westus3", "2")
    assert [(p["vmSize"], p["racks"]) for p in raw["gpuPools"]] == [("Standard_ND128isrG5_GB300_v6", 2)]
    assert raw["storage"]["nodePayload"]["deployerPrincipalType"] == "ServicePrincipal"
    assert raw["storage"]["lustre"]["capacityTiB"] == 128  # the rest is reference's
    assert stat.S_IMODE((tmp_path / "keys").stat().st_mode) == 0o700


@pytest.mark.parametrize(
    ("stack", "cluster"),
    [("mylab", "mylab"), ("My_Lab", "my-lab"), ("team.a--prod", "team-a-prod"), ("9lives", "lives"),
     ("abcdefghijk-lmn", "abcdefghijk")],
)  # fmt: skip
def test_cluster_names_derived_from_stack_names_are_valid(stack: str, cluster: str) -> None:
    """Lowercase, other characters as one hyphen, from the first letter, at most 12, no trailing hyphen."""
    from gb300.commands.init import derive_cluster_name  # noqa: PLC0415

    assert derive_cluster_name(stack) == cluster


@pytest.mark.slow
def test_the_gitops_tests_pass_with_a_new_stack_present(tmp_path: Path) -> None:
    """In a copy of the repository, gb300 init mylab, then tests/test_gitops.py passes: a stack file no pipeline
    deploys breaks none of the pipelines' checks."""
    copy = tmp_path / "clone"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in (f.decode() for f in files if f):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519.pub").write_text(OWN_KEY + "\n")
    env = {**os.environ, "HOME": str(home)}
    gb300 = [sys.executable, "-m", "gb300.cli"]
    subprocess.run([*gb300, "init", "mylab"], cwd=copy, env=env, check=True, capture_output=True)
    assert (copy / "stacks" / "Pulumi.mylab.yaml").is_file()
    tests = subprocess.run(
        # Its own temporary directory: pytest's clean-up of older runs' directories (all of /tmp/pytest-of-<user>) is
        # not this test's work.
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--basetemp",
            str(tmp_path / "pytest"),
            "tests/test_gitops.py",
        ],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert tests.returncode == 0, tests.stdout[-3000:]


def test_each_new_stack_gets_an_address_space_no_sibling_uses(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three stacks made from dev one after another each get a block of dev's size that overlaps neither the
    shipped stacks' nor each other's; --address-space is taken as given."""
    for name in ("one", "two", "three"):
        assert cli.main(["init", name]) == 0
    assert cli.main(["init", "four", "--address-space", "10.99.0.0/16"]) == 0
    capsys.readouterr()
    nets = {
        p.name: ipaddress.IPv4Network(config.load_stack_file(p)["network"]["addressSpace"])
        for p in (project / "stacks").glob("Pulumi.*.yaml")
    }
    dev = nets["Pulumi.dev.yaml"]
    assert nets["Pulumi.four.yaml"] == ipaddress.IPv4Network("10.99.0.0/16")
    for name in ("one", "two", "three"):
        assert nets[f"Pulumi.{name}.yaml"].prefixlen == dev.prefixlen
    overlapping = [(a, b) for a in nets for b in nets if a < b and nets[a].overlaps(nets[b])]
    assert overlapping == []


# -- issue 48: what the repository or the key file supplies stays data ------------------------------------------


def test_a_planted_scratch_symlink_is_never_written_through(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A committed symlink where gb300 init used to write its scratch copy (stacks/.Pulumi.NAME.yaml.gb300-init)
    is left alone and so is what it points at: init parses the new text in memory and writes only the stack file."""
    victim = tmp_path / "home" / ".bashrc"
    victim.write_text("# mine\n")
    link = project / "stacks" / ".Pulumi.mylab.yaml.gb300-init"
    link.symlink_to(victim)
    assert cli.main(["init", "mylab"]) == 0
    capsys.readouterr()
    assert victim.read_text() == "# mine\n"
    assert link.is_symlink()
    assert sorted(p.name for p in (project / "stacks").iterdir()) == [
        ".Pulumi.mylab.yaml.gb300-init",
        "Pulumi.dev.yaml",
        "Pulumi.mylab.yaml",
        "Pulumi.reference.yaml",
    ]


def test_a_planted_symlink_at_the_stack_file_is_refused(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dangling symlink named like the new stack file (exists() says no) is refused, exit 2 on one line, and
    nothing is created where it points."""
    victim = tmp_path / "home" / ".profile"
    (project / "stacks" / "Pulumi.mylab.yaml").symlink_to(victim)
    assert cli.main(["init", "mylab", "--signing-key", str(tmp_path / "k.pem")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "exists; gb300 never overwrites it" in err[0]
    assert not victim.exists()


@pytest.mark.parametrize("comment", ["me@lab #1", "me@lab: laptop", "'quoted' \"twice\" &a *b !tag {x} [y]"])
def test_an_ssh_key_comment_is_kept_as_data(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], comment: str
) -> None:
    """A key comment holding ' #', ': ' or YAML's indicators is written quoted by the YAML library and read back
    as the same key, comment and all; the stack plans (it used to be exit 3, or a YAML error naming a scratch
    file)."""
    key = tmp_path / "commented.pub"
    line = OWN_KEY.rsplit(" ", 1)[0] + " " + comment
    key.write_text(line + "\n")
    assert cli.main(["init", "mylab", "--ssh-public-key", str(key)]) == 0
    capsys.readouterr()
    assert config.load_stack_file(project / "stacks" / "Pulumi.mylab.yaml")["access"]["sshPublicKey"] == line


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIADDzJxvaxYSYM901ZPfxr7kcSikvxUfUG9YOOBv67WK a\x1b[2Jb",
            "control characters",
        ),
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIADDzJxvaxYSYM901ZPfxr7kcSikvxUfUG9YOOBv67WK a\u2028b", "one line"),
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIADDzJxvaxYSYM901ZPfxr7kcSikvxUfUG9YOOBv67W= x", "does not encode"),
        ("ssh-ed25519 AAAA" + "A" * 20_000, "is larger than 16 KiB"),
    ],
    ids=["escape", "line-separator", "bad-body", "huge"],
)
def test_an_ssh_key_that_is_not_one_plain_key_is_exit_two(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, expected: str
) -> None:
    """A key file with a control character or separator in its comment, a body that is no key, or megabytes of
    text: exit 2 on one line naming the file, never an internal error, nothing written."""
    key = tmp_path / "odd.pub"
    key.write_text(body + "\n", encoding="utf-8")
    before = _files(project)
    assert cli.main(["init", "mylab", "--ssh-public-key", str(key)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert str(key) in err[0]
    assert expected in err[0]
    assert _files(project) == before
