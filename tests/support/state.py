"""A plan as deployed: the ``pulumi stack export`` document (checkpoint version 3) that ``gb300 plan --state`` reads.

Every resource of the plan, with the inputs the engine would have stored for it and no outputs; ``inputs`` edits
one resource's inputs to stand for a deployment that differs from the plan (a smaller filesystem, no blob tie).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gb300.plan import PlanResult
from gb300.plan.mocks import SUBSCRIPTION_ID
from gb300.resources import ResourceRecord

InputsOf = Callable[[ResourceRecord], dict[str, Any]]


def stack_export(
    plan: PlanResult, *, inputs: InputsOf | None = None, subscription: str | None = None
) -> dict[str, Any]:
    """The export of ``plan`` as deployed; ``inputs(resource)`` gives its stored inputs (default: the plan's);
    ``subscription``: each resource id names it in place of the mocks' (Azure's real address of the resource)."""

    def deployed_id(resource_id: str | None) -> str | None:
        if subscription is None or resource_id is None:
            return resource_id
        return resource_id.replace(SUBSCRIPTION_ID, subscription)

    resources = [
        {
            "urn": r.urn,
            "type": r.type,
            "id": deployed_id(r.id),
            "inputs": r.inputs if inputs is None else inputs(r),
            "outputs": {},
        }
        for r in plan.resources
    ]
    return {"version": 3, "deployment": {"manifest": {}, "resources": resources}}


def write_stack_export(
    path: Path, plan: PlanResult, *, inputs: InputsOf | None = None, subscription: str | None = None
) -> Path:
    """Write :func:`stack_export` of ``plan`` to ``path`` (a file) and return it."""
    path.write_text(json.dumps(stack_export(plan, inputs=inputs, subscription=subscription)), encoding="utf-8")
    return path
