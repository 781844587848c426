"""Where the toolkit's files live. gb300 runs from a checkout (an editable install), like the Pulumi program."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
DATA_DIR = PACKAGE_DIR / "data"
REPO_ROOT = PACKAGE_DIR.parents[1]
STACKS_DIR = REPO_ROOT / "stacks"
TEMPLATES_DIR = REPO_ROOT / "templates"
CLOUD_INIT_DIR = REPO_ROOT / "cloud-init"
POLICIES_DIR = REPO_ROOT / "policies"
PROJECT_FILE = REPO_ROOT / "Pulumi.yaml"


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
    # Imported here: this module is shipped alone (stdlib only) to the head's remediation loop (gb300.heal.deploy).
    from gb300.errors import DataError  # noqa: PLC0415
    from gb300.facts import loader  # noqa: PLC0415

    try:
        doc = loader.read_yaml(project)
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


def _project_doc(project: Path) -> dict[str, object]:
    from gb300.facts import loader  # noqa: PLC0415 - stdlib only at import (see project_stacks_dir)

    doc = loader.read_yaml(project)
    return doc if isinstance(doc, dict) else {}


def engine_pwd(project: Path = PROJECT_FILE) -> Path:
    """The directory the Pulumi engine runs the program and every provider plugin in: the project's ``main`` when it
    names a directory, the directory holding ``main`` when it names a file, else the project's own directory.

    pulumi/pulumi ``pkg/engine/project.go`` ``getPwdMain`` computes it; ``pkg/engine/deployment.go``
    ``ProjectInfoContext`` makes it the plugin context's ``Pwd``, and ``pkg/resource/plugin/plugin.go``
    ``newPlugin`` starts each provider with ``cmd.Dir = pwd`` (``provider_plugin.go`` ``NewProvider`` passes
    ``ctx.Pwd``). pulumi-command's ``local.Command`` without ``dir`` runs in its provider's working directory,
    so this is where the payload upload runs (docs/engine-contract.md#the-working-directory-of-providers)."""
    root = project.parent
    main = _project_doc(project).get("main")
    if not isinstance(main, str) or not main:
        return root
    target = root / main
    return target if target.is_dir() else target.parent


def project_virtualenv(project: Path = PROJECT_FILE) -> Path | None:
    """The virtual environment Pulumi's Python language host runs the program in: ``runtime.options.virtualenv``
    joined to the project's directory (not to ``main``): pulumi/pulumi ``sdk/python/toolchain/pip.go``
    ``resolveVirtualEnvironmentPath(root, virtualenv)``, ``root`` being the project's root directory
    (``sdk/python/cmd/pulumi-language-python/main.go`` ``parseOptions``). None when the project names none."""
    runtime = _project_doc(project).get("runtime")
    options = runtime.get("options") if isinstance(runtime, dict) else None
    venv = options.get("virtualenv") if isinstance(options, dict) else None
    if not isinstance(venv, str) or not venv:
        return None
    return project.parent / venv


def from_engine_pwd(target: Path, project: Path = PROJECT_FILE) -> str:
    """``target`` named relative to :func:`engine_pwd`, as a command the engine's providers run must name it:
    the same on every checkout (a command line is stored in the state; an absolute path would differ between
    checkouts and make the command run again)."""
    return os.path.relpath(target, engine_pwd(project))
