"""docs/rules.md documents every rule: id, level, what it checks, why, the fix, and the az command."""

from __future__ import annotations

import re

import pytest

from gb300 import paths, policy_pack, rules
from gb300.config import PolicySettings

DOC = (paths.REPO_ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
ALL_RULES = set(rules.BY_ID)
"""Every rule of the registry: resource, config and state rules."""


def _section(rule_id: str) -> str:
    match = re.search(rf"^### `{re.escape(rule_id)}`\n(.*?)(?=^#{{1,3}} |\Z)", DOC, re.DOTALL | re.MULTILINE)
    assert match, f"docs/rules.md has no section '### `{rule_id}`'"
    return match.group(1)


@pytest.mark.parametrize("rule_id", sorted(ALL_RULES))
def test_every_rule_is_documented(rule_id: str) -> None:
    """Each rule has a section with its level, what it checks, why, the fix and an `az` command."""
    section = _section(rule_id)
    for field in ("**Level**", "**Checks**", "**Why**", "**Fix**", "**By hand**"):
        assert field in section, f"{rule_id}: missing {field}"
    assert re.search(r"`az [a-z]", section), f"{rule_id}: no az command"


@pytest.mark.parametrize("rule_id", sorted(rules.RULES))
def test_every_rule_is_registered_in_both_front_ends(rule_id: str) -> None:
    """Each rule runs in the plan (RULES) and is a policy of the pack, with a one-line description."""
    names = {p.name: p for p in policy_pack.policies(PolicySettings)}
    assert rule_id in names
    assert names[rule_id].description == (rules.RULES[rule_id].__doc__ or "").strip().splitlines()[0]


def test_no_documented_rule_is_missing_from_the_code() -> None:
    """Every rule section in docs/rules.md names a rule that exists."""
    documented = set(re.findall(r"^### `([a-z0-9-]+)`", DOC, re.MULTILINE))
    assert documented == ALL_RULES
