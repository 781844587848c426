"""Where the toolkit's files live. gb300 runs from a checkout (an editable install), like the Pulumi program."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
DATA_DIR = PACKAGE_DIR / "data"
REPO_ROOT = PACKAGE_DIR.parents[1]
STACKS_DIR = REPO_ROOT / "stacks"
TEMPLATES_DIR = REPO_ROOT / "templates"
CLOUD_INIT_DIR = REPO_ROOT / "cloud-init"
POLICIES_DIR = REPO_ROOT / "policies"


def stack_file(name: str) -> Path:
    """The stack file of stack ``name`` in ``stacks/`` (Pulumi's ``stackConfigDir``)."""
    return STACKS_DIR / f"Pulumi.{name}.yaml"


def stack_names() -> list[str]:
    """The names of the stacks in ``stacks/``, sorted (``Pulumi.<name>.yaml``)."""
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in STACKS_DIR.glob("Pulumi.*.yaml"))


PROJECT_FILES = ("Pulumi.yaml", "Pulumi.yml")
"""The names Pulumi looks for in each directory (``findProjectInDir`` in pulumi's ``workspace/paths.go``)."""


def find_project(start: Path) -> Path | None:
    """The closest ``Pulumi.yaml`` (or ``.yml``) at ``start`` or above it, as the Pulumi CLI finds its project
    (``DetectProjectPathFrom`` in pulumi ``sdk/go/common/workspace/paths.go``: it walks up the directories)."""
    for directory in (start, *start.parents):
        for name in PROJECT_FILES:
            candidate = directory / name
            if candidate.is_file():
                return candidate
    return None


def project_stacks_dir(project: Path) -> Path:
    """Where the project keeps its ``Pulumi.<stack>.yaml`` files: ``stackConfigDir`` relative to the project file's
    directory, or that directory itself (``ProjectStackPath`` in pulumi ``workspace/paths.go``)."""
    from gb300.errors import DataError  # noqa: PLC0415 - only the CLI's --stack needs these
    from gb300.facts.loader import read_yaml  # noqa: PLC0415 - the one YAML reader (it imports this module)

    try:
        doc = read_yaml(project)
    except DataError:
        doc = None
    config_dir = doc.get("stackConfigDir") if isinstance(doc, dict) else None
    return project.parent / config_dir if isinstance(config_dir, str) and config_dir else project.parent


def project_stack_file(project: Path, name: str) -> Path:
    """``Pulumi.<name>`` with the project file's extension, in the project's stack directory."""
    return project_stacks_dir(project) / f"Pulumi.{name}{project.suffix}"


def project_stack_names(project: Path) -> list[str]:
    """The stacks the project's stack directory holds, sorted."""
    folder = project_stacks_dir(project)
    return sorted(
        p.name.removeprefix("Pulumi.").removesuffix(project.suffix) for p in folder.glob(f"Pulumi.*{project.suffix}")
    )
