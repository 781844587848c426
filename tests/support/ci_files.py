"""Read the CI definitions (GitHub Actions, Azure DevOps) and the commands their scripts run.

Scripts are split into simple commands with `shlex` (punctuation-aware), after replacing workflow
expressions (`${{ ... }}`) and Azure DevOps macros (`$(Name.Part)`) by placeholders. That is enough
for the scripts we write: one command per line or per `;`/`&&`/`|`, `if`/`case` heads, `$(...)`
substitutions, redirections. It is not a shell; a construct it cannot read fails a test loudly
rather than hiding a command.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
GITHUB_WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
GITHUB_ACTIONS = sorted((ROOT / ".github" / "actions").glob("*/action.yml"))
AZURE_PIPELINES = [ROOT / "azure-pipelines.yml", *sorted((ROOT / ".azure-pipelines").glob("*.yml"))]
PULUMI_CLI = ROOT / "tests" / "fixtures" / "pulumi-cli.yaml"

PLACEHOLDER = "__CI_VALUE__"
_EXPRESSION = re.compile(r"\$\{\{.*?\}\}", re.DOTALL)
_ADO_MACRO = re.compile(r"\$\([A-Za-z_][\w.]*\)")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_CONTROL = {";", ";;", "&", "&&", "|", "||", "(", ")"}
_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "time"}
# Keys whose string value is a shell script, per file family. (`script:` in GitHub is JavaScript.)
SCRIPT_KEYS = {"github": {"run"}, "azure": {"bash", "script", "inlineScript"}}


def stacks_in_repo() -> set[str]:
    """Stack names defined by stacks/Pulumi.<name>.yaml."""
    # Imported here: gb300's config package takes seconds to import on a loaded machine, and most readers of the CI
    # files never need it.
    from gb300.config import stacks as gb300_stacks  # noqa: PLC0415

    return set(gb300_stacks.stack_names(ROOT / "Pulumi.yaml"))


def load(path: Path) -> dict[str, Any]:
    """A CI file as data; YAML 1.1 reads the key `on` as True, so it is renamed back."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path}: not a mapping"
    if True in data:
        data["on"] = data.pop(True)
    return data


def family(path: Path) -> str:
    """'github' or 'azure'."""
    return "github" if ".github" in path.parts else "azure"


def scripts(node: Any, keys: set[str]) -> Iterator[str]:
    """Every string under one of `keys`, anywhere in the document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in keys and isinstance(value, str):
                yield value
            else:
                yield from scripts(value, keys)
    elif isinstance(node, list):
        for item in node:
            yield from scripts(item, keys)


def commands(script: str) -> list[list[str]]:
    """The simple commands of a script, as argument lists (placeholders for CI values)."""
    text = _ADO_MACRO.sub(PLACEHOLDER, _EXPRESSION.sub(PLACEHOLDER, script)).replace("\\\n", " ")
    found: list[list[str]] = []
    for line in text.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
        current: list[str] = []
        skip_target = False
        for token in [*tokens, ";"]:
            if skip_target:
                skip_target = False
                continue
            if token in _CONTROL:
                if current:
                    found.append(current)
                current = []
            elif set(token) <= set("<>&") and ("<" in token or ">" in token):
                if current and current[-1].isdigit():  # the `2` of `2>&1`
                    current.pop()
                skip_target = True
            else:
                current.append(token)
    return [c for c in (_strip_prefix(c) for c in found) if c]


def _strip_prefix(words: list[str]) -> list[str]:
    i = 0
    while i < len(words) and (words[i] in _KEYWORDS or _ASSIGNMENT.match(words[i])):
        i += 1
    return words[i:]


@dataclass(frozen=True)
class Invocation:
    """One command a CI file runs."""

    path: Path
    argv: tuple[str, ...]

    @property
    def program(self) -> str:
        """The command's base name (`.venv/bin/gb300` -> `gb300`)."""
        return Path(self.argv[0]).name

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}: {' '.join(self.argv)}"


def invocations(program: str | None = None) -> list[Invocation]:
    """Every command run by every CI file (optionally only those of `program`)."""
    found = []
    for path in [*GITHUB_WORKFLOWS, *GITHUB_ACTIONS, *AZURE_PIPELINES]:
        for script in scripts(load(path), SCRIPT_KEYS[family(path)]):
            for argv in commands(script):
                inv = Invocation(path, tuple(argv))
                if program is None or inv.program == program:
                    found.append(inv)
    return found


def is_literal(value: str) -> bool:
    """True when a word is fixed text, not a shell variable or CI value."""
    return "$" not in value and PLACEHOLDER not in value


@dataclass(frozen=True)
class PulumiCall:
    """A parsed `pulumi` command line."""

    command: str
    flags: dict[str, str | None]
    problems: tuple[str, ...]


def parse_pulumi(argv: tuple[str, ...], spec: dict[str, Any]) -> PulumiCall:
    """Check `pulumi ...` against tests/fixtures/pulumi-cli.yaml: the command, each flag, the arguments."""
    words = list(argv[1:])
    command = next(
        (" ".join(words[:n]) for n in (2, 1) if " ".join(words[:n]) in spec["commands"]),
        None,
    )
    if command is None:
        return PulumiCall("", {}, (f"unknown command {' '.join(words[:2])!r}",))
    entry = spec["commands"][command]
    known: dict[str, str] = {**spec["global_flags"], **entry["flags"]}
    rest = words[len(command.split()) :]
    flags: dict[str, str | None] = {}
    problems: list[str] = []
    positional = 0
    i = 0
    while i < len(rest):
        word = rest[i]
        i += 1
        if not word.startswith("-"):
            positional += 1
            continue
        name, has_value, value = word.partition("=")
        kind = known.get(name)
        if kind is not None and kind.startswith("-"):  # a short alias names its long flag
            name, kind = kind, known[kind]
        if kind is None:
            problems.append(f"unknown flag {name!r} for 'pulumi {command}'")
        elif kind == "value" and not has_value:
            if i >= len(rest):
                problems.append(f"flag {name!r} needs a value")
            else:
                flags[name] = rest[i]
                i += 1
        else:
            flags[name] = value if has_value else None
    if positional > entry["args"]:
        problems.append(f"'pulumi {command}' takes at most {entry['args']} argument(s), got {positional}")
    return PulumiCall(command, flags, tuple(problems))


def jobs(path: Path) -> dict[str, dict[str, Any]]:
    """A GitHub workflow's jobs by id."""
    result = load(path).get("jobs", {})
    assert isinstance(result, dict)
    return result


def job_scripts(job: dict[str, Any]) -> list[str]:
    """The `run:` scripts of a GitHub job's steps."""
    return [s["run"] for s in job.get("steps", []) if isinstance(s.get("run"), str)]


def job_runs(job: dict[str, Any], program: str) -> list[tuple[str, ...]]:
    """The commands of `program` that a GitHub job runs."""
    return [tuple(argv) for script in job_scripts(job) for argv in commands(script) if Path(argv[0]).name == program]
