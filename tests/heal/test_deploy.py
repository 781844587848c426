"""The head's code in its payload is what ``gb300.heal.head`` imports, found from the source (gb300.heal.deploy)."""

from __future__ import annotations

import json
import subprocess
import sys

from gb300.heal import deploy
from gb300.paths import PACKAGE_DIR


def test_the_shipped_modules_are_exactly_what_the_head_imports() -> None:
    """Importing gb300.heal.head in a fresh interpreter loads exactly the gb300 modules the derivation ships: none
    missing (the head would fail at its first tick), none extra (a module that pulls in pulumi or PyYAML would)."""
    script = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(PACKAGE_DIR.parent)!r})\n"
        "import gb300.heal.head\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'gb300' or m.startswith('gb300.'))))\n"
    )
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout)
    files = {
        (f"{m.replace('.', '/')}/__init__.py" if (PACKAGE_DIR.parent / m.replace(".", "/")).is_dir() else
         f"{m.replace('.', '/')}.py").removeprefix("gb300/")
        for m in loaded
    }  # fmt: skip
    assert set(deploy.head_modules()) == files


def test_a_module_that_imports_nothing_is_found() -> None:
    """gb300.node.paths imports nothing and is reached only through the head's adapters: it is shipped."""
    assert "node/paths.py" in deploy.head_modules()
    assert "node/__init__.py" in deploy.head_modules()


def test_lazy_and_type_checking_imports_are_not_followed() -> None:
    """gb300.paths imports gb300.facts inside a function, gb300.heal.policy imports gb300.config under
    TYPE_CHECKING: neither runs on the head, so neither package is shipped."""
    shipped = deploy.head_modules()
    assert "paths.py" in shipped
    assert "heal/policy.py" in shipped
    assert not [m for m in shipped if m.startswith(("facts/", "config/", "components/"))]
