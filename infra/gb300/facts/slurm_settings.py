"""Which Slurm settings a stack may set, and how each is checked, from ``data/slurm_options.yaml``.

The release lists (``releases:``) say which keys a Slurm release knows; ``settings:`` says which of them gb300 owns
(refused, with the reason and the gb300 key to use), how a value is typed, and which keys a release reads as
something else (deprecated, with the replacement). :func:`problems` checks one mapping of settings (slurm.conf
keys, or one partition's keys) against them for one release and returns ``(key, message)`` pairs; the config layer
turns them into key-path errors.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gb300.facts.loader import data

__all__ = ["LINES", "Owned", "catalog_releases", "owned", "problems", "release_of", "render_value"]

LINES = ("slurm_conf", "partition_line")
"""The kinds of settings a stack sets: slurm.conf keys, and keys of a PartitionName= line."""
_RELEASE = re.compile(r"^(?:\d+:)?(\d{2})\.(\d{2})(?:[.-]|$)")
_TIME = re.compile(r"^(?:INFINITE|UNLIMITED|\d+|\d+:\d{1,2}(?::\d{1,2})?|\d+-\d{1,2}(?::\d{1,2}(?::\d{1,2})?)?)\Z")
_WORD = re.compile(r"^[^\s#\"'\\]+\Z")
_BOOL = {"yes": True, "no": False, "true": True, "false": False}


@dataclass(frozen=True)
class Owned:
    """A key gb300 renders itself: why, and the gb300 key that sets it (None: none does)."""

    reason: str
    use: str | None


def release_of(version: str) -> str | None:
    """The release (``25.11``) of a Slurm package version (``25.11.5``, ``2:26.05.5-1``); None when it has none."""
    match = _RELEASE.match(version)
    return f"{match[1]}.{match[2]}" if match else None


@functools.cache
def _raw() -> dict[str, Any]:
    return data("slurm_options.yaml")


def catalog_releases() -> tuple[str, ...]:
    """The releases whose option lists the catalog holds."""
    return tuple(str(release) for release in _raw()["releases"])


@functools.cache
def _known(release: str, line: str) -> dict[str, str]:
    """Lower-cased key -> the key as Slurm documents it, for ``line`` of ``release``."""
    return {str(key).lower(): str(key) for key in _raw()["releases"][release][line]}


@functools.cache
def _owned(line: str) -> dict[str, Owned]:
    entries = _raw()["settings"]["owned"][line]
    return {str(key).lower(): Owned(str(v["reason"]), v.get("use")) for key, v in entries.items()}


def owned(line: str, key: str) -> Owned | None:
    """Whether gb300 owns ``key`` of ``line`` (a ``Prefix*`` entry covers every key starting so)."""
    table = _owned(line)
    lower = key.lower()
    if lower in table:
        return table[lower]
    return next((v for k, v in table.items() if k.endswith("*") and lower.startswith(k[:-1])), None)


def _type_of(line: str, key: str) -> str:
    types = {str(k).lower(): str(v) for k, v in _raw()["settings"]["types"][line].items()}
    return types.get(key.lower(), "word")


def _deprecation(line: str, key: str, value: str, release: str) -> str | None:
    for entry in _raw()["settings"]["deprecated"]:
        if entry["line"] != line or str(entry["key"]).lower() != key.lower():
            continue
        if "value" in entry and str(entry["value"]).lower() != value.lower():
            continue
        if _release_key(str(entry["since"])) <= _release_key(release):
            written = f"{entry['key']}={entry['value']}" if "value" in entry else str(entry["key"])
            return f"{written} is deprecated in Slurm {release} (since {entry['since']}); use {entry['use']} instead"
    return None


def _release_key(release: str) -> tuple[int, int]:
    year, _, month = release.partition(".")
    return int(year), int(month)


def render_value(line: str, key: str, value: object) -> str:
    """A checked value as slurm.conf writes it: a bool as YES/NO, anything else as its text."""
    if isinstance(value, bool):
        return "YES" if value else "NO"
    if _type_of(line, key) == "bool" and str(value).lower() in _BOOL:
        return "YES" if _BOOL[str(value).lower()] else "NO"
    return str(value)


def _value_problem(line: str, key: str, value: object) -> str | None:
    kind = _type_of(line, key)
    text = str(value)
    if kind == "int" and (isinstance(value, bool) or not re.fullmatch(r"\d+", text)):
        return f"must be a whole number of at least 0 (got {value!r})"
    if kind == "bool" and not isinstance(value, bool) and text.lower() not in _BOOL:
        return f"must be true or false (or YES/NO) (got {value!r})"
    if kind == "time" and not _TIME.match(text):
        return f"must be minutes, [days-]hours:minutes[:seconds] or INFINITE (got {value!r})"
    if isinstance(value, bool) and kind != "bool":
        return f"must be a word, not true/false (got {value!r}); quote it in YAML"
    if not _WORD.match(text):
        return f"must be one word without spaces, quotes, backslashes or '#' (got {value!r})"
    return None


def _key_problem(line: str, key: str, release: str) -> str | None:
    where = "slurm.conf key" if line == "slurm_conf" else "partition key"
    found = owned(line, key)
    if found is not None:
        instead = f"; set {found.use} instead" if found.use else ""
        return f"is set by gb300 ({found.reason}){instead}"
    known = _known(release, line)
    if key.lower() not in known:
        close = difflib.get_close_matches(key, list(known.values()), n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]}?" if close else ""
        return f"unknown {where} in Slurm {release}{hint}"
    return None


def problems(line: str, settings: Mapping[str, object], release: str) -> list[tuple[str, str]]:
    """``(key, message)`` for every setting of ``line`` that ``release`` does not accept as gb300 would render it.

    ``release`` must be one of :func:`catalog_releases`.
    """
    found: list[tuple[str, str]] = []
    for key, value in settings.items():
        message = _deprecation(line, key, str(value), release) or _key_problem(line, key, release)
        if message is None:
            message = _value_problem(line, key, value)
        if message is not None:
            found.append((key, message))
    return found
