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
# Modules that quote for a shell on their own, and why.
OWN_QUOTING = {"io/quoting.py": "the helper itself"}
# Modules that build an environment line with an f-string, and why.
NOT_ENV_LINES = {"io/quoting.py": "the helper itself"}


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
    """shlex.quote is called only by the helper: the Slurm env files (slurm.env, health.env) and payload.env go
    through quoting.env_lines too."""
    callers = {
        path.relative_to(PACKAGE_DIR).as_posix()
        for path in PACKAGE_DIR.rglob("*.py")
        if "shlex.quote(" in path.read_text(encoding="utf-8")
    }
    assert callers == set(OWN_QUOTING)


def _env_line_builders(source: str) -> list[int]:
    """Lines of ``source`` with an f-string holding a line of an environment file (``NAME={value}\\n`` or
    ``{key}={value}\\n``, alone or among other lines) whose value is not a ``shell_word(...)`` call: a line built
    by hand, not by the helper."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.JoinedStr):
            continue
        parts = node.values
        for i, value in enumerate(parts):
            if not isinstance(value, ast.FormattedValue) or _called(value.value) == "shell_word":
                continue
            if _opens_env_line(parts[:i]) and _line_ends(parts[i + 1 :]):
                found.append(node.lineno)
    return sorted(set(found))


def _opens_env_line(before: list[ast.expr]) -> bool:
    """The f-string's parts before a value begin its line with `NAME=` or `{key}=`."""
    text = ""
    for index in range(len(before) - 1, -1, -1):
        part = before[index]
        if not isinstance(part, ast.Constant):
            return (text == "=" and index == 0) or (text == "=" and _ends_line(before[index - 1]))
        text = str(part.value) + text
        if "\n" in text:
            return bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=", text.rsplit("\n", 1)[1]))
    return bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=", text))


def _ends_line(part: ast.expr) -> bool:
    return isinstance(part, ast.Constant) and str(part.value).endswith("\n")


def _line_ends(after: list[ast.expr]) -> bool:
    """A newline follows the value before any other value: the line is complete in this f-string."""
    for part in after:
        if not isinstance(part, ast.Constant):
            return False
        if "\n" in str(part.value):
            return str(part.value).startswith("\n")
    return False


def _called(expr: ast.expr) -> str:
    func = expr.func if isinstance(expr, ast.Call) else None
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def test_every_environment_file_generator_quotes_through_the_helper() -> None:
    """No module writes a `KEY=value` line with an f-string (listed exceptions say why they are no such line), so
    every environment file a node sources (slurm.env, health.env, payload.env, the templates' shquote) quotes each
    value through gb300.io.quoting; a new generator that pastes a value raw fails here."""
    builders = {
        path.relative_to(PACKAGE_DIR).as_posix(): lines
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
        if (lines := _env_line_builders(path.read_text(encoding="utf-8")))
    }
    assert set(builders) <= set(NOT_ENV_LINES), builders


def test_the_generator_scan_finds_a_hand_built_line() -> None:
    """The scan above catches the shapes it is for (a raw `NAME={v}` line, a `{k}={shlex.quote(v)}` line) and lets a
    shell_word line pass, so its silence on the package means something."""
    source = (
        'a = f"GB300_NAME={name}\\n"\n'
        'b = "".join(f"{k}={shlex.quote(v)}\\n" for k, v in x)\n'
        "c = f\"GB300_PATH={quoting.shell_word(p, 'what')}\\n\"\n"
        'd = ("# header\\n" f"GB300_A={a}\\n" f"GB300_B={quoting.shell_word(b, \'b\')}\\n")\n'
        'e = f"BlockName={name} Nodes={nodes}"\n'
    )
    assert _env_line_builders(source) == [1, 2, 4]


def test_env_lines_are_read_back_exactly_by_bash(tmp_path: Path) -> None:
    """Every hostile printable value in an env_lines file is sourced back unchanged and runs nothing; a control
    character or a key that is no variable name is refused."""
    values = {f"V{i}": value for i, value in enumerate(QUOTED.values())}
    env = tmp_path / "test.env"
    env.write_text(quoting.env_lines(values, "test.env"), encoding="utf-8")
    script = "set -euo pipefail\n. ./test.env\n" + "".join(f"printf '%s\\0' \"${k}\"\n" for k in values)
    done = subprocess.run(["bash", "-c", script], capture_output=True, cwd=tmp_path, check=True)
    assert done.stdout.decode().split("\0")[:-1] == list(values.values())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test.env"]
    with pytest.raises(quoting.UnsafeTextError, match=r"test\.env V"):
        quoting.env_lines({"V": REFUSED["newline"]}, "test.env")
    with pytest.raises(quoting.UnsafeTextError, match="not a shell variable name"):
        quoting.env_lines({"touch /pwned;X": "1"}, "test.env")


def _curl_calls() -> list[tuple[str, str]]:
    """Every curl command line (continuations joined) in cloud-init/ and templates/, comments left out."""
    calls = []
    for root in ("cloud-init", "templates"):
        for path in sorted((REPO_ROOT / root).rglob("*")):
            if not path.is_file():
                continue
            text = path.read_text(encoding="utf-8", errors="replace").replace("\\\n", " ")
            for line in text.splitlines():
                if re.search(r"(^|[\s($])curl\s", line) and not line.lstrip().startswith("#"):
                    calls.append((path.relative_to(REPO_ROOT).as_posix(), line.strip()))
    return calls


LOCAL = re.compile(r"-H '?Metadata: ?true'?|http://(127\.0\.0\.1|\$\{GB300_\w+_LISTEN\})[:/]")
"""What a curl without the https flags may talk to: IMDS (its Metadata header) or a local exporter."""


def test_every_curl_on_a_node_stays_on_https() -> None:
    """Each curl in cloud-init/ and templates/ refuses any protocol but https, also after a redirect (--proto =https
    with --proto-redir =https, or no redirect at all: the payload fetch, the munge key's vault read), unless it only
    asks IMDS or a local exporter over plain http and follows no redirect."""
    calls = _curl_calls()
    assert len(calls) >= 10
    assert {"cloud-init/slurm/gb300-munge-key", "cloud-init/lib/gb300-lib.sh"} <= {name for name, _ in calls}
    for name, line in calls:
        if LOCAL.search(line):
            assert not re.search(r"\s(-L|--location)\b|\s-\w*L\w*\s", line), (name, line)
            continue
        assert "--proto =https" in line, (name, line)
        assert "--proto-redir =https" in line or "--max-redirs 0" in line, (name, line)


# Patterns anchored with a bare `$` that parse text rather than vouch for it, and why that is safe.
DOLLAR_PARSERS = {
    "slurm/hostlist.py": "splits host names gb300 itself built or Slurm printed; it checks nothing",
    "slurm/options.py": "reads Slurm's own documented option list (`\\s*$` takes the line's end)",
    "cost/prices.py": "reads a price's unit of measure (`\\s*$` takes any trailing space)",
}


def _dollar_anchored(source: str) -> list[int]:
    """Lines of ``source`` with a regular expression literal that starts with ``^`` and ends with a bare ``$``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        func = node.func if isinstance(node, ast.Call) else None
        if not (isinstance(func, ast.Attribute) and _named(func, "re") and node.args):  # type: ignore[union-attr]
            continue
        first = node.args[0]  # type: ignore[union-attr]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            pattern = first.value
            if pattern.startswith("^") and pattern.endswith("$") and not pattern.endswith("\\$"):
                found.append(node.lineno)
    return found


def test_no_check_accepts_a_trailing_newline() -> None:
    """A pattern that vouches for a name, a host, a digest or a key ends in `\\Z`, not `$` (which also matches before
    a final newline, so `gpu-001\\n` passed as a host name and split a topology.conf line); a new check with `$`
    fails here, and the listed parsers say why theirs is safe."""
    anchored = {
        path.relative_to(PACKAGE_DIR).as_posix(): lines
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
        if (lines := _dollar_anchored(path.read_text(encoding="utf-8")))
    }
    assert set(anchored) <= set(DOLLAR_PARSERS), {k: v for k, v in anchored.items() if k not in DOLLAR_PARSERS}
    assert _dollar_anchored('import re\nA = re.compile(r"^[a-z]+$")\nB = re.compile(r"^[a-z]+\\Z")\n') == [2]
