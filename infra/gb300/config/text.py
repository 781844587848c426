"""Free text in the stack config: how long each kind of value may be, and the characters no value may hold.

Every string a stack file gives is printed somewhere (the plan, a pull request, a terminal) or reaches Azure and the
nodes, so no string may hold a control or format character; and every free-text key has a maximum length
(``data/platform.yaml`` ``textMaxLength``), checked before any other check reads the value.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from gb300.facts import catalog


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def text_limit(kind: str) -> int:
    """The longest value a kind of free-text key takes (``data/platform.yaml`` ``textMaxLength``)."""
    return int(catalog.load().limit("textMaxLength")[kind])


# Unicode categories refused in every string of the stack config: controls (C0 with NUL, CR and ESC; DEL; C1),
# format characters (bidi overrides and isolates U+202A-202E, U+2066-2069, zero-width characters, BOM), lone
# surrogates, and the line and paragraph separators U+2028, U+2029. Printed, each can hide or rewrite what a
# terminal or a pull request shows; a YAML escape (\0, \x1b, \u2028) writes them as easily as a raw byte.
_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_CONTROL_NAMES = {"\x00": "NUL", "\t": "TAB", "\n": "LINE FEED", "\r": "CARRIAGE RETURN", "\x1b": "ESCAPE"}
_CATEGORY_NAMES = {"Cc": "CONTROL CHARACTER", "Cs": "LONE SURROGATE", "Cf": "FORMAT CHARACTER"}


def unprintable(value: str) -> str | None:
    """The first control or format character of ``value``, described (``U+001B ESCAPE at character 4``), or None.

    Linear: ``str.isprintable`` answers most values in C; only a value holding some non-printable character (a
    non-breaking space is one, and allowed) is scanned character by character.
    """
    if value.isprintable():
        return None
    for i, char in enumerate(value):
        if unicodedata.category(char) in _UNPRINTABLE:
            name = unicodedata.name(char, "") or _CONTROL_NAMES.get(char) or _CATEGORY_NAMES[unicodedata.category(char)]
            return f"U+{ord(char):04X} {name} at character {i + 1}"
    return None


UNPRINTABLE_MESSAGE = (
    "must not hold control or format characters (got {what}); they can hide or rewrite what a terminal shows. "
    "Remove it (a YAML escape such as \\0, \\x1b or \\u2028 writes one too)"
)


def refuse_unprintable(value: str) -> None:
    """Raise the user's message when ``value`` holds a control or format character (for checks that run before the
    models' own check, so the user reads the same line)."""
    found = unprintable(value)
    if found is not None:
        raise ValueError(UNPRINTABLE_MESSAGE.format(what=found))


def printable_problem(value: Any) -> tuple[tuple[str | int, ...], str] | None:
    """Where in ``value`` (a string, or a list or mapping of them) a control or format character sits, and what it
    is; None when there is none. Keys of a mapping are checked too (a bad key is named by its position)."""
    if isinstance(value, str):
        found = unprintable(value)
        return ((), found) if found else None
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            inner = printable_problem(item)
            if inner is not None:
                return ((i, *inner[0]), inner[1])
    if isinstance(value, dict):
        for n, (key, item) in enumerate(value.items()):
            found = unprintable(key) if isinstance(key, str) else None
            if found is not None:
                return ((), f"key {n + 1} ({_short(key)!r}) holds {found}")
            inner = printable_problem(item)
            if inner is not None:
                return ((key, *inner[0]), inner[1])
    return None
