"""What the docs claim about gb300 itself, checked against the code: ``gb300 docs --check``.

Read from README.md and docs/*.md, in code spans and fenced blocks:

* every ``gb300 <command> [<action>]`` names a command the parser has, and every ``--flag`` after it is an option
  of that command (a flag of another command, or one that was renamed, is a problem);
* every ``gb300:<key>`` names a stack config key (or a key under one): ``gb300:gpuPools[0].racks`` is
  ``gb300:gpuPools[].racks``;
* every "`--flag ...` (default X)" says the default the parser has, for a flag whose default is the same in every
  command that has it.

Each problem is one line ``<file>:<line>: <what>``. Whether a documented command *runs* is tests/test_doc_commands.py's.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gb300 import config

_SPAN = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
# A command line: at the start (after a prompt or .venv/bin/), or after $( | && ; in a shell line.
_COMMAND = re.compile(r"(?:^\s*(?:\$ |> )?|\$\(|[|;&]\s*)(?:\.venv/bin/)?gb300 ([a-z][a-z-]*(?: [^|;&)#]*)?)")
# A key: not a Pulumi type token (gb300:compute:Rack).
_KEY = re.compile(r"\bgb300:([a-zA-Z][\w.\[\]]*[\w\]])(?![\w.\[\]]*:)")
_DEFAULT = re.compile(r"`(--[a-z][a-z-]*)[^`]*` \(default:? `?([^)`,;]+)`?[),;]")
# Keys whose own keys are free (component names, tag names): anything under them is a key.
_FREE_MAPS = ("software", "cluster.tags")


@dataclass(frozen=True)
class Problem:
    """One false claim: where, and what."""

    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


def doc_files(root: Path) -> list[Path]:
    """README.md and docs/*.md under ``root``."""
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]


def _snippets(text: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of each code span and each line of a fenced block."""
    fenced: set[int] = set()
    for block in _FENCE.finditer(text):
        first = text.count("\n", 0, block.start(1)) + 1
        lines = block.group(1).split("\n")
        joined = ""
        for i, line in enumerate(lines):
            fenced.add(first + i)
            joined += line.rstrip("\\").rstrip() + " " if line.rstrip().endswith("\\") else line
            if not line.rstrip().endswith("\\"):
                yield first + i, joined
                joined = ""
    for number, line in enumerate(text.split("\n"), start=1):
        if number in fenced:
            continue
        for span in _SPAN.finditer(line):
            yield number, span.group(1)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def _words(command: str) -> list[str]:
    command = re.split(r"\s+#", command, maxsplit=1)[0]
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def check_command(parser: argparse.ArgumentParser, command: str) -> str | None:
    """What is wrong with ``gb300 <command>`` (its words after ``gb300``), or None."""
    words = _words(command)
    current, prog = parser, "gb300"
    for word in words:
        if word.startswith("-"):
            flag = word.split("=", 1)[0]
            if flag in {"-h", "--help"} or re.fullmatch(r"--?[A-Za-z][\w-]*", flag) is None:
                continue
            if flag not in _options(current):
                return f"`{prog}` has no option {flag}"
            continue
        choices = _subparsers(current)
        if choices and word not in choices:
            if re.fullmatch(r"[a-z][a-z-]*", word) is None:
                return None  # a placeholder (COMMAND, <cmd>, ...) rather than a command name
            return f"`{prog}` has no command {word!r} (commands: {', '.join(sorted(choices))})"
        if choices:
            current, prog = choices[word], f"{prog} {word}"
    return None


def _defaults(parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    """Each long option -> the defaults it has across every command (as text)."""
    found: dict[str, set[str]] = {}

    def visit(p: argparse.ArgumentParser) -> None:
        for action in p._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and action.default not in (None, False, argparse.SUPPRESS):
                    value = action.default
                    text = f"{value:g}" if isinstance(value, float) else str(value)
                    found.setdefault(flag, set()).add(text)
        for sub in _subparsers(p).values():
            visit(sub)

    visit(parser)
    return found


def _known_key(key: str, known: set[str]) -> bool:
    path = re.sub(r"\[\w*\]", "[]", key).rstrip(".").removesuffix("[]")
    if any(path.startswith(m + ".") for m in _FREE_MAPS):
        return True
    return path in known or any(k.startswith(path + ".") or k.startswith(path + "[") for k in known)


def check_docs(root: Path, parser: argparse.ArgumentParser) -> list[Problem]:
    """Every false claim of the docs under ``root`` about the commands, flags, defaults and keys of ``parser`` and
    the stack config."""
    known = {k.removeprefix(f"{config.NAMESPACE}:") for k in config.key_paths()}
    defaults = _defaults(parser)
    commands = set(_subparsers(parser))
    problems: list[Problem] = []
    for path in doc_files(root):
        problems += _file_problems(path, root, parser=parser, known=known, defaults=defaults, commands=commands)
    return problems


def _file_problems(
    path: Path,
    root: Path,
    *,
    parser: argparse.ArgumentParser,
    known: set[str],
    defaults: dict[str, set[str]],
    commands: set[str],
) -> list[Problem]:
    """The false claims of one page, in the order of its lines."""
    problems: list[Problem] = []
    text = path.read_text(encoding="utf-8")
    rel = path.relative_to(root)
    snippets = list(_snippets(text))
    spans = {s for s in snippets if s[1] in {m.group(1) for m in _SPAN.finditer(text.split("\n")[s[0] - 1])}}
    for number, snippet in snippets:
        where = f"{rel}:{number}"
        for match in _COMMAND.finditer(re.split(r"(?:^|\s)#", snippet, maxsplit=1)[0]):
            words = match.group(1).split()
            if (number, snippet) in spans and words[0] not in commands and " --" not in match.group(1):
                continue  # prose in a code span (`gb300 remediation`), not a command line
            wrong = check_command(parser, match.group(1))
            if wrong:
                problems.append(Problem(where, wrong))
        for match in _KEY.finditer(snippet):
            key = match.group(1)
            if not _known_key(key, known):
                problems.append(Problem(where, f"gb300:{key} is not a stack config key"))
    for match in _DEFAULT.finditer(text):
        flag, said = match.group(1), match.group(2).strip()
        real = defaults.get(flag)
        if real is not None and len(real) == 1 and said.split()[0] not in real:
            number = text.count("\n", 0, match.start()) + 1
            problems.append(Problem(f"{rel}:{number}", f"{flag} defaults to {next(iter(real))}, not {said!r}"))
    return sorted(problems, key=lambda p: int(p.where.rsplit(":", 1)[1]))
