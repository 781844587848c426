"""Where the bootstrap's inputs live in the repository, and small loaders for them."""

from __future__ import annotations

from pathlib import Path

from gb300 import paths
from gb300.facts.loader import load_yaml_mapping

__all__ = [
    "CLOUD_INIT_DIR",
    "DATA_DIR",
    "REPO_ROOT",
    "TEMPLATES_DIR",
    "load_yaml_mapping",
]


REPO_ROOT: Path = paths.REPO_ROOT
DATA_DIR: Path = paths.DATA_DIR
CLOUD_INIT_DIR: Path = paths.CLOUD_INIT_DIR
TEMPLATES_DIR: Path = paths.TEMPLATES_DIR
