"""Where the bootstrap's inputs live in the repository, and small loaders for them."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import yaml

from gb300.bootstrap.errors import BootstrapDataError

__all__ = [
    "CLOUD_INIT_DIR",
    "DATA_DIR",
    "REPO_ROOT",
    "TEMPLATES_DIR",
    "load_yaml_mapping",
]


def _repo_root() -> Path:
    # gb300.paths (the foundation's) names the repository root; fall back to this file's position:
    # infra/gb300/bootstrap/resources.py -> parents[3] is the repository root.
    try:
        paths = importlib.import_module("gb300.paths")
    except ImportError:
        return Path(__file__).resolve().parents[3]
    return Path(paths.REPO_ROOT)


REPO_ROOT: Path = _repo_root()
DATA_DIR: Path = Path(__file__).resolve().parents[1] / "data"
CLOUD_INIT_DIR: Path = REPO_ROOT / "cloud-init"
TEMPLATES_DIR: Path = REPO_ROOT / "templates"


# libyaml's parser with PyYAML's safe constructor and resolver (the same values as yaml.safe_load), several times
# faster on the data files every plan reads; the pure-Python loader where PyYAML was built without libyaml.
SAFE_LOADER: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_mapping(path: Path) -> dict[str, Any]:
    """Read a YAML file whose top level must be a mapping."""
    try:
        loaded = yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)  # noqa: S506 - a safe loader
    except (OSError, yaml.YAMLError) as exc:
        msg = f"{path}: cannot be read as YAML ({exc})"
        raise BootstrapDataError(msg) from exc
    if not isinstance(loaded, dict):
        msg = f"{path}: must hold a mapping at the top level (got {type(loaded).__name__})"
        raise BootstrapDataError(msg)
    return loaded
