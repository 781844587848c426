"""Pointers from the node files and the data files into the repository name what exists: a repository path
(``infra/gb300/node/steps.py``, ``docs/x.md``) names a file or folder there, a dotted name (``gb300.slurm.config``,
``gb300.heal.deploy.timer_text``) a module of the package and, past the module, a name it defines.

The files read are the ones a reader of a node or of a fact follows back to the code: ``cloud-init/``,
``templates/`` and ``infra/gb300/data/``. A path that cites another repository (a ``source:`` naming where a fact
comes from) is listed in :data:`FOREIGN` with that repository.
"""

from __future__ import annotations

import re
from pathlib import Path

from gb300.paths import CLOUD_INIT_DIR, DATA_DIR, PACKAGE_DIR, REPO_ROOT, TEMPLATES_DIR

REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:infra/gb300|cloud-init|templates|docs|tests|examples|bench|scripts|policies|stacks)"
    r"/[A-Za-z0-9_./-]*[A-Za-z0-9_])"
)
DOTTED = re.compile(r"(?<![\w./-])gb300((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
NOT_MODULES = {"conf", "prom", "cfg", "json", "yaml", "sh", "service", "timer", "asc", "log", "env", "csv"}
"""Last parts that make ``gb300.<x>`` a file name (``90-gb300.conf``), not a module."""
FOREIGN = {
    ("infra/gb300/data/node.yaml", "docs/cmdline-opts/max-filesize.md"): "curl/curl",
    ("infra/gb300/data/node.yaml", "tests/test-definitions.sh"): "Azure/azhpc-images",
    ("infra/gb300/data/skus.yaml", "examples/interconnectBlockExamples"): "Azure/azure-rest-api-specs",
}
"""(file, path) pairs that cite another repository's file: the repository they name."""
RENDERED = {
    ("templates/monitoring.env.j2", "infra/gb300/node_files.py"),
    ("templates/storage.env.j2", "infra/gb300/node_files.py"),
    ("cloud-init/scripts/gb300-imds-tag", "gb300.nodes"),
}
"""Stale pointers inside text every node carries (a rendered comment, a docstring of a Python tool): fixing them
changes the node payload's bytes, which issue 37 keeps as they are; fix them with the next change to those files
(gb300.node.files renders both env files; gb300.node.custom_data and gb300.node.registry replaced gb300.nodes)."""


def _files() -> list[Path]:
    roots = (CLOUD_INIT_DIR, TEMPLATES_DIR, DATA_DIR)
    return [p for root in roots for p in sorted(root.rglob("*")) if p.is_file() and p.suffix != ".json"]


def _module(parts: list[str]) -> tuple[Path | None, list[str]]:
    """The module file the longest prefix of ``parts`` names under the package, and the parts after it."""
    for end in range(len(parts), 0, -1):
        base = PACKAGE_DIR.joinpath(*parts[:end])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate, parts[end:]
    return (PACKAGE_DIR / "__init__.py", []) if not parts else (None, parts)


def dotted_exists(name: str) -> bool:
    """Whether ``gb300.<name>`` is a module of the package, or a module and a name it defines (one level)."""
    module, rest = _module(name.split(".")[1:])
    if module is None or len(rest) > 1:
        return False
    return (
        not rest or re.search(rf"(?m)^\s*(?:def|class)\s+{rest[0]}\b|^{rest[0]}\s*[:=]", module.read_text()) is not None
    )


def stale(path: Path, text: str) -> list[tuple[int, str]]:
    """(line, pointer) of every repository path or dotted gb300 name in ``text`` that names nothing."""
    where = str(path.relative_to(REPO_ROOT))
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in REPO_PATH.finditer(line):
            target = match.group(1)
            if (where, target) not in FOREIGN and not (REPO_ROOT / target).exists():
                found.append((number, target))
        for match in DOTTED.finditer(line):
            name = "gb300" + match.group(1)
            if name.rsplit(".", 1)[-1] not in NOT_MODULES and not dotted_exists(name):
                found.append((number, name))
    return found


def test_a_pointer_to_nothing_is_named_with_its_line() -> None:
    """A missing file, a missing module and a name a module does not define are each reported; real ones pass."""
    text = (
        "# see infra/gb300/node_steps.py and infra/gb300/node/steps.py\n"
        "# read by gb300.nodes, gb300.slurm.config, gb300.heal.deploy.timer_text, gb300.heal.deploy.nothing_here\n"
        "# placed as /etc/sysctl.d/90-gb300.conf\n"
    )
    found = stale(TEMPLATES_DIR / "example.j2", text)
    assert found == [(1, "infra/gb300/node_steps.py"), (2, "gb300.nodes"), (2, "gb300.heal.deploy.nothing_here")]


def test_node_and_data_files_point_at_what_exists() -> None:
    """Every module and file named in cloud-init/, templates/ and infra/gb300/data/ exists (or is listed above)."""
    found = {
        f"{path.relative_to(REPO_ROOT)}:{line}": pointer
        for path in _files()
        for line, pointer in stale(path, path.read_text(encoding="utf-8", errors="replace"))
        if (str(path.relative_to(REPO_ROOT)), pointer) not in RENDERED
    }
    assert found == {}


def test_the_listed_exceptions_are_still_there() -> None:
    """Each foreign citation and each stale pointer kept for the payload's bytes is still in its file (an entry
    whose text was fixed or moved must leave the list)."""
    for file, pointer in [*FOREIGN, *RENDERED]:
        assert pointer in (REPO_ROOT / file).read_text(encoding="utf-8"), (file, pointer)
