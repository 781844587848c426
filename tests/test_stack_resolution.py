"""``--stack NAME`` reads the stack file of the Pulumi project the user stands in (its Pulumi.yaml and
stackConfigDir), never the installed package's checkout; one argument block serves every command that takes it."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from gb300 import cli, paths
from gb300.commands.plan import resolve_stack


def _project(root: Path, *, config_dir: str | None, cluster: str = "elsewhere") -> Path:
    """A Pulumi project holding a copy of the dev stack under another cluster name."""
    root.mkdir(parents=True, exist_ok=True)
    project: dict[str, object] = {"name": "gb300", "runtime": "python", "main": "infra/"}
    if config_dir is not None:
        project["stackConfigDir"] = config_dir
    (root / "Pulumi.yaml").write_text(yaml.safe_dump(project), encoding="utf-8")
    doc = yaml.safe_load(paths.stack_file("dev").read_text(encoding="utf-8"))
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
    assert str(paths.stack_file("dev")) not in out


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
    ],
    ids=["plan", "rollout", "migrate-racks"],
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


def test_unknown_stack_lists_the_projects_stacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stack the project does not have is exit 2 naming the file looked for and the project's own stacks."""
    _project(tmp_path / "p", config_dir="cfg")
    monkeypatch.chdir(tmp_path / "p")
    assert cli.main(["plan", "--stack", "prod"]) == 2
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
