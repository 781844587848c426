"""Reading a stack file: the strict reader of files from elsewhere (:mod:`gb300.io.reader`) with a stack file's
limits (:data:`gb300.io.reader.STACK`: 256 KiB; no anchors or aliases, no duplicate keys, at most 64 levels).

A stack file is a few kilobytes written by people; what is not that is refused with one line naming the file and
the key path, before anything else looks at it (``gb300 plan`` exits 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gb300.io import reader

MAX_BYTES = reader.STACK.max_bytes
"""Largest stack file read."""
MAX_DEPTH = reader.MAX_DEPTH
"""Deepest nesting of lists and mappings."""


def read_text(path: Path) -> str:
    """The file's text: at most MAX_BYTES bytes of UTF-8 (a leading byte-order mark is dropped)."""
    return reader.read_text(path, reader.STACK)


def load(path: Path) -> Any:
    """The YAML document in ``path`` as plain data; every refusal is a ConfigError naming the file."""
    return reader.load_yaml(path, reader.STACK)


def parse(text: str, path: Path) -> Any:
    """:func:`load` of a stack file's text in memory, named ``path`` in messages (``gb300 init`` parses what it
    will write before writing it, and writes nothing else)."""
    return reader.parse_yaml(text, path, reader.STACK)
