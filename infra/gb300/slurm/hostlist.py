"""Slurm hostlist expressions: compress host names to ``gpu-r01-[001-018]`` and expand them back.

Only the trailing number of a name is ranged (``gpu-r01-007`` -> prefix ``gpu-r01-``, number ``007``);
names that do not end in digits are kept as they are. Zero padding is kept exactly: a range is only
formed from numbers that print with the width of its first number, as Slurm expands them.
Stdlib only: the controller runs this module from a shipped copy (see ``cloud-init/slurm/README.md``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")
_BRACKET = re.compile(r"^(?P<prefix>[^\[\]]*)\[(?P<ranges>[^\[\]]+)\](?P<suffix>[^\[\]]*)$")


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders ``gpu-9`` before ``gpu-10`` (digit runs compare as numbers)."""
    parts = re.split(r"(\d+)", name)
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts if p)


def _format_run(first: str, last_value: int) -> str:
    if int(first) == last_value:
        return first
    return f"{first}-{str(last_value).zfill(len(first))}"


def _runs(numbers: list[str]) -> list[str]:
    """Consecutive runs of number strings, each padded like its first member."""
    ordered = sorted(set(numbers), key=lambda s: (int(s), len(s)))
    runs: list[str] = []
    first = ordered[0]
    last = int(first)
    for text in ordered[1:]:
        value = int(text)
        if value == last + 1 and str(value).zfill(len(first)) == text:
            last = value
            continue
        runs.append(_format_run(first, last))
        first, last = text, value
    runs.append(_format_run(first, last))
    return runs


def compress(hosts: Iterable[str]) -> str:
    """The shortest deterministic Slurm hostlist for ``hosts`` (duplicates collapse; empty -> "")."""
    by_prefix: dict[str, list[str]] = {}
    literals: set[str] = set()
    for host in hosts:
        match = _TRAILING_NUMBER.match(host)
        if match is None:
            literals.add(host)
        else:
            by_prefix.setdefault(match.group(1), []).append(match.group(2))
    parts: list[tuple[tuple[tuple[int, int | str], ...], str]] = []
    for prefix, numbers in by_prefix.items():
        runs = _runs(numbers)
        single = len(runs) == 1 and "-" not in runs[0]
        text = f"{prefix}{runs[0]}" if single else f"{prefix}[{','.join(runs)}]"
        parts.append((natural_key(prefix), text))
    parts.extend((natural_key(name), name) for name in literals)
    return ",".join(text for _, text in sorted(parts))


def _split_top_level(expression: str) -> list[str]:
    items: list[str] = []
    depth = 0
    current = ""
    for char in expression:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    return [item for item in items if item]


def expand(expression: str) -> list[str]:
    """Host names of a hostlist with at most one bracket per item, in written order.

    Raises ValueError for an expression this module cannot read (nested or several brackets).
    """
    hosts: list[str] = []
    for item in _split_top_level(expression.strip()):
        if "[" not in item and "]" not in item:
            hosts.append(item)
            continue
        match = _BRACKET.match(item)
        if match is None:
            raise ValueError(f"hostlist item must have one [ranges] part (got {item!r})")
        for part in match.group("ranges").split(","):
            low, _, high = part.partition("-")
            if not low.isdigit() or (high and not high.isdigit()):
                raise ValueError(f"hostlist range must be numbers like 001-018 (got {part!r})")
            for value in range(int(low), int(high or low) + 1):
                hosts.append(f"{match.group('prefix')}{str(value).zfill(len(low))}{match.group('suffix')}")
    return hosts
