"""Where the raw ``gb300`` namespace comes from: a stack file (``gb300 plan``) or the Pulumi engine (``pulumi up``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gb300.config import stack_yaml
from gb300.config.checks import (
    NAMESPACE,
)
from gb300.errors import ConfigError, Problem


def namespace_from_stack_config(config: Mapping[str, Any], *, project: str = NAMESPACE) -> dict[str, Any]:
    """The ``gb300`` keys of a stack file's ``config:`` block, prefix removed. Other namespaces are ignored."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        ns, sep, name = str(key).partition(":")
        if not sep:
            ns, name = project, str(key)
        if ns == NAMESPACE:
            out[name] = value
    return out


def load_stack_file(path: Path) -> dict[str, Any]:
    """Read a stack file and return its ``gb300`` namespace. Raises ConfigError naming the file.

    The file is read as strict YAML (:mod:`gb300.config.stack_yaml`): bounded in size, UTF-8, no duplicate keys,
    no alias bombs.
    """
    return stack_namespace(stack_yaml.load(path), path)


def load_stack_text(text: str, path: Path) -> dict[str, Any]:
    """:func:`load_stack_file` of text in memory that will become ``path``: nothing is written to read it."""
    return stack_namespace(stack_yaml.parse(text, path), path)


def stack_namespace(doc: Any, path: Path) -> dict[str, Any]:
    """The ``gb300`` namespace of a stack file's document (:func:`load_stack_file`, or ``gb300 init``'s text
    parsed in memory); ``path`` names the file in the message."""
    doc = doc or {}
    if not isinstance(doc, dict) or not isinstance(doc.get("config", {}), dict):
        raise ConfigError([Problem(str(path), "must be a Pulumi stack file with a 'config:' mapping")])
    return namespace_from_stack_config(doc.get("config") or {})


def to_pulumi_config(raw: Mapping[str, Any]) -> dict[str, str]:
    """The namespace as the Pulumi engine hands it to a program: ``gb300:key`` -> JSON text."""
    return {f"{NAMESPACE}:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()}


def from_pulumi_config(values: Mapping[str, str]) -> dict[str, Any]:
    """Inverse of :func:`to_pulumi_config`, for the engine's config map (``gb300:key`` -> text)."""
    out: dict[str, Any] = {}
    for key, text in values.items():
        ns, _, name = key.partition(":")
        if ns != NAMESPACE:
            continue
        try:
            out[name] = json.loads(text)
        except (TypeError, ValueError):
            out[name] = text
    return out
