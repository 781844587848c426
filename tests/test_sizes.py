"""The package's shape (issue 37): every module of infra/gb300 under 500 lines, every function in it under 60 lines
of body, so each reads in sections small enough to review."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gb300.paths import PACKAGE_DIR

MAX_BODY = 60  # lines of a function's body, its docstring left out (issue 37)
MAX_MODULE = 500
MODULES = sorted(PACKAGE_DIR.rglob("*.py"))


def long_functions(path: Path) -> list[str]:
    """``name (N lines)`` for each function of ``path`` whose body, docstring left out, is over :data:`MAX_BODY`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            has_doc = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and len(body) > 1
            start = body[1].lineno if has_doc else body[0].lineno
            lines = (node.end_lineno or start) - start + 1
            if lines > MAX_BODY:
                out.append(f"{node.name} ({lines} lines)")
    return out


def test_the_measure_finds_a_long_function(tmp_path: Path) -> None:
    """A function of 61 body lines is reported; one of 60 (and its docstring) is not."""
    source = tmp_path / "m.py"
    body = "\n".join("    x = 1" for _ in range(MAX_BODY))
    source.write_text(f'def ok():\n    """Doc."""\n{body}\n\n\ndef long():\n{body}\n    x = 2\n')
    assert long_functions(source) == [f"long ({MAX_BODY + 1} lines)"]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_every_module_reads_in_small_sections(path: Path) -> None:
    """No function of gb300 is over 60 lines of body, and no module over 500 lines."""
    assert long_functions(path) == []
    assert len(path.read_text(encoding="utf-8").splitlines()) <= MAX_MODULE
