"""Find each role's custom data in a plan, decoded: what Azure would receive (base64 of gzip of the cloud-config).

The one place that knows where custom data sits in the plan's resources. It searches every resource's inputs
for a ``customData`` string and takes the role from the ``gb300-role`` tag (a GPU pool's ``gb300-pool`` tag
means ``gpu-node``) next to it (a scale set, whether
registered as its own resource type or as a dynamic resource carrying the ARM body; the head's VM), so a change
in how a resource is registered needs a change here only.
"""

from __future__ import annotations

import base64
import gzip
from collections.abc import Iterator, Mapping
from typing import Any

from gb300.plan import PlanResult


def _walk(value: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, Mapping):
        yield value
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def _role(inputs: Mapping[str, Any]) -> str | None:
    for mapping in _walk(inputs):
        tags = mapping.get("tags")
        if isinstance(tags, Mapping) and isinstance(tags.get("gb300-role"), str):
            return str(tags["gb300-role"])
        if isinstance(tags, Mapping) and "gb300-pool" in tags:
            return "gpu-node"  # GPU pools' scale sets carry their pool, not a role
    return None


def encoded_custom_data(plan: PlanResult) -> dict[str, str]:
    """Role -> the base64 custom data the plan sends to Azure (one per role; pools of a role must agree)."""
    found: dict[str, str] = {}
    for resource in plan.resources:
        data = next((m["customData"] for m in _walk(resource.inputs) if isinstance(m.get("customData"), str)), None)
        if data is None:
            continue
        role = _role(resource.inputs)
        if role is None:
            raise AssertionError(f"{resource.name}: custom data without a gb300-role tag")
        found.setdefault(role, data)
    return found


def decode(data: str) -> str:
    """The cloud-config text of base64(gzip(text)) custom data."""
    return gzip.decompress(base64.b64decode(data)).decode("utf-8")


def cloud_config(plan: PlanResult, role: str) -> str:
    """The decoded cloud-config ``role`` boots with in ``plan``."""
    return decode(encoded_custom_data(plan)[role])
