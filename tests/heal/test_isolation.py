"""The loop never reads the truth: its modules cannot reach the simulator, and its ports carry no truth."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gb300.heal

LOOP_MODULES = (
    "loop", "case", "evidence", "gate_checks", "nccl", "policy", "ports", "azure_calls", "state", "head", "head_slurm",
    "head_host",
)  # fmt: skip
HEAL = Path(gb300.heal.__file__).parent


@pytest.mark.parametrize("name", LOOP_MODULES)
def test_loop_modules_never_import_the_simulated_world(name: str) -> None:
    """The loop's modules import neither the simulator nor the scenario file, and name no truth."""
    tree = ast.parse((HEAL / f"{name}.py").read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
            imported.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    forbidden = {"gb300.heal.sim", "gb300.heal.scenario", "gb300.heal.generate"}
    assert not imported & forbidden
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
    }
    assert not names & {"truth", "faults", "cured_by", "_fault"}
