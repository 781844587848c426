"""The mocks answer a rack's scale set and logs association with their name only (docs/scale.md, "What a plan costs").

That saves the plan about a tenth of its CPU at 1,388 racks; it is safe only while the program reads nothing of those
resources but their id. These tests plan the shipped stacks, and a pool of classic-size scale sets, both ways and
require the same plan.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300.plan.mocks import NAME_ONLY_ANSWERS, AzureMocks
from gb300.plan.runner import register
from gb300.resources import ResourceRecord


def _both_ways(stack: str, raw: dict[str, Any]) -> tuple[list[ResourceRecord], list[ResourceRecord]]:
    return register(stack, raw), register(stack, raw, mocks=AzureMocks(echo_all=True))


@pytest.mark.parametrize("stack", ["reference", "dev"])
def test_name_only_answers_change_nothing_the_plan_records(
    stack: str, reference_raw: dict[str, Any], dev_raw: dict[str, Any]
) -> None:
    raw = copy.deepcopy(reference_raw if stack == "reference" else dev_raw)
    trimmed, echoed = _both_ways(stack, raw)
    answered = {r.type for r in trimmed} & NAME_ONLY_ANSWERS
    assert answered == NAME_ONLY_ANSWERS, f"the {stack} plan no longer declares {NAME_ONLY_ANSWERS - answered}"
    assert [r.as_json() for r in trimmed] == [r.as_json() for r in echoed]


def test_a_classic_pool_plans_the_same_with_name_only_answers(reference_raw: dict[str, Any]) -> None:
    """A classic-size pool (one scale set, no racks) uses the same scale set type."""
    raw = copy.deepcopy(reference_raw)
    pool = copy.deepcopy(raw["gpuPools"][0])
    pool.update(name="h100", vmSize="Standard_ND96isr_H100_v5", racks=2, image="microsoft-dsvm:ubuntu-hpc:2404:latest")
    raw["gpuPools"].append(pool)
    trimmed, echoed = _both_ways("reference", raw)
    assert [r for r in trimmed if r.type in NAME_ONLY_ANSWERS and "h100" in r.name]
    assert [r.as_json() for r in trimmed] == [r.as_json() for r in echoed]
