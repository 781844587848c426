"""Pulumi state bytes of a plan: each resource's ``inputs`` map as the checkpoint stores it, per rack and per type.

A Pulumi checkpoint (``pulumi stack export``) keeps, for every resource, its ``inputs`` map (and its ``outputs``)
as JSON. The plan JSON records the inputs the program registered, camelCase as the provider receives them
(gb300 0.1's dynamic resources' ``__provider``, the pickled provider, included). This module measures them as
compact UTF-8 JSON: the backend's indentation and the ciphertext of the few secret inputs (shown as
``[secret]`` in the plan) come on top. Outputs are not counted: for most azure-native resources they repeat the
inputs and add what Azure computes.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

RACK_SCALE_SET = "rack-scale-set"  # gb300 0.1's dynamic rack marker (gb300Kind): the baseline's racks
SCALE_SET_SUFFIX = ":VirtualMachineScaleSet"  # the compute package's racks (not imported: the bench parent stays light)


def is_rack_scale_set(rec: Mapping[str, Any]) -> bool:
    """A rack's scale set in either shape: gb300 0.1's dynamic resource, or the compute package's scale set."""
    inputs = rec["inputs"]
    if inputs.get("gb300Kind") == RACK_SCALE_SET:
        return True
    return str(rec["type"]).endswith(SCALE_SET_SUFFIX) and "gb300-rack" in (inputs.get("tags") or {})


def input_bytes(inputs: Mapping[str, Any]) -> int:
    """Bytes of one resource's ``inputs`` map as compact JSON (UTF-8)."""
    return len(json.dumps(inputs, separators=(",", ":"), ensure_ascii=False).encode())


def by_type(resources: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per resource type: how many, and the bytes of their inputs together."""
    count: Counter[str] = Counter()
    size: Counter[str] = Counter()
    for rec in resources:
        count[rec["type"]] += 1
        size[rec["type"]] += input_bytes(rec["inputs"])
    return {t: {"count": count[t], "bytes": size[t]} for t in sorted(count)}


def custom_data_bytes(inputs: Mapping[str, Any]) -> int:
    """Length of a scale set's custom data (base64, as its model and the state hold it); 0 when it has none."""
    profile = inputs.get("virtualMachineProfile") or {}
    return len(str((profile.get("osProfile") or {}).get("customData") or ""))


def of_plan(plan_file: Path) -> dict[str, Any]:
    """Totals of one plan JSON: resources, input bytes, per type, and the largest rack scale set's inputs (by key,
    and its custom data)."""
    resources = json.loads(plan_file.read_text(encoding="utf-8"))["resources"]
    types = by_type(resources)
    racks = [r for r in resources if is_rack_scale_set(r)]
    largest = max(racks, key=lambda r: input_bytes(r["inputs"]), default=None)
    return {
        "resources": len(resources),
        "inputBytes": sum(t["bytes"] for t in types.values()),
        "byType": types,
        "rackScaleSets": len(racks),
        "rackScaleSetBytes": input_bytes(largest["inputs"]) if largest else 0,
        "rackScaleSetKeys": {k: input_bytes({k: v}) - 2 for k, v in largest["inputs"].items()} if largest else {},
        "rackCustomDataBytes": custom_data_bytes(largest["inputs"]) if largest else 0,
    }


def per_rack(small: Mapping[str, Any], large: Mapping[str, Any], racks_small: int, racks_large: int) -> dict[str, Any]:
    """What one more rack adds to the state: (large - small) / added racks, in bytes and resources, and per type.

    The difference of two plans of the same stack drops every resource declared once per cluster, so this is
    what grows with the cluster, whatever the program declares per rack.
    """
    added = racks_large - racks_small
    types = sorted(set(small["byType"]) | set(large["byType"]))
    rows = {}
    for t in types:
        s = small["byType"].get(t, {"count": 0, "bytes": 0})
        g = large["byType"].get(t, {"count": 0, "bytes": 0})
        if g["count"] != s["count"]:
            rows[t] = {"count": (g["count"] - s["count"]) / added, "bytes": (g["bytes"] - s["bytes"]) / added}
    return {
        "bytes": (large["inputBytes"] - small["inputBytes"]) / added,
        "resources": (large["resources"] - small["resources"]) / added,
        "byType": rows,
    }
