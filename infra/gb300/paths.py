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
