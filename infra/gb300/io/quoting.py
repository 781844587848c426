"""The one way text from elsewhere goes into a script or configuration gb300 generates (commands.sh, a node's
environment file, a cloud-init script, a systemd unit).

A value is refused (:class:`UnsafeTextError`, exit 2, naming what it is and the offending character by its code
point, never printed raw) when it holds a control character: C0 (NUL, newline, carriage return, escape, ...),
DEL, C1, the Unicode line and paragraph separators; or when it is longer than :data:`MAX_CHARS`. A newline is what
turns a comment line or a ``KEY=value`` line into a command; the others hide what a reviewer reads.

* :func:`shell_word`: one POSIX shell word (``shlex.quote``), safe after ``set -euo pipefail`` and in ``source``;
* :func:`env_lines`: ``KEY=value`` lines for a file a shell sources (each value a :func:`shell_word`, each key a
  shell variable name);
* :func:`comment`: text for a ``#`` comment line (shell, systemd, YAML): checked, kept as it is;
* :func:`checked`: the check alone, for a format with its own quoting (JSON, YAML serialised by its library).
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Mapping

from gb300.errors import UsageError

__all__ = ["MAX_CHARS", "UnsafeTextError", "checked", "comment", "env_lines", "shell_word", "shown"]

MAX_CHARS = 64 * 1024
"""The longest value put into a generated file: names, ids and keys are far shorter."""

_SEPARATORS = frozenset("\u2028\u2029\x85")


class UnsafeTextError(UsageError):
    """A value bound for a generated script holds a control character, or is absurdly long."""


def checked(value: str, what: str) -> str:
    """``value`` unchanged when it holds no control character and is at most :data:`MAX_CHARS` long; else
    :class:`UnsafeTextError` naming ``what``."""
    if not isinstance(value, str):
        raise UnsafeTextError(f"{what}: must be text (got {type(value).__name__})")
    if len(value) > MAX_CHARS:
        raise UnsafeTextError(f"{what}: is {len(value):,} characters long; at most {MAX_CHARS:,} go into a script")
    if value.isprintable() and not _SEPARATORS.intersection(value):
        return value  # the common case, in C
    for index, char in enumerate(value):
        if char in _SEPARATORS or unicodedata.category(char) == "Cc":
            name = unicodedata.name(char, "a control character")
            raise UnsafeTextError(
                f"{what}: holds U+{ord(char):04X} {name} at character {index + 1}; a control character in a "
                "generated script would end a line or hide text"
            )
    return value


def shown(value: str, limit: int = 60) -> str:
    """``value`` for a message: its ``repr`` (control characters escaped, never printed raw), clipped."""
    text = repr(value[: limit + 1])
    return text if len(value) <= limit else text[:limit] + "..."


def shell_word(value: str, what: str) -> str:
    """``value`` as one POSIX shell word (single-quoted where it needs to be), after :func:`checked`."""
    return shlex.quote(checked(value, what))


def env_lines(values: Mapping[str, str], what: str) -> str:
    """``KEY=value`` lines (each ending in a newline) for an environment file a shell sources: every value one
    :func:`shell_word`, every key a shell variable name; ``what`` names the file in a refusal."""
    lines = []
    for key, value in values.items():
        if not _ENV_KEY.fullmatch(key):
            raise UnsafeTextError(f"{what}: {shown(key)!r} is not a shell variable name")
        lines.append(f"{key}={shell_word(value, f'{what} {key}')}\n")
    return "".join(lines)


_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def comment(value: str, what: str) -> str:
    """``value`` for a ``#`` comment line, after :func:`checked`: no newline can end the comment."""
    return checked(value, what)
