"""The README is the user's manual: its Quickstart, config reference and CI entry point stay true."""

from __future__ import annotations

import re
import shlex

import pytest

from gb300 import config, paths

README = (paths.REPO_ROOT / "README.md").read_text(encoding="utf-8")


def _quickstart_commands() -> list[str]:
    section = README.split("## Quickstart", 1)[1]
    block = re.search(r"```[a-z]*\n(.*?)```", section, re.DOTALL)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def test_quickstart_has_exactly_two_commands() -> None:
    """The Quickstart's first code block holds two commands: the plan and the tests."""
    commands = _quickstart_commands()
    assert len(commands) == 2
    assert "plan" in commands[0]
    assert "test" in commands[1]


def test_ci_runs_the_readme_test_command() -> None:
    """``.ci/run`` runs exactly the README's test command, so CI and users test the same way."""
    ci = (paths.REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_command = _quickstart_commands()[1]
    ci_lines = [line.strip() for line in ci.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert any(shlex.split(line) == shlex.split(test_command) for line in ci_lines)


@pytest.mark.parametrize("key", config.key_paths())
def test_every_config_key_is_documented(key: str) -> None:
    """Each key the schema accepts has a row in the README's configuration reference."""
    assert f"| `{key}` |" in README
