"""What every rule shares: the context it reads, its signature, and small readers for resource inputs.

A rule is a pure function ``(resources, context) -> findings``. It reads the camelCase inputs of the
resources (the plan's records and the policy pack's resources look alike), never calls the cloud, and
never raises: a missing or odd property means "cannot know", and the rule says nothing about it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gb300.azure.inventory import Resource
from gb300.config import PolicySettings
from gb300.findings import Finding

if TYPE_CHECKING:
    from gb300.azure.quota import QuotaSnapshot

AZURE_NATIVE = "azure-native:"
# What the policy pack puts where a preview cannot know a value yet (the id of a resource not created).
UNKNOWN = "(known after deployment)"
# Source prefixes that mean "anyone on the Internet" in an NSG rule (compared case-insensitively).
# S104 flags "0.0.0.0" as a bind address; here it is a value to match, not an address to bind.
OPEN_SOURCES = frozenset({"*", "internet", "any", "0.0.0.0/0", "0.0.0.0", "::/0"})  # noqa: S104


@dataclass(frozen=True)
class RuleContext:
    """What a rule may read besides the resources: the policy settings and, for quota, Azure's usage."""

    policy: PolicySettings = field(default_factory=PolicySettings)
    quota: QuotaSnapshot | None = None


Rule = Callable[[Sequence[Resource], RuleContext], Iterable[Finding]]


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one (odd input never raises)."""
    return value if isinstance(value, Mapping) else {}


def items(value: Any) -> list[Any]:
    """``value`` as a list when it is a list or tuple, else an empty list."""
    return list(value) if isinstance(value, list | tuple) else []


def text(value: Any) -> str | None:
    """``value`` when it is a string, else None."""
    return value if isinstance(value, str) else None


def whole(value: Any) -> int | None:
    """``value`` as an int when it is a whole number (protobuf hands numbers over as floats), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def network(value: Any) -> ipaddress.IPv4Network | None:
    """An IPv4 CIDR string as a network, or None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        return ipaddress.IPv4Network(value, strict=False)
    except ValueError:
        return None


def tags_of(resource: Resource) -> Mapping[str, Any]:
    return mapping(resource.inputs.get("tags"))


def short(resource: Resource) -> str:
    """A resource's name as users read it in messages: its Azure name, else its Pulumi name."""
    inputs = resource.inputs
    for key in ("resourceName", "name"):
        value = inputs.get(key)
        if isinstance(value, str) and value:
            return value
    return resource.name


def count(n: int, noun: str) -> str:
    """``count(3, 'VM')`` -> ``'3 VMs'``, with thousands separators."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def is_azure(resource: Resource) -> bool:
    return resource.type.startswith(AZURE_NATIVE)


def all_findings(*groups: Iterable[Finding]) -> list[Finding]:
    out: list[Finding] = []
    for group in groups:
        out.extend(group)
    return out
