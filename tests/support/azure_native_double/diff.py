"""What azure-native's ``Diff`` reports: a detailed diff of old and new inputs, each change marked as a replacement
when its property is one the provider's metadata says forces a new resource.

This follows pulumi/pulumi-azure-native ``provider/pkg/provider/diff.go`` (``calculateDetailedDiff``): every
parameter in the resource's path (resource group, name, parent names, scope) replaces; a body property with
``forceNew`` replaces, top-level (``location``), inside an object (``sku.name``) or in every element of an array
(``ipConfigurations[].subnet``); an update under a replacing object replaces too; the top-level ``location``
compares without case or spaces (``applyAzureSpecificDiff``). ``provider.go`` ``Diff`` then sets
``deleteBeforeReplace`` whenever anything replaces (gb300 names every resource, nothing is auto-named at random).

The provider reads ``forceNew`` from metadata generated into its binary, which cannot be loaded here; the double
keeps the table of the types gb300 declares in ``replacements.yaml`` beside this module, with its source. The same
table names each type's write-only properties (``writeOnly``: accepted on PUT, never returned on GET), which
:func:`without_write_only` leaves out of what the double answers.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's unknown-value sentinel (pulumi sdk rpc.py)
TABLE = Path(__file__).with_name("replacements.yaml")

# pulumirpc.PropertyDiff.Kind
ADD, ADD_REPLACE, DELETE, DELETE_REPLACE, UPDATE, UPDATE_REPLACE = range(6)
_REPLACING = {ADD: ADD_REPLACE, DELETE: DELETE_REPLACE, UPDATE: UPDATE_REPLACE}


@dataclass(frozen=True)
class TypeInfo:
    """What the double knows of one azure-native resource type."""

    token: str  # azure-native:<module>:<Resource>
    arm_type: str  # Microsoft.<Namespace>/<collection>
    path: tuple[str, ...]  # the inputs that address the resource (replace on change)
    force_new: tuple[str, ...]  # body properties marked forceNew (replace on change)
    write_only: tuple[str, ...] = ()  # dotted input paths ARM takes on PUT and leaves out of GET

    @property
    def replace_keys(self) -> frozenset[str]:
        return frozenset((*self.path, *self.force_new))


@functools.cache
def table() -> dict[str, TypeInfo]:
    """azure-native token -> :class:`TypeInfo`, from ``replacements.yaml``."""
    raw = yaml.safe_load(TABLE.read_text(encoding="utf-8"))
    default_force_new = tuple(raw.get("tracked", {}).get("forceNew", ()))
    out: dict[str, TypeInfo] = {}
    for token, entry in raw["types"].items():
        force_new = tuple(entry.get("forceNew", ()))
        if entry.get("tracked", True):
            force_new = (*default_force_new, *force_new)
        path = tuple(entry.get("path", ()))
        out[token] = TypeInfo(token, entry["arm"], path, force_new, tuple(entry.get("writeOnly", ())))
    return out


def without_write_only(info: TypeInfo, value: Mapping[str, Any]) -> dict[str, Any]:
    """``value`` (inputs or outputs, in the SDK's shape) without the type's write-only properties: what a GET of
    the resource answers. A path through a missing or non-object value leaves ``value`` as it is."""
    out = dict(value)
    for dotted in info.write_only:
        *parents, leaf = dotted.split(".")
        node: dict[str, Any] = out
        for key in parents:
            child = node.get(key)
            if not isinstance(child, Mapping):
                break
            node[key] = dict(child)  # a copy: ``value`` itself stays whole
            node = node[key]
        else:
            node.pop(leaf, None)
    return out


def _plain(value: Any) -> Any:
    """Drop nulls, as the provider unmarshals with ``SkipNulls``."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _location(value: Any) -> Any:
    return value.replace(" ", "").lower() if isinstance(value, str) and value != UNKNOWN else value


class _Differ:
    def __init__(self, replace_keys: frozenset[str]) -> None:
        self.replace_keys = replace_keys
        self.found: dict[str, int] = {}

    def _mark(self, path: str, key: str, kind: int) -> None:
        self.found[path] = _REPLACING[kind] if key in self.replace_keys else kind

    def objects(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str, key: str) -> None:
        for name in sorted(set(old) | set(new)):
            where, replace_key = f"{path}{name}", f"{key}{name}"
            if name not in old:
                self._mark(where, replace_key, ADD)
            elif name not in new:
                self._mark(where, replace_key, DELETE)
            else:
                self.values(old[name], new[name], where, replace_key)

    def values(self, old: Any, new: Any, path: str, key: str) -> None:
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            before = len(self.found)
            self.objects(old, new, f"{path}.", f"{key}.")
            if key in self.replace_keys and len(self.found) > before:  # a replacing object's updates replace
                for where in [p for p in self.found if p.startswith(f"{path}.")]:
                    if self.found[where] == UPDATE:
                        self.found[where] = UPDATE_REPLACE
        elif isinstance(old, list) and isinstance(new, list):
            for i in range(max(len(old), len(new))):
                if i >= len(old):
                    self.found[f"{path}[{i}]"] = ADD
                elif i >= len(new):
                    self.found[f"{path}[{i}]"] = DELETE
                else:
                    self.values(old[i], new[i], f"{path}[{i}]", f"{key}[]")
        elif old != new or new == UNKNOWN:
            self._mark(path, key, UPDATE)


def detailed_diff(info: TypeInfo, old_inputs: Mapping[str, Any], new_inputs: Mapping[str, Any]) -> dict[str, int]:
    """Property path -> :class:`pulumirpc.PropertyDiff` kind, for every input that differs."""
    old, new = _plain(old_inputs), _plain(new_inputs)
    if "location" in old and "location" in new and _location(old["location"]) == _location(new["location"]):
        new = {**new, "location": old["location"]}
    differ = _Differ(info.replace_keys)
    differ.objects(old, new, "", "")
    return differ.found


_TOP = re.compile(r"^[^.\[]+")


def top_level(paths: Mapping[str, int], *, replacing: bool) -> list[str]:
    """The top-level properties of a detailed diff (only those that replace, with ``replacing``)."""
    wanted = {ADD_REPLACE, DELETE_REPLACE, UPDATE_REPLACE} if replacing else set(range(6))
    return sorted({m.group(0) for p, kind in paths.items() if kind in wanted and (m := _TOP.match(p))})
