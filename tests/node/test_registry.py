"""The node path contract: every gb300 path a node script names is one a registry row places (or one a step makes
at boot, listed below with the script that makes it), and every node path literal is spelled in one Python module.

As tests/test_tags.py holds the node scripts to the tag contract (gb300.tags), this holds them to the node registry
(gb300.node.registry): a script that reads ``/etc/gb300/x.env`` while no row writes it fails here, naming the
script and the line, before any node boots without the file.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from gb300 import config
from gb300 import tags as gb300_tags
from gb300.node import context as node_context
from gb300.node import registry, sources
from gb300.node import steps as node_steps
from gb300.node.bundle import bundle_for
from gb300.node.row import KINDS
from gb300.paths import CLOUD_INIT_DIR, PACKAGE_DIR, REPO_ROOT

NODE_PATH = re.compile(
    r"/(?:etc/gb300|usr/local/lib/gb300|opt/gb300|usr/local/sbin/gb300-[a-z0-9-]+)(?:/[A-Za-z0-9_.@-]*[A-Za-z0-9_@-])*"
)
"""A path of gb300's own on a node: its settings, its library, its trees under /opt, its tools."""
MADE_AT_BOOT = {
    "/etc/gb300/dcgm-exporter.env": "scripts/85-dcgm-exporter.sh",
    "/etc/gb300/prometheus-agent.yml": "scripts/87-prometheus-agent.sh",  # from the row's prometheus-agent.yml.in
    "/etc/gb300/prometheus/targets": "scripts/87-prometheus-agent.sh",
    "/opt/gb300/heal/venv": "slurm/gb300-heal-setup",
    "/etc/gb300/slurmd-register.env": "slurm/gb300-slurmd-setup",  # the registration the boot gate drains from
}
"""Paths no row places because a step writes them on the node, and the script that does."""
HEAD, GPU = gb300_tags.ROLE_HEAD, gb300_tags.ROLE_GPU_NODE
ROLE_ID = (
    "/subscriptions/00000000-0000-0000-0000-000000000000/providers/Microsoft.Authorization/roleDefinitions/"
    "11111111-1111-1111-1111-111111111111"
)
LITERAL = re.compile(r"[\"'f]/(?:etc|usr|opt|var)/[A-Za-z0-9_./{}-]+")
"""A node path spelled in Python (the issue's grep)."""


def _scripts() -> list[Path]:
    return [p for p in sorted(CLOUD_INIT_DIR.rglob("*")) if p.is_file() and p.suffix not in (".yaml", ".md")]


def unplaced(text: str, placed: set[str]) -> list[tuple[int, str]]:
    """(line, path) of every gb300 node path ``text`` names that is neither placed nor a folder of a placed path."""
    folders = {"/".join(p.split("/")[:i]) for p in placed for i in range(2, p.count("/") + 1)}
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        found += [(number, m.group(0)) for m in NODE_PATH.finditer(line) if m.group(0) not in placed | folders]
    return found


@pytest.fixture(scope="module")
def placed(reference_raw: dict[str, Any]) -> set[str]:
    """Every path the reference stack's head, GPU nodes and login nodes carry, with the remediation loop, accounting, an
    account, login nodes and hooks on (every row)."""
    raw = copy.deepcopy(reference_raw)
    raw["remediation"] = {**raw.get("remediation", {}), "enabled": True, "roleDefinitionId": ROLE_ID}
    raw["head"] = {**raw.get("head", {}), "slurmdbd": True}
    raw["slurm"] = {**raw.get("slurm", {}), "accounts": [{"name": "team", "users": ["alice"]}]}
    raw["access"] = {**raw["access"], "entra": {"userGroups": ["3f2504e0-4f89-41d3-9a0c-0305e82c3301"]}}
    raw["login"] = {"count": 1}
    raw["hooks"] = [
        {
            "name": "warm",
            "script": "examples/hooks/warm-cache.sh",
            "point": "beforeSlurm",
            "roles": ["head", "gpu-node"],
        },
        {"name": "agent", "script": "examples/hooks/site-agent.sh", "point": "afterHealthGate"},
    ]
    cfg = config.parse(raw)
    paths: set[str] = set()
    roles = ((gb300_tags.ROLE_HEAD, None), (gb300_tags.ROLE_GPU_NODE, cfg.gpu_pools[0]), (gb300_tags.ROLE_LOGIN, None))
    for role, pool in roles:
        bundle = bundle_for(node_context.build(cfg, role, pool))
        paths |= {f.path for f in (*bundle.files, *bundle.fetch)}
    return paths


def test_a_script_naming_a_path_no_row_places_is_named_with_its_line() -> None:
    """The check reports the unplaced path and its line; a placed path and its folders pass."""
    text = '#!/usr/bin/env bash\n. "${GB300_ROOT:-}/etc/gb300/slurm.env"\ncat /etc/gb300/nothing.env\nls /etc/gb300\n'
    assert unplaced(text, {"/etc/gb300/slurm.env"}) == [(3, "/etc/gb300/nothing.env")]


def test_every_path_a_node_script_names_is_placed_by_a_row(placed: set[str]) -> None:
    """No script under cloud-init/ reads a gb300 path that no registry row places (or that no step makes)."""
    missing = {
        f"cloud-init/{script.relative_to(CLOUD_INIT_DIR)}:{line}": path
        for script in _scripts()
        for line, path in unplaced(script.read_text(encoding="utf-8"), placed | set(MADE_AT_BOOT))
    }
    assert missing == {}


def test_paths_made_at_boot_are_made_by_their_script(placed: set[str]) -> None:
    """Each path listed as made at boot is named by the script said to make it, and no row places it too."""
    for path, script in MADE_AT_BOOT.items():
        assert path in (CLOUD_INIT_DIR / script).read_text(encoding="utf-8"), script
        assert path not in placed


def test_the_reference_stack_with_everything_on_carries_every_row(placed: set[str]) -> None:
    """Every single-path row of the registry is carried by some role of the reference stack (so the checks above
    see the whole registry)."""
    rows = [r for r in registry.ROWS if not r.each]
    assert rows
    assert [r.destination for r in rows if r.destination not in placed] == []


def test_each_node_path_literal_is_spelled_in_one_module() -> None:
    """Outside gb300.node.paths and the registry no module spells a node path; no literal is spelled twice.

    One exception: a pinned repository's keyring path is a fact of gb300.facts.software, which the typed config
    reads, and the config sits below the node package (tests/node/test_node_package.py)."""
    homes = {
        PACKAGE_DIR / "node" / "paths.py",
        PACKAGE_DIR / "node" / "registry.py",
        PACKAGE_DIR / "facts" / "software.py",
    }
    spelled: dict[str, set[str]] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        for match in LITERAL.finditer(path.read_text(encoding="utf-8")):
            spelled.setdefault(match.group(0)[1:], set()).add(str(path.relative_to(PACKAGE_DIR)))
    assert {p: m for p, m in spelled.items() if len(m) > 1} == {}
    assert {p: m for p, m in spelled.items() if not {PACKAGE_DIR / x for x in m} <= homes} == {}


def test_every_row_names_a_real_owner_step_and_resolvable_functions() -> None:
    """Each row's owner step is a step of the registry whose roles include the row's (or empty, for a tool run by
    hand), and each condition, name list and content function it names exists: a row is data, checked here."""
    steps = {s.name: s for s in node_steps.STEPS}
    for row in (*registry.ROWS, *registry.step_rows(node_steps.STEPS)):
        assert row.kind in KINDS, row
        assert row.step == "" or row.step in steps, row
        if row.step:
            assert set(row.roles) <= set(steps[row.step].roles), row
        assert row.when == "" or row.when in sources.CONDITIONS, row
        assert row.each == "" or row.each in sources.NAMES, row
        assert row.kind != "content" or row.source in sources.CONTENT, row
        assert ("{name}" in row.destination) == bool(row.each), row


def test_the_docs_table_lists_every_row() -> None:
    """docs/node-steps.md's node-file table has one line per row, step scripts included (generated by gb300 docs)."""
    table = (REPO_ROOT / "docs" / "node-steps.md").read_text(encoding="utf-8")
    for row in (*registry.ROWS, *registry.step_rows(node_steps.STEPS)):
        assert f"| {row.kind} | `{row.source}` | `{row.destination}`" in table, row
