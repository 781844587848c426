"""Reading a stack file as strict YAML: bounded, UTF-8, no duplicate keys, no alias bombs.

A stack file is a few kilobytes written by people. What is not that is refused with one line naming the
file, before anything else looks at it (``gb300 plan`` exits 2):

* more than :data:`MAX_BYTES` bytes (read at most that many, so ``/dev/zero`` is refused too);
* bytes that are not UTF-8 text (a binary file, a Latin-1 file), with the line of the first bad byte;
* a key given twice in one mapping, with both line numbers (YAML says keys are unique; PyYAML would keep
  the last one silently, even for ``gb300:cluster``);
* aliases that expand to more than :data:`MAX_VALUES` values (a "billion laughs" document is a few hundred
  bytes that expand to gigabytes once a consumer walks it), recursive aliases, and nesting deeper than
  :data:`MAX_DEPTH`.

The expansion is measured on PyYAML's node graph, where an alias is a shared node, so measuring it costs
time in proportion to the file, not to the expansion.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, SequenceNode

from gb300.errors import ConfigError, Problem

MAX_BYTES = 256 * 1024
"""Largest stack file read. The reference stack is about 2 KB; encrypted secrets add a few hundred bytes each."""
MAX_VALUES = 100_000
"""Most scalars, lists and mappings a document may hold once its aliases are expanded."""
MAX_DEPTH = 64
"""Deepest nesting of lists and mappings."""

_MERGE = "tag:yaml.org,2002:merge"


class _RefusedError(Exception):
    """A limit of this module was exceeded; the message says which."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, refusing duplicate keys and nesting beyond :data:`MAX_DEPTH`."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise _RefusedError(
                    f"nests lists and mappings more than {MAX_DEPTH} levels deep (line {mark.line + 1})"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE:
                    continue  # '<<: *base' keys are overridden on purpose
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:
                    continue  # an unhashable key: the base class refuses it with its own message
                line = key_node.start_mark.line + 1
                if first is not None:
                    raise _RefusedError(
                        f"gives key {key!r} twice in one mapping (lines {first} and {line}); YAML keys are unique "
                        "and the second would silently replace the first. Keep one"
                    )
                seen[key] = line
        return super().construct_mapping(node, deep=deep)  # type: ignore[arg-type]


def _expanded_size(root: Node) -> int:
    """Values in the document once every alias is expanded; raises _RefusedError past MAX_VALUES or on a cycle."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    # Iterative post-order walk: the document may be as deep as MAX_DEPTH, the graph as wide as the file.
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            total = 1
            for child in _children(node):
                total += sizes[id(child)]
            if total > MAX_VALUES:
                line = node.start_mark.line + 1
                raise _RefusedError(
                    f"expands to more than {MAX_VALUES:,} values through YAML aliases (line {line}); "
                    "a stack file needs a few hundred"
                )
            sizes[key] = total
            open_nodes.discard(key)
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise _RefusedError(f"has a recursive alias (line {node.start_mark.line + 1}); a stack file is a tree")
        open_nodes.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in open_nodes and id(child) not in sizes:
                raise _RefusedError(f"has a recursive alias (line {child.start_mark.line + 1}); a stack file is a tree")
            stack.append((child, False))
    return sizes[id(root)]


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def read_text(path: Path) -> str:
    """The file's text: at most MAX_BYTES bytes of UTF-8 (a leading byte-order mark is dropped)."""
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError([Problem(str(path), f"cannot be read ({exc.strerror or exc})")]) from None
    if len(data) > MAX_BYTES:
        raise ConfigError(
            [Problem(str(path), f"is larger than {MAX_BYTES // 1024} KiB; a stack file is a few kilobytes of YAML")]
        )
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise ConfigError([Problem(str(path), f"is binary, not YAML text (a NUL byte on line {line})")])
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        bad = data[exc.start]
        raise ConfigError(
            [Problem(str(path), f"is not UTF-8 text (byte 0x{bad:02x} on line {line}); save it as UTF-8")]
        ) from None


def load(path: Path) -> Any:
    """The YAML document in ``path`` as plain data; every refusal is a ConfigError naming the file."""
    text = read_text(path)
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node)
        return loader.construct_document(node)
    except _RefusedError as exc:
        raise ConfigError([Problem(str(path), exc.message)]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None)
        detail = f": {problem}" if problem else ""
        raise ConfigError([Problem(str(path), f"is not valid YAML{where}{detail}")]) from None
    except RecursionError:
        raise ConfigError([Problem(str(path), "nests too deeply to read")]) from None
    finally:
        loader.dispose()
