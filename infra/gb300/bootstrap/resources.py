"""Where the bootstrap's inputs live in the repository, and small loaders for them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gb300 import paths
from gb300.bootstrap.errors import BootstrapDataError
from gb300.errors import DataError
from gb300.facts.loader import read_mapping

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


def load_yaml_mapping(path: Path) -> dict[str, Any]:
    """A bootstrap input whose top level must be a mapping, read by the facts loader
    (:func:`gb300.facts.loader.read_mapping`); a malformed file raises :class:`BootstrapDataError`."""
    try:
        return read_mapping(path)
    except DataError as exc:
        raise BootstrapDataError(str(exc)) from exc
