"""The node roles are named once, in the tag contract (gb300.tags.ROLES, the values of its role tag): the
cloud-config fragments, the node registry, the tags and the plan all speak of the same roles."""

from __future__ import annotations

import ast

from gb300 import tags
from gb300.node import steps as node_steps
from gb300.node.roles import known_roles
from gb300.paths import PACKAGE_DIR


def test_each_role_has_its_fragment_and_each_fragment_a_role() -> None:
    """cloud-init/roles/ holds one fragment per role of gb300.tags.ROLES, and no other."""
    assert known_roles() == tuple(sorted(tags.ROLES))


def test_the_registry_runs_every_role_and_no_other() -> None:
    """Every role runs at least one step of the node registry, and no step names a role that does not exist."""
    named = {role for step in node_steps.STEPS for role in step.roles}
    assert named == set(tags.ROLES)


def test_the_head_is_tagged_with_its_role_name() -> None:
    """The head VM's gb300-role tag is the head's role name, which the plan and the rules read back."""
    assert tags.role_of(tags.head({}, "0" * 64)) == tags.ROLE_HEAD


def test_no_module_spells_a_role_name_itself() -> None:
    """The strings 'gpu-node' and 'head' appear as whole literals only in gb300.tags. Exempt: the network's subnet
    roles ('head' is also a subnet), the reserved pool names, the stack's own key paths (gb300:head.slurmdbd in
    gb300.config.models' cross-field checks; gb300:login.vmSize), gb300:hooks[].roles' Literal type, which must
    spell out the values a stack file writes, and a heal scenario's `head:` key that the scenario generator writes."""
    subnets = {
        "gb300.config.netplan",
        "gb300.components.network",
        "gb300.components.head",
        "gb300.components.login",  # the login VMs sit in the 'head' subnet
        "gb300.config.login",  # the stack's own key path, gb300:login.vmSize
        "gb300.config.hooks",  # gb300:hooks[].roles spells the roles as the stack file does (a Literal type)
        "gb300.heal.generate",  # a heal scenario's own `head:` key (the head's crashes), as the scenario file spells it
        "gb300.program",
        "gb300.config.checks",
        "gb300.config.models",
    }
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        module = ".".join(["gb300", *path.relative_to(PACKAGE_DIR).with_suffix("").parts])
        if module in ("gb300.tags", *subnets):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        found += [
            f"{module}:{node.lineno} {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in tags.ROLES and id(node) not in docstrings
        ]
    assert not found
