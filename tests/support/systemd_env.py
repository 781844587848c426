"""How systemd reads an ``EnvironmentFile=`` and expands an unquoted ``$VAR`` in ``ExecStart=``: a double of the two
rules gb300's slurmd drop-in relies on (the boot gate's /run/gb300/slurmd-gate.env).

:func:`environment_file` follows systemd's ``src/basic/env-file.c`` (``parse_env_file_internal``): ``KEY=VALUE``
lines, ``#`` comments, single quotes literal, double quotes with ``\\`` escaping ``" \\ ` $`` and newline, a
backslash outside quotes escaping the next character, quotes removed. :func:`exec_words` splits a value as
``ExecStart=`` splits an unquoted ``$VAR`` (``strv_split_full(..., EXTRACT_RELAX|EXTRACT_UNQUOTE)``), which
``shlex`` in POSIX mode matches for the characters used here. It cannot show systemd's own reading (no systemd in
the tests' namespaces): line continuations, ``export`` prefixes and invalid UTF-8 are not modelled.
"""

from __future__ import annotations

import shlex

__all__ = ["environment_file", "exec_words"]

_NEED_ESCAPE = '"\\`$'


# state -> character -> (next state, text kept); a character absent from a state's row is kept as it is.
_QUOTES: dict[str, dict[str, tuple[str, str]]] = {
    "value": {"'": ("single", ""), '"': ("double", ""), "\\": ("escape", "")},
    "single": {"'": ("value", "")},
    "double": {'"': ("value", ""), "\\": ("double-escape", "")},
}


def _step(state: str, char: str) -> tuple[str, str]:
    if state == "escape":
        return "value", char
    if state == "double-escape":
        return "double", char if char in _NEED_ESCAPE else "\\" + char
    return _QUOTES[state].get(char, (state, char))


def _value(raw: str) -> str:
    out: list[str] = []
    state = "value"
    for char in raw:
        state, kept = _step(state, char)
        out.append(kept)
    return "".join(out).rstrip()


def environment_file(text: str) -> dict[str, str]:
    """The variables an ``EnvironmentFile=`` of ``text`` sets."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";")):
            continue
        key, sep, raw = stripped.partition("=")
        if sep:
            found[key.strip()] = _value(raw.lstrip())
    return found


def exec_words(value: str) -> list[str]:
    """The arguments an unquoted ``$VAR`` of ``value`` becomes in ``ExecStart=``."""
    return shlex.split(value)
