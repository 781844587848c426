"""``--stack NAME`` reads the stack file of the Pulumi project the user stands in (its Pulumi.yaml and
stackConfigDir), never the installed package's checkout; one argument block serves every command that takes it."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
import yaml

from gb300 import cli, paths
from gb300.commands.plan import resolve_stack
from gb300.config import stacks as gb300_stacks
from gb300.errors import UsageError
from gb300.rules import identity

EXPECT = "head=" + "0" * 64


def _project(root: Path, *, config_dir: str | None, cluster: str = "elsewhere") -> Path:
    """A Pulumi project holding a copy of the dev stack under another cluster name."""
    root.mkdir(parents=True, exist_ok=True)
    project: dict[str, object] = {"name": "gb300", "runtime": "python", "main": "infra/"}
    if config_dir is not None:
        project["stackConfigDir"] = config_dir
    (root / "Pulumi.yaml").write_text(yaml.safe_dump(project), encoding="utf-8")
    doc = yaml.safe_load(gb300_stacks.stack_file("dev").read_text(encoding="utf-8"))
    doc["config"]["gb300:cluster"]["name"] = cluster
    folder = root / config_dir if config_dir else root
    folder.mkdir(parents=True, exist_ok=True)
    stack = folder / "Pulumi.dev.yaml"
    stack.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return stack


def test_plan_stack_in_another_project_plans_that_projects_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gb300 plan --stack dev` run in another project's subdirectory plans that project's stacks/Pulumi.dev.yaml
    (its stackConfigDir), not the checkout gb300 is installed from."""
    stack = _project(tmp_path / "clone", config_dir="stacks")
    (tmp_path / "clone" / "docs").mkdir()
    monkeypatch.chdir(tmp_path / "clone" / "docs")
    assert cli.main(["plan", "--stack", "dev"]) == 0
    out = capsys.readouterr().out
    assert f"({stack.resolve()})" in out
    assert "cluster elsewhere in" in out
    assert str(gb300_stacks.stack_file("dev")) not in out


def test_stack_files_next_to_pulumi_yaml_without_stack_config_dir(tmp_path: Path) -> None:
    """Without stackConfigDir, Pulumi.<stack>.yaml sits beside Pulumi.yaml, as the Pulumi CLI expects."""
    stack = _project(tmp_path / "p", config_dir=None)
    args = argparse.Namespace(stack="dev", stack_file=None)
    assert resolve_stack(args, cwd=tmp_path / "p") == ("dev", stack.resolve())


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--stack", "dev"],
        ["rollout", "--stack", "dev", "--state", "state.json", "--azure", "live"],
        ["migrate-racks", "--stack", "dev", "--state", "state.json", "--out", "out"],
        [
            "payload",
            "publish",
            "--stack",
            "dev",
            "--account-url",
            "https://a.blob.core.windows.net",
            "--expect",
            EXPECT,
        ],
    ],
    ids=["plan", "rollout", "migrate-racks", "payload-publish"],
)
def test_no_project_around_the_current_directory_exits_two(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Outside any Pulumi project, --stack names no file: exit 2 saying where it looked and what to use instead."""
    (tmp_path / "state.json").write_text('{"version": 3, "deployment": {"resources": []}}')
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"no Pulumi.yaml in {tmp_path.resolve()} or a directory above it" in err
    assert "--stack-file" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--stack", "prod"],
        [
            "payload",
            "publish",
            "--stack",
            "prod",
            "--account-url",
            "https://a.blob.core.windows.net",
            "--expect",
            EXPECT,
        ],
    ],
    ids=["plan", "payload-publish"],
)
def test_unknown_stack_lists_the_projects_stacks(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stack the project does not have is exit 2 naming the file looked for and the project's own stacks, for the
    plan and for the upload `pulumi up` runs alike."""
    _project(tmp_path / "p", config_dir="cfg")
    monkeypatch.chdir(tmp_path / "p")
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Pulumi.prod.yaml does not exist (stacks: dev)" in err


def test_every_stack_command_shares_one_argument_block() -> None:
    """plan, rollout and migrate-racks take --stack/--stack-file the same way (one helper, one help text)."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = set()
    for name in ("plan", "rollout", "migrate-racks"):
        stack = next(a for a in sub.choices[name]._actions if "--stack" in a.option_strings)
        helps.add((stack.help or "").partition("the stack NAME")[2])
    assert len(helps) == 1
    assert "stackConfigDir" in helps.pop()


@pytest.mark.parametrize(
    ("file", "stack"),
    [
        ("Pulumi.dev.yaml", "dev"),
        ("Pulumi.dev.yml", "dev"),
        ("Pulumi.prod.eu.yaml", "prod.eu"),
        ("Pulumi.yaml.yml", "yaml"),
    ],
)
def test_a_stack_files_name_gives_its_stack(file: str, stack: str, tmp_path: Path) -> None:
    """`--stack-file` names the stack as Pulumi does: the file name less `Pulumi.` and `.yaml` or `.yml`."""
    path = tmp_path / file
    path.write_text("config: {}\n", encoding="utf-8")
    assert gb300_stacks.name_of(path) == stack
    assert gb300_stacks.resolve(None, path) == (stack, path)


def test_a_missing_stack_file_exits_two(tmp_path: Path) -> None:
    """`--stack-file` naming no file is a usage error that names the file."""
    with pytest.raises(UsageError, match=r"stack file .*Pulumi\.gone\.yaml does not exist"):
        gb300_stacks.resolve(None, tmp_path / "Pulumi.gone.yaml")


def test_a_yml_project_has_yml_stacks_and_is_no_stack_itself(tmp_path: Path) -> None:
    """With Pulumi.yml, the stacks are Pulumi.<stack>.yml beside it: the project file and a stray .yaml are none of
    them; the other stacks' identities (the stack-identity rule) are read from the same files."""
    (tmp_path / "Pulumi.yml").write_text("name: gb300\nruntime: python\n", encoding="utf-8")
    for name in ("Pulumi.a.yml", "Pulumi.b.yml", "Pulumi.stray.yaml", "Pulumi.c.txt"):
        cluster = name.split(".")[1]
        (tmp_path / name).write_text(f"config:\n  gb300:cluster: {{name: {cluster}}}\n", encoding="utf-8")
    project = gb300_stacks.find_project(tmp_path / "sub" / "dir")
    assert project == tmp_path / "Pulumi.yml"
    assert gb300_stacks.stack_names(project) == ["a", "b"]
    assert gb300_stacks.stack_file("b", project) == tmp_path / "Pulumi.b.yml"
    assert gb300_stacks.resolve("b", None, cwd=tmp_path) == ("b", tmp_path / "Pulumi.b.yml")
    others = identity.siblings(tmp_path / "Pulumi.a.yml")
    assert [(o.stack, o.cluster_name) for o in others] == [("b", "b"), ("stray", "stray")]


def test_the_checkouts_stacks_are_its_projects() -> None:
    """The program's upload command (gb300.components.node_payload) and `--stack` in the checkout name the same file:
    the checkout's Pulumi.yaml, its stackConfigDir, Pulumi.<stack>.yaml."""
    assert gb300_stacks.stack_file("dev") == paths.REPO_ROOT / "stacks" / "Pulumi.dev.yaml"
    assert gb300_stacks.resolve("dev", None, cwd=paths.REPO_ROOT / "docs") == ("dev", gb300_stacks.stack_file("dev"))
    assert {"dev", "reference", "landingzone"} <= set(gb300_stacks.stack_names())


LOOKUPS = [
    re.compile(r"\.glob\([^)]*Pulumi\."),  # listing stack files
    re.compile(r"removeprefix\(\s*[\"']Pulumi\."),  # a stack's name from its file
    re.compile(r"len\(\s*[\"']Pulumi\.[\"']\s*\)"),
    re.compile(r"f[\"'][^\"']*Pulumi\.\{[^}]+\}\{"),  # a stack file's name from its stack and suffix
    re.compile(r"def (find_project|stacks_dir|resolve_stack_file)\b"),
    re.compile(r"PROJECT_FILES\s*="),
]


def test_one_module_resolves_stack_files() -> None:
    """No module of gb300 but gb300.config.stacks lists stack files, finds a project or names a stack from its
    file: the lookup has one home."""
    home = paths.PACKAGE_DIR / "config" / "stacks.py"
    found = []
    for path in sorted(paths.PACKAGE_DIR.rglob("*.py")):
        if path == home:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if any(p.search(line) for p in LOOKUPS):
                found.append(f"{path.relative_to(paths.PACKAGE_DIR)}:{number}: {line.strip()}")
    assert not found
    assert any(p.search(line) for p in LOOKUPS for line in home.read_text(encoding="utf-8").splitlines())
