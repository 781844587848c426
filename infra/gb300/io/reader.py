"""The one reader of files gb300 did not ship: stack files, ``--state``, ``--quota``, ``--prices``, ``--azure``,
heal scenarios, the migration's preview. gb300's own data files keep :mod:`gb300.facts.loader`.

Each kind of file (:class:`Kind`) has a size cap; what is not a few bounded values of plain data is refused with
one line naming the file and, where there is one, the key path (``config.gb300:cluster``), as a
:class:`~gb300.errors.ConfigError` (exit 2), before anything else looks at it:

* more bytes than the kind's cap (at most that many are read, so ``/dev/zero`` is refused too);
* a NUL byte (a binary file) or bytes that are not UTF-8, with the line of the first bad byte;
* YAML anchors and aliases (``&a``, ``*a``): a few hundred bytes of aliases expand to gigabytes once a consumer
  walks them (a "billion laughs"), and no file gb300 reads needs them. ``pulumi config set`` rewrites a stack
  file without them anyway;
* a key given twice in one mapping or JSON object (YAML says keys are unique; PyYAML and :mod:`json` keep the
  last one silently);
* nesting deeper than :data:`MAX_DEPTH` lists and mappings;
* JSON's ``NaN`` and ``Infinity``, which are not JSON (RFC 8259) but which :mod:`json` accepts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.events import AliasEvent, CollectionStartEvent, ScalarEvent
from yaml.nodes import MappingNode, Node, ScalarNode

from gb300.errors import ConfigError, Problem

__all__ = [
    "AZURE_ANSWER",
    "FABRIC",
    "MAX_DEPTH",
    "NODES",
    "PREVIEW",
    "PRICES",
    "QUOTA",
    "SSH_PUBLIC_KEY",
    "STACK",
    "STATE",
    "Kind",
    "load_json",
    "load_yaml",
    "parse_yaml",
    "read_text",
]

MAX_DEPTH = 64
"""Deepest nesting of lists and mappings in any file read here."""

_MIB = 1024 * 1024


@dataclass(frozen=True)
class Kind:
    """A kind of file gb300 reads from elsewhere: what it is, the most bytes read, and how to make a good one."""

    name: str
    max_bytes: int
    hint: str

    @property
    def cap(self) -> str:
        """The cap as people read it (256 KiB, 256 MiB)."""
        if self.max_bytes >= _MIB:
            return f"{self.max_bytes // _MIB} MiB"
        return f"{self.max_bytes // 1024} KiB"


STACK = Kind("stack file", 256 * 1024, "a stack file is a few kilobytes of YAML")
"""The reference stack is about 2 KB; encrypted secrets add a few hundred bytes each."""
STATE = Kind("state file", 256 * _MIB, "write it with 'pulumi stack export --file FILE'")
"""About 10 KB per rack: 1,388 racks are about 15 MB."""
QUOTA = Kind("quota file", 16 * _MIB, "save it with `az vm list-usage --location REGION -o json`")
PRICES = Kind("price file", 16 * _MIB, "shape it like infra/gb300/data/prices.yaml")
AZURE_ANSWER = Kind("saved Azure answer", 64 * _MIB, "save it with `az vmss list-instances ... -o json`")
PREVIEW = Kind("preview", 256 * _MIB, "write it with 'pulumi preview --json'")
NODES = Kind("fabric list", 16 * _MIB, "one '<hostname> <ClusterUUID> <CliqueId>' line per node")
FABRIC = Kind("fabric file", 64 * 1024, 'one node\'s {"ClusterUUID": ..., "CliqueId": ...} as JSON')
"""One ``<hostname>.json`` of ``gb300 topology --fabric-dir``: a few hundred bytes."""
GOODPUT_NODES = Kind("goodput node list", 64 * _MIB, "shape it as docs/goodput.md#the-node-list says")
"""A node is about 200 bytes with its drains: 100,000 nodes are about 20 MB."""
SSH_PUBLIC_KEY = Kind("SSH public key", 16 * 1024, "an OpenSSH public key is one line of a few hundred bytes")


class _RefusedError(Exception):
    """A limit of this module was exceeded at ``where`` (a key path, or ``""`` for the whole file)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.message = message


def _refuse(path: Path, message: str, where: str = "") -> ConfigError:
    return ConfigError([Problem(str(path), f"{where}: {message}" if where else message)])


def _line_of(data: bytes, offset: int) -> int:
    return data[:offset].count(b"\n") + 1


def read_text(path: Path, kind: Kind) -> str:
    """The file's text: at most ``kind.max_bytes`` bytes of UTF-8 without NUL (a leading byte-order mark is
    dropped). Every refusal is a ConfigError naming the file."""
    try:
        with path.open("rb") as stream:
            data = stream.read(kind.max_bytes + 1)
    except OSError as exc:
        raise _refuse(path, f"cannot be read ({exc.strerror or exc})") from None
    if len(data) > kind.max_bytes:
        raise _refuse(path, f"is larger than {kind.cap}; {kind.hint}")
    nul = data.find(b"\x00")
    if nul >= 0:
        raise _refuse(path, f"is binary, not text (a NUL byte on line {_line_of(data, nul)})")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = _line_of(data, exc.start)
        raise _refuse(
            path, f"is not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); save it as UTF-8"
        ) from None


def key_path(parts: tuple[str | int, ...]) -> str:
    """``("config", "gb300:gpuPools", 0, "racks")`` as ``config.gb300:gpuPools[0].racks``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


# -- YAML --------------------------------------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader refusing anchors, aliases, duplicate keys and nesting beyond :data:`MAX_DEPTH`; it
    remembers each collection's key path for the messages."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._path: list[str | int] = []
        self._where: dict[int, str] = {}

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        line = event.start_mark.line + 1
        label: str | int | None = None
        if isinstance(index, ScalarNode):
            label = str(index.value)
        elif isinstance(index, int) and isinstance(parent, yaml.SequenceNode):
            label = index
        if label is not None:
            self._path.append(label)
        try:
            here = key_path(tuple(self._path))
            if isinstance(event, AliasEvent):
                raise _RefusedError(here, f"uses the YAML alias *{event.anchor} (line {line}); write the value out")
            if isinstance(event, ScalarEvent | CollectionStartEvent) and event.anchor is not None:
                raise _RefusedError(here, f"sets the YAML anchor &{event.anchor} (line {line}); write the values out")
            if isinstance(event, CollectionStartEvent) and len(self._path) >= MAX_DEPTH:
                raise _RefusedError(here, f"nests lists and mappings more than {MAX_DEPTH} levels deep (line {line})")
            node = super().compose_node(parent, index)
            if node is not None and not isinstance(node, ScalarNode):
                self._where[id(node)] = here
            return node
        finally:
            if label is not None:
                self._path.pop()

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # '<<: {...}' keys are overridden on purpose
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:
                    continue  # an unhashable key: the base class refuses it with its own message
                line = key_node.start_mark.line + 1
                if first is not None:
                    raise _RefusedError(
                        self._where.get(id(node), ""),
                        f"gives key {key!r} twice in one mapping (lines {first} and {line}); YAML keys are unique "
                        "and the second would silently replace the first. Keep one",
                    )
                seen[key] = line
        return super().construct_mapping(node, deep=deep)  # type: ignore[arg-type]


def load_yaml(path: Path, kind: Kind) -> Any:
    """The YAML document in ``path`` as plain data (None for an empty file); every refusal is a ConfigError
    naming the file and the key path."""
    return parse_yaml(read_text(path, kind), path, kind)


def parse_yaml(text: str, path: Path, kind: Kind) -> Any:
    """:func:`load_yaml` of text in memory (``gb300 init`` checks what it will write before writing it); ``path``
    names it in messages."""
    if len(text.encode("utf-8")) > kind.max_bytes:
        raise _refuse(path, f"is larger than {kind.cap}; {kind.hint}")
    loader = None
    try:
        loader = _StrictLoader(text)  # PyYAML's reader refuses some characters (U+0080) here already
        return loader.get_single_data()
    except _RefusedError as exc:
        raise _refuse(path, exc.message, exc.where) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None)
        detail = f": {problem}" if problem else ""
        raise _refuse(path, f"is not valid YAML{where}{detail}") from None
    except RecursionError:
        raise _refuse(path, "nests too deeply to read") from None
    finally:
        if loader is not None:
            loader.dispose()


# -- JSON --------------------------------------------------------------------------------------------------------


class _Twice(dict[str, Any]):
    """A JSON object that gave ``key`` twice (the walk after parsing names its key path)."""

    key: str = ""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    twice = _Twice(out)
    seen: set[str] = set()
    twice.key = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
    return twice


def _no_constant(name: str) -> Any:
    raise _RefusedError("", f"holds {name}, which is not a JSON number (RFC 8259)")


def _collections(doc: Any) -> Iterator[tuple[Any, tuple[str | int, ...]]]:
    """Every list and object of the document with its key path, breadth first (no recursion: depth is checked)."""
    todo: list[tuple[Any, tuple[str | int, ...]]] = [(doc, ())]
    while todo:
        value, where = todo.pop()
        yield value, where
        items = value.items() if isinstance(value, dict) else enumerate(value)
        todo.extend((child, (*where, key)) for key, child in items if isinstance(child, dict | list))


def _check_tree(doc: Any) -> None:
    if not isinstance(doc, dict | list):
        return
    for value, where in _collections(doc):
        if len(where) >= MAX_DEPTH:
            raise _RefusedError(key_path(where), f"nests lists and objects more than {MAX_DEPTH} levels deep")
        if isinstance(value, _Twice):
            raise _RefusedError(
                key_path(where),
                f"gives key {value.key!r} twice in one object; the second would silently replace the first. Keep one",
            )


def load_json(path: Path, kind: Kind) -> Any:
    """The JSON document in ``path`` as plain data; every refusal is a ConfigError naming the file and the key
    path."""
    text = read_text(path, kind)
    try:
        doc = json.loads(text, object_pairs_hook=_object, parse_constant=_no_constant)
        _check_tree(doc)
    except _RefusedError as exc:
        raise _refuse(path, exc.message, exc.where) from None
    except json.JSONDecodeError as exc:
        raise _refuse(path, f"is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); {kind.hint}") from None
    except RecursionError:
        raise _refuse(path, f"nests lists and objects more than {MAX_DEPTH} levels deep") from None
    return doc
