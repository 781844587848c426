"""Which file is stack NAME: the Pulumi CLI's rules for finding a project and its stack files, said once.

Every command that takes ``--stack NAME`` (plan, rollout, migrate-racks, payload publish, init), the rules that read
the other stacks of a project (:func:`gb300.rules.identity.siblings`), the software lock and the program (the
payload upload's ``--stack-file``) resolve stack names and stack files here, and nowhere else:

- a project is the closest ``Pulumi.yaml`` (or ``.yml``) at or above a directory (:func:`find_project`);
- its stack files are ``Pulumi.<stack>`` with the project file's extension, in its ``stackConfigDir`` or beside it
  (:func:`stacks_dir`, :func:`stack_file`);
- a stack file's name gives its stack's (:func:`name_of`).

pulumi/pulumi ``sdk/go/common/workspace/paths.go`` holds the same rules (``DetectProjectPathFrom``,
``findProjectInDir``, ``ProjectStackPath``).
"""

from __future__ import annotations

from pathlib import Path

from gb300.errors import DataError, UsageError
from gb300.facts import loader
from gb300.paths import PROJECT_FILE

__all__ = [
    "PREFIX",
    "PROJECT_FILES",
    "SUFFIXES",
    "find_project",
    "name_of",
    "resolve",
    "stack_file",
    "stack_files",
    "stack_names",
    "stacks_dir",
]

PROJECT_FILES = ("Pulumi.yaml", "Pulumi.yml")
"""The names Pulumi looks for in each directory (``findProjectInDir`` in pulumi's ``workspace/paths.go``)."""
PREFIX = "Pulumi."
"""Every stack file's name starts so: ``Pulumi.<stack>.yaml``."""
SUFFIXES = (".yaml", ".yml")
"""The extensions a stack file may have (the project file's own)."""


def name_of(path: Path) -> str:
    """The stack a stack file is of: ``Pulumi.prod.eu.yaml`` -> ``prod.eu`` (``.yaml`` or ``.yml``)."""
    name = path.name.removeprefix(PREFIX)
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def find_project(start: Path) -> Path | None:
    """The closest ``Pulumi.yaml`` (or ``.yml``) at ``start`` or above it, as the Pulumi CLI finds its project
    (``DetectProjectPathFrom`` in pulumi ``sdk/go/common/workspace/paths.go``: it walks up the directories)."""
    for directory in (start, *start.parents):
        for name in PROJECT_FILES:
            candidate = directory / name
            if candidate.is_file():
                return candidate
    return None


def stacks_dir(project: Path = PROJECT_FILE) -> Path:
    """Where the project keeps its ``Pulumi.<stack>.yaml`` files: ``stackConfigDir`` relative to the project file's
    directory, or that directory itself (``ProjectStackPath`` in pulumi ``workspace/paths.go``)."""
    try:
        doc = loader.read_yaml(project)
    except DataError:
        doc = None
    config_dir = doc.get("stackConfigDir") if isinstance(doc, dict) else None
    return project.parent / config_dir if isinstance(config_dir, str) and config_dir else project.parent


def stack_file(name: str, project: Path = PROJECT_FILE) -> Path:
    """``Pulumi.<name>`` with the project file's extension, in the project's stack directory (by default the
    checkout's own project: ``stacks/Pulumi.<name>.yaml``)."""
    return stacks_dir(project) / f"{PREFIX}{name}{project.suffix}"


def stack_files(folder: Path) -> list[Path]:
    """The stack files (``Pulumi.*.yaml`` and ``.yml``) in ``folder``, sorted by name."""
    return sorted(p for p in folder.glob(f"{PREFIX}*.*") if p.suffix in SUFFIXES and p.is_file())  # not Pulumi.yaml


def stack_names(project: Path = PROJECT_FILE) -> list[str]:
    """The stacks the project's stack directory holds (with the project file's extension), sorted."""
    return sorted(name_of(p) for p in stack_files(stacks_dir(project)) if p.suffix == project.suffix)


def resolve(stack: str | None, path: Path | None, cwd: Path | None = None) -> tuple[str, Path]:
    """The stack's name and file: the file ``path`` (``--stack-file``), or the stack ``stack`` (``--stack``) of the
    Pulumi project around ``cwd`` (the current directory), as the Pulumi CLI finds it. A missing file, no project
    around ``cwd`` or a stack the project does not have is a :class:`~gb300.errors.UsageError` (exit 2) saying
    where it looked."""
    if path is not None:
        if not path.exists():
            raise UsageError(f"stack file {path} does not exist")
        return name_of(path), path
    if stack is None:
        raise UsageError("name the stack with --stack NAME or its file with --stack-file PATH")
    here = (cwd or Path.cwd()).resolve()
    project = find_project(here)
    if project is None:
        raise UsageError(
            f"--stack {stack}: no Pulumi.yaml in {here} or a directory above it; run gb300 in the Pulumi "
            "project's directory, or give the file with --stack-file"
        )
    found = stack_file(stack, project)
    if not found.exists():
        known = stack_names(project)
        raise UsageError(
            f"no stack {stack!r} in the project {project}: {found} does not exist "
            f"(stacks: {', '.join(known) or 'none'})"
        )
    return stack, found
