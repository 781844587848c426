"""Where the toolkit's files live. gb300 runs from a checkout (an editable install), like the Pulumi program."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
DATA_DIR = PACKAGE_DIR / "data"
REPO_ROOT = PACKAGE_DIR.parents[1]
TEMPLATES_DIR = REPO_ROOT / "templates"
CLOUD_INIT_DIR = REPO_ROOT / "cloud-init"
POLICIES_DIR = REPO_ROOT / "policies"
PROJECT_FILE = REPO_ROOT / "Pulumi.yaml"


def _project_doc(project: Path) -> dict[str, object]:
    from gb300.facts import loader  # noqa: PLC0415 - stdlib only at import: shipped alone to the head (gb300.heal.deploy)

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
