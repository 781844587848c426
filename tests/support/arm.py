"""ARM request bodies from the inputs a typed azure-native resource recorded in the plan."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["arm_body"]

_TOP = frozenset({"location", "kind", "tags"})


def arm_body(inputs: Mapping[str, Any], path_keys: Iterable[str]) -> dict[str, Any]:
    """The ARM body azure-native sends for ``inputs``: location, kind and tags at the top, every other input
    under ``properties`` except ``path_keys`` (the inputs that name the resource in the URL)."""
    left_out = _TOP | set(path_keys)
    return {
        **{k: v for k, v in inputs.items() if k in _TOP},
        "properties": {k: v for k, v in inputs.items() if k not in left_out},
    }
