"""The layering of infra/gb300, read from the source: no import cycle, no module reaching for another's underscore
names, and the shared nouns (:mod:`gb300.resources`) on the ground floor, importing nothing from gb300.

Every ``import`` and ``from ... import`` counts, wherever it is written: at the top, inside a function (a local
import that dodges a cycle is still one) and under ``if TYPE_CHECKING:``. The checks read the modules with
:mod:`ast` and import none of them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from gb300.paths import PACKAGE_DIR

BOTTOM = "gb300.resources"
"""The module of the nouns every layer shares (issue 37, "shared nouns on the ground floor")."""


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` at ``line``; ``name`` is the name taken from it (None for a whole module)."""

    source: str
    line: int
    target: str
    name: str | None


def modules(package_dir: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, whether it is a package's ``__init__``), for every .py file of the package."""
    out = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = [package_dir.name, *path.relative_to(package_dir).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _owner(name: str, known: Mapping[str, object]) -> str | None:
    """The module ``name`` lives in: itself, else its closest enclosing module."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _source(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name of what ``from ... import`` reads: a relative one from the module's own package, one level
    up per extra dot."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _imports(module: str, is_package: bool, tree: ast.AST, known: Mapping[str, object]) -> Iterator[Edge]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Edge(module, node.lineno, _owner(alias.name, known) or "", None)
        elif isinstance(node, ast.ImportFrom):
            source = _source(module, is_package, node)
            for alias in node.names:
                if f"{source}.{alias.name}" in known:  # `from gb300.plan import glance`: the submodule itself
                    yield Edge(module, node.lineno, f"{source}.{alias.name}", None)
                else:
                    yield Edge(module, node.lineno, _owner(source, known) or "", alias.name)


def edges(package_dir: Path) -> Iterator[Edge]:
    """Every import of a module of the package by another, local and TYPE_CHECKING imports included."""
    known = modules(package_dir)
    for module, (path, is_package) in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        yield from (e for e in _imports(module, is_package, tree, known) if e.target not in ("", module))


def cycles(found: list[Edge]) -> list[list[Edge]]:
    """One cycle of imports (as its edges) per strongly connected group of modules (Tarjan's algorithm)."""
    graph: dict[str, dict[str, Edge]] = {}
    for edge in found:
        graph.setdefault(edge.source, {}).setdefault(edge.target, edge)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    out = []
    for group in groups:  # walk inside the group from its first module until a module repeats
        start = min(group)
        path, seen, node = [], {start}, start
        while True:
            edge = next(graph[node][t] for t in sorted(graph[node]) if t in group)
            path.append(edge)
            if edge.target in seen:
                break
            seen.add(edge.target)
            node = edge.target
        out.append(path[next(i for i, e in enumerate(path) if e.source == path[-1].target) :])
    return out


def shown(cycle: list[Edge]) -> str:
    return " -> ".join(f"{e.source}:{e.line}" for e in cycle) + f" -> {cycle[-1].target}"


def underscore_reaches(package_dir: Path) -> list[str]:
    """Each use of another module's underscore name: imported by name, or read as an attribute of a module the
    importer bound (``import gb300.x as x``, ``from gb300 import x``, then ``x._name``)."""
    known = modules(package_dir)
    out = [
        f"{e.source}:{e.line} imports {e.name} from {e.target}"
        for e in edges(package_dir)
        if e.name is not None and e.name.startswith("_") and not e.name.startswith("__")
    ]
    for module, (path, _is_package) in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        bound = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                bound.update({a.asname: a.name for a in node.names if a.asname and a.name in known})
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if f"{node.module}.{a.name}" in known:
                        bound[a.asname or a.name] = f"{node.module}.{a.name}"
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and bound[node.value.id] != module
            ):
                out.append(f"{module}:{node.lineno} reads {node.attr} of {bound[node.value.id]}")
    return sorted(out)


# -- the checks on a package made to break them: each finds what it must ---------------------------------------


@pytest.fixture
def tangled(tmp_path: Path) -> Path:
    """A package with a cycle through a function-local import, one through TYPE_CHECKING, and underscore reaches."""
    pkg = tmp_path / "gb300"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from gb300.b import thing\n",
        "b.py": "def thing():\n    from gb300 import a  # noqa: PLC0415\n    return a\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gb300.sub.d import D\n",
        "sub/__init__.py": "",
        "sub/d.py": "from .. import c\nfrom ..a import _hidden\nclass D: ...\n",
        "e.py": "import gb300.a as mod_a\nfrom gb300.sub import d\nx = mod_a._private, d._other, d.__name__\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text, encoding="utf-8")
    return pkg


def test_a_cycle_through_a_local_or_type_checking_import_is_found(tangled: Path) -> None:
    found = sorted(shown(c) for c in cycles(list(edges(tangled))))
    assert found == [
        "gb300.a:1 -> gb300.b:2 -> gb300.a",
        "gb300.c:3 -> gb300.sub.d:1 -> gb300.c",
    ]


def test_an_underscore_name_reached_from_another_module_is_found(tangled: Path) -> None:
    assert underscore_reaches(tangled) == [
        "gb300.e:3 reads _other of gb300.sub.d",
        "gb300.e:3 reads _private of gb300.a",
        "gb300.sub.d:2 imports _hidden from gb300.a",
    ]


# -- the checks on gb300 -----------------------------------------------------------------------------------------


def test_no_import_cycle() -> None:
    """No module of gb300 imports itself through others; the failure names each cycle with its lines."""
    found = [shown(c) for c in cycles(list(edges(PACKAGE_DIR)))]
    assert not found, "import cycles (issue 37):\n" + "\n".join(found)


def test_no_module_reaches_for_another_modules_underscore_names() -> None:
    """A name shared between modules is public; an underscore name stays in its module."""
    found = underscore_reaches(PACKAGE_DIR)
    assert not found, "underscore names used across modules (make them public):\n" + "\n".join(found)


def test_the_shared_nouns_import_nothing_from_gb300() -> None:
    """gb300.resources is the ground floor: every layer may import it, so it imports no layer."""
    assert BOTTOM in modules(PACKAGE_DIR)
    up = [f"{e.source}:{e.line} imports {e.target}" for e in edges(PACKAGE_DIR) if e.source == BOTTOM]
    tree = ast.parse((PACKAGE_DIR / "resources.py").read_text(encoding="utf-8"))
    relative = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]
    assert not up
    assert not relative, f"relative imports at lines {relative}"


def test_the_resource_types_have_one_home() -> None:
    """Resource, ResourceRecord and DeployedResource are defined in gb300.resources and nowhere else."""
    homes = {
        f"{module}.{node.name}"
        for module, (path, _) in modules(PACKAGE_DIR).items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.name in {"Resource", "ResourceRecord", "DeployedResource"}
    }
    assert homes == {f"{BOTTOM}.Resource", f"{BOTTOM}.ResourceRecord", f"{BOTTOM}.DeployedResource"}


_BELOW_CONFIG = ("gb300.errors", "gb300.facts", "gb300.io", "gb300.paths", "gb300.tags", "gb300.resources")
_NODE_GROUND = ("gb300.node.paths", "gb300.node.templating", "gb300.node.resources", "gb300.node.file")
FLOORS: dict[str, tuple[str, ...]] = {
    "gb300.config": _BELOW_CONFIG,
    "gb300.slurm": (*_BELOW_CONFIG, "gb300.config", *_NODE_GROUND),
    "gb300.node": (*_BELOW_CONFIG, "gb300.config", "gb300.slurm", "gb300.heal"),
}
"""What each of the lower layers may import besides itself: only floors below it (issue 51, "the layer order, not
only cycles"). The node layer carries the heal loop's files; it never imports a component, the plan, the
rules or the program."""


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_config_slurm_and_node_import_only_the_floors_below_them() -> None:
    """gb300.config, gb300.slurm and gb300.node import only the layers below them; each upward import is named."""
    up = [
        f"{e.source}:{e.line} imports {e.target}"
        for e in edges(PACKAGE_DIR)
        for layer, allowed in FLOORS.items()
        if _within(e.source, (layer,)) and not _within(e.target, (layer, *allowed))
    ]
    assert not up, "imports up the floors:\n" + "\n".join(up)


def _module_level_imports(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, module) of the imports a module runs when imported (not in functions, not under TYPE_CHECKING)."""
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            yield node.lineno, node.module or ""
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            todo.extend(n for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt))


def test_config_slurm_and_node_import_no_pulumi_module() -> None:
    """No module of gb300.config, gb300.slurm or gb300.node imports Pulumi when it is imported (a lazy import where
    a value is a Pulumi secret is the only way in)."""
    found = [
        f"{module}:{line} imports {name}"
        for module, (path, _) in modules(PACKAGE_DIR).items()
        if _within(module, tuple(FLOORS))
        for line, name in _module_level_imports(ast.parse(path.read_text(encoding="utf-8")))
        if name == "pulumi" or name.startswith(("pulumi.", "pulumi_"))
    ]
    assert not found
