"""gb300.io.quoting: every value put into a generated script or configuration is one quoted word or refused."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

from gb300.io import quoting
from gb300.node import templating
from gb300.paths import PACKAGE_DIR, REPO_ROOT

REFUSED = {
    "newline": "rack-01\ntouch /pwned",
    "carriage-return": "a\rb",
    "nul": "a\x00b",
    "escape": "\x1b[2Jcleared",
    "line-separator": "a\u2028b",
    "del": "a\x7fb",
    "c1": "a\x85b",
    "ten-megabytes": "x" * (10 * 1024 * 1024),
}
QUOTED = {
    "single-quote": "it's",
    "double-quotes": 'say "hi"',
    "command-substitution": "$(touch pwned)",
    "backticks": "`id`",
    "variables": "${HOME} $PATH",
    "glob-and-semicolon": "*; rm -rf / #",
    "empty": "",
    "unicode": "rack-ü-🚀",
}
# Modules that quote for a shell on their own, and why (the Slurm side is not this change's to move).
OWN_QUOTING = {
    "io/quoting.py": "the helper itself",
    "slurm/files.py": "Slurm's env files (the Slurm side's; the values are the typed config's, which refuses "
    "control characters)",
    "slurm/health.py": "the health check's env file (the Slurm side's, as above)",
}


@pytest.mark.parametrize("value", REFUSED.values(), ids=REFUSED.keys())
def test_control_characters_and_megabytes_are_refused_by_every_entry(value: str) -> None:
    """shell_word, comment and a template's printed value all refuse the value, naming what it was for and the
    character by its code point, never printing it raw."""
    for call in (
        lambda: quoting.shell_word(value, "rack name"),
        lambda: quoting.comment(value, "rack name"),
        lambda: templating.environment().from_string("NAME={{ v }}\n").render(v=value),
        lambda: templating.environment().from_string("NAME={{ v | shquote }}\n").render(v=value),
    ):
        with pytest.raises(quoting.UnsafeTextError) as refused:
            call()
        message = str(refused.value)
        assert re.search(r"U\+[0-9A-F]{4}|characters long", message), message
        assert len(message) < 300
        assert not set(message) & set("\n\r\x00\x1b\x7f\x85\u2028")


@pytest.mark.parametrize("value", QUOTED.values(), ids=QUOTED.keys())
def test_printable_hostile_text_is_one_word_bash_reads_back_exactly(value: str, tmp_path: Path) -> None:
    """Quotes, $(...), backticks, globs and separators become one word that bash hands back unchanged, and
    nothing it names runs."""
    script = f"set -euo pipefail\nprintf '%s' {quoting.shell_word(value, 'a test value')}\n"
    done = subprocess.run(["bash", "-c", script], capture_output=True, cwd=tmp_path, check=True)
    assert done.stdout.decode() == value
    assert list(tmp_path.iterdir()) == []


def test_every_template_is_rendered_by_the_checking_environment() -> None:
    """No module but gb300.node.templating makes a Jinja environment or template, so its finalize check covers
    every node file and Slurm file rendered from templates/."""
    makers = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            func = node.func if isinstance(node, ast.Call) else None
            if isinstance(func, ast.Attribute) and (
                func.attr == "from_string" or (func.attr in {"Environment", "Template"} and _named(func, "jinja2"))
            ):
                makers.append(f"{path.relative_to(PACKAGE_DIR)}:{node.lineno}")
    assert makers == ["node/templating.py:" + str(_line_of("jinja2.Environment("))]


def _named(func: ast.Attribute, module: str) -> bool:
    return isinstance(func.value, ast.Name) and func.value.id == module


def _line_of(text: str) -> int:
    source = (PACKAGE_DIR / "node" / "templating.py").read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(source, 1) if text in line)


def test_shell_quoting_has_one_home() -> None:
    """shlex.quote is called only by the helper (and the Slurm side's env files, listed with why)."""
    callers = {
        path.relative_to(PACKAGE_DIR).as_posix()
        for path in PACKAGE_DIR.rglob("*.py")
        if "shlex.quote(" in path.read_text(encoding="utf-8")
    }
    assert callers == set(OWN_QUOTING)


def test_every_download_on_a_node_stays_on_https() -> None:
    """Each curl in cloud-init/ that saves a download (-o) refuses any protocol but https, also after a
    redirect (--proto =https with --proto-redir =https, or no redirect at all); IMDS and local checks print."""
    downloads = []
    for path in sorted((REPO_ROOT / "cloud-init").rglob("*")):
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace").replace("\\\n", " ")
        for line in text.splitlines():
            if re.search(r"(^|[\s(])curl\s", line) and " -o " in line and not line.lstrip().startswith("#"):
                downloads.append((path.name, line.strip()))
    assert len(downloads) >= 3
    for name, line in downloads:
        assert "--proto =https" in line, (name, line)
        assert "--proto-redir =https" in line or "--max-redirs 0" in line, (name, line)
