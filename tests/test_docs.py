"""The README's Quickstart and CI entry point stay true, and docs/configuration.md documents every config key."""

from __future__ import annotations

import re
import shlex

import pytest

from gb300 import config, paths
from gb300.commands import docs

README = (paths.REPO_ROOT / "README.md").read_text(encoding="utf-8")
CONFIGURATION = (paths.REPO_ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
README_MAX_LINES = 400


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
    """Each key the schema accepts has a row with a description in docs/configuration.md."""
    row = next((line for line in CONFIGURATION.splitlines() if line.startswith(f"| `{key}` |")), None)
    assert row is not None, f"docs/configuration.md has no row for {key}"
    description = row.rstrip(" |").rsplit(" | ", 1)[-1]
    assert len(description) > 10, f"{key}: no description (give the field a docstring in gb300.config)"


def test_every_schema_key_has_a_description() -> None:
    """Every key of `gb300 schema` carries a description for editors, from its field's docstring."""
    missing = [key for key in docs.config_keys() if not key.description]
    assert missing == []


def test_the_readme_stays_short() -> None:
    """README.md holds the pitch, the Quickstart, deploying and links; everything else lives in docs/."""
    assert len(README.splitlines()) <= README_MAX_LINES
