"""The one loader of gb300's facts: every YAML file gb300 ships is parsed here, and nowhere else.

The data files under ``infra/gb300/data/`` (facts with a ``source:`` and a ``status:``) are read once per
process (:func:`data`); role fragments, alert templates and test copies of data files are read by path
(:func:`read_mapping`, :func:`read_yaml`). A file that is missing, is not YAML or has the wrong shape raises
:class:`gb300.errors.DataError` naming it: a bug in gb300, never the user's input. The user's stack files have
their own strict reader (:mod:`gb300.config.stack_yaml`).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from gb300.errors import BootstrapDataError, DataError

__all__ = ["DATA_DIR", "data", "load_yaml_mapping", "read_mapping", "read_yaml", "string_field"]

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
"""``infra/gb300/data``, the folder :data:`gb300.paths.DATA_DIR` names: written here again because the loader is
below :mod:`gb300.paths`, which reads the Pulumi project file with :func:`read_yaml` (tests/facts/test_loader.py
holds the two to one folder)."""


# libyaml's parser with PyYAML's safe constructor and resolver (the values yaml.safe_load gives), several times
# faster on the files every plan reads; the pure-Python loader where PyYAML was built without libyaml.
_SAFE_LOADER: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> Any:
    """The document of a YAML file gb300 ships (any top level; an empty file is None)."""
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)  # noqa: S506 - a safe loader
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        msg = f"{path}: cannot be read as YAML ({exc})"
        raise DataError(msg) from exc


def read_mapping(path: Path) -> dict[str, Any]:
    """A YAML file whose top level must be a mapping."""
    loaded = read_yaml(path)
    if not isinstance(loaded, dict):
        msg = f"{path}: must hold a mapping at the top level (got {type(loaded).__name__})"
        raise DataError(msg)
    return loaded


@functools.cache
def _data(name: str) -> dict[str, Any]:
    return read_mapping(DATA_DIR / name)


def data(name: str) -> dict[str, Any]:
    """``infra/gb300/data/<name>``, parsed once per process; each caller gets its own copy to read or change."""
    return copy.deepcopy(_data(name))


def load_yaml_mapping(path: Path) -> dict[str, Any]:
    """A node bootstrap input (versions, checksums, a role fragment) whose top level must be a mapping; a malformed
    file raises :class:`~gb300.errors.BootstrapDataError`."""
    try:
        return read_mapping(path)
    except DataError as exc:
        raise BootstrapDataError(str(exc)) from exc


def string_field(raw: Mapping[str, Any], key: str, where: str, *, default: str | None = None) -> str:
    """``raw[key]`` (or ``default``), which must be a string; else BootstrapDataError naming ``where.key``."""
    value = raw.get(key, default)
    if not isinstance(value, str):
        msg = f"{where}.{key}: must be a string (got {value!r})"
        raise BootstrapDataError(msg)
    return value
