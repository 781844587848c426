"""One package holds everything a node boots with, and the typed config sits below it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import gb300

PACKAGE = Path(gb300.__file__).parent


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (lazy imports inside functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_no_config_module_imports_the_node_package() -> None:
    offenders = {
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in sorted((PACKAGE / "config").rglob("*.py"))
        for name in _imports(path)
        if name == "gb300.node" or name.startswith("gb300.node.")
    }
    assert not offenders


def test_importing_and_parsing_config_loads_no_node_module() -> None:
    # A fresh interpreter: parse the reference stack (software overrides checked too) and list what got loaded.
    code = (
        "import sys, yaml\n"
        "from gb300 import paths\n"
        "from gb300.config import messages\n"
        "raw = yaml.safe_load((paths.REPO_ROOT / 'stacks/Pulumi.reference.yaml').read_text())['config']\n"
        "messages.parse({k.removeprefix('gb300:'): v for k, v in raw.items() if k.startswith('gb300:')})\n"
        "print(sorted(m for m in sys.modules if m == 'gb300.node' or m.startswith('gb300.node.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_there_is_one_node_package() -> None:
    assert not (PACKAGE / "bootstrap").exists()
    assert (PACKAGE / "node" / "bundle.py").is_file()
    assert (PACKAGE / "node" / "registry.py").is_file()
    assert (PACKAGE / "node" / "payload.py").is_file()


def test_rendering_every_node_file_imports_no_pulumi_module() -> None:
    """Rendering every role's files of the reference stack (rows, steps, Slurm, custom data) loads no Pulumi module."""
    code = (
        "import sys, yaml\n"
        "from gb300 import paths\n"
        "from gb300.config import messages\n"
        "from gb300.node.custom_data import render_stack\n"
        "raw = yaml.safe_load((paths.REPO_ROOT / 'stacks/Pulumi.reference.yaml').read_text())['config']\n"
        "cfg = messages.parse({k.removeprefix('gb300:'): v for k, v in raw.items() if k.startswith('gb300:')})\n"
        "assert render_stack(cfg)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pulumi' or m.startswith('pulumi_')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
