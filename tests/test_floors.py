"""The Pulumi floors (infra/gb300/data/floors.yaml): one home, repeated the same everywhere, checked at start-up."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pulumi
import pytest

from gb300 import cli, floors, program
from gb300.components import compute_package
from gb300.facts.loader import data

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
OLD_SDK = "3.246.0"  # the release before register_package


def _requirement_floor(lines: list[str], name: str) -> str:
    """The ``>=`` floor a requirement list gives ``name`` (pyproject.toml's dependencies, requirements.txt lines)."""
    for line in lines:
        match = re.match(rf"^\s*{re.escape(name)}\s*>=\s*([0-9.]+)", line.split("#", 1)[0].strip())
        if match:
            return match.group(1)
    msg = f"{name} has no >= floor"
    raise AssertionError(msg)


def test_every_floor_has_a_source_and_a_status() -> None:
    """Each floor names what needs it, where it was read and whether that was verified."""
    doc = data("floors.yaml")
    entries = [*doc["packages"].values(), doc["cli"]["pulumi"]]
    for entry in entries:
        assert floors.release(entry["floor"]) is not None
        assert entry["needs"]
        assert entry["status"] in ("verified", "unverified")
        assert len(entry["source"]) > 40


def test_pyproject_and_the_pack_requirements_use_the_floors() -> None:
    """pyproject.toml and policies/requirements.txt give each package exactly the floor of data/floors.yaml."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    pack = (ROOT / "policies" / "requirements.txt").read_text(encoding="utf-8").splitlines()
    for entry in floors.package_floors():
        assert _requirement_floor(deps, entry.name) == entry.floor, entry.name
        if entry.name == "pulumi":  # the pack imports pulumi (through pulumi-policy), not azure-native
            assert _requirement_floor(pack, entry.name) == entry.floor


def test_pinned_versions_and_the_racks_plugin_are_at_or_above_the_floors() -> None:
    """constraints.txt pins every floored package at or above its floor, and the racks' plugin version (the one the
    engine runs for the parameterized package) carries the azure-native fix too."""
    pins = dict(
        line.split("==", 1) for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").split() if "==" in line
    )
    pins = {k.lower().replace("_", "-"): v for k, v in pins.items()}
    for entry in floors.package_floors():
        assert not floors.below(pins[entry.name], entry.floor), entry.name
    azure = next(e for e in floors.package_floors() if e.name == "pulumi-azure-native")
    assert not floors.below(compute_package.BASE_PROVIDER_VERSION, azure.floor)


@pytest.mark.parametrize(
    ("doc", "section"),
    [
        ("README.md", "## Deploying for real"),
        ("docs/development.md", "## Floors"),
        ("docs/engine-contract.md", "## Floors"),
    ],
)
def test_docs_name_every_floor(doc: str, section: str) -> None:
    """The deploy instructions, the developer guide and the engine contract name each floor as data/floors.yaml
    has it, in the section about it."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    assert section in text, doc
    body = text.split(section, 1)[1].split("\n## ", 1)[0]
    for entry in [*floors.package_floors(), floors.cli_floor()]:
        name = "Pulumi CLI" if entry.name == "pulumi CLI" else f"`{entry.name}`"
        assert f"{name} {entry.floor}" in body, f"{doc}: {name} {entry.floor}"
    assert "infra/gb300/data/floors.yaml" in body


def test_the_installed_packages_pass() -> None:
    """This checkout's virtual environment (constraints.txt) is at or above every floor."""
    assert floors.package_problems() == []


def test_release_comparison() -> None:
    """Versions compare by release numbers: trailing zeros, a leading v and pre-release tails do not count."""
    assert floors.below("3.246.0", "3.247.0")
    assert not floors.below("3.247", "3.247.0")
    assert not floors.below("v3.251.0", "3.251.0")
    assert floors.below("3.30.0", "3.247.0")
    assert not floors.below("4.0.0rc1", "3.247.0")
    assert floors.below("not-a-version", "3.247.0")


def _fake_version(monkeypatch: pytest.MonkeyPatch, package: str, version: str) -> None:
    """importlib.metadata reports ``package`` at ``version`` (nothing is uninstalled)."""
    real = importlib.metadata.version

    def fake(name: str) -> str:
        return version if name == package else real(name)

    monkeypatch.setattr(importlib.metadata, "version", fake)


def test_the_program_refuses_an_sdk_below_its_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the engine, an installed pulumi below its floor fails the program with one line naming the package,
    the installed version and the floor (pulumi.RunError: the language host prints its message, no traceback),
    before the stack config is read."""
    _fake_version(monkeypatch, "pulumi", OLD_SDK)
    with pytest.raises(pulumi.RunError) as caught:
        program.main()
    message = str(caught.value)
    assert message.count("\n") == 0
    assert f"pulumi {OLD_SDK} is installed" in message
    assert "pulumi>=3.247.0" in message


def test_the_cli_refuses_an_sdk_below_its_floor(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gb300 plan` with pulumi-azure-native below its floor exits 2 with one line naming it."""
    _fake_version(monkeypatch, "pulumi-azure-native", "3.19.0")
    assert cli.main(["plan", "--stack", "dev"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "pulumi-azure-native 3.19.0 is installed; gb300 needs pulumi-azure-native>=3.20.0" in err[0]


FAKE_SITE = """
import importlib.metadata as m
_real = m.version
def version(name):
    return {fake!r} if name == {package!r} else _real(name)
m.version = version
"""


def _run_with_fake(tmp_path: Path, package: str, fake: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``argv`` in a process whose importlib.metadata reports ``package`` at ``fake`` (a sitecustomize on
    PYTHONPATH), nothing uninstalled."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(FAKE_SITE.format(fake=fake, package=package), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.slow
def test_the_policy_pack_process_exits_with_one_line(tmp_path: Path) -> None:
    """The pack's process (policies/__main__.py, as the engine starts it) exits non-zero with one line and no
    traceback when pulumi is below its floor."""
    result = _run_with_fake(tmp_path, "pulumi", OLD_SDK, [PYTHON, "policies/__main__.py"])
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"pulumi {OLD_SDK} is installed; gb300 needs pulumi>=3.247.0 ({floors.package_floors()[0].needs}): {floors.FIX}"
    ]


@pytest.mark.slow
def test_the_installed_cli_exits_2_with_one_line(tmp_path: Path) -> None:
    """The installed `gb300` command with pulumi below its floor: exit 2, one line, no traceback."""
    result = _run_with_fake(tmp_path, "pulumi", OLD_SDK, [str(Path(PYTHON).parent / "gb300"), "plan", "--stack", "dev"])
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"gb300 plan: pulumi {OLD_SDK} is installed; gb300 needs pulumi>=3.247.0")
