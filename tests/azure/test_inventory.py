"""Scale set views: read once while one assessment runs, afresh in the next."""

from __future__ import annotations

from gb300 import rules
from gb300.azure import inventory
from gb300.config import PolicySettings
from tests.support.policy_support import scale_set


def test_one_assessment_reads_each_scale_set_once() -> None:
    """Inside shared_reads every rule gets the same view of a scale set; outside, each call reads it again."""
    rack = scale_set()
    with inventory.shared_reads():
        assert inventory.scale_set(rack) is inventory.scale_sets([rack])[0]
    assert inventory.scale_set(rack) is not inventory.scale_set(rack)


def test_the_next_assessment_sees_a_changed_resource() -> None:
    """Planning again in one process (a test session plans many stacks) judges the records as they are now."""
    rack = scale_set(capacity=18)
    assert not [f for f in rules.evaluate([rack], PolicySettings()) if f.rule == "gpu-pool-rack-aligned"]
    rack.inputs["sku"]["capacity"] = 19
    found = [f for f in rules.evaluate([rack], PolicySettings()) if f.rule == "gpu-pool-rack-aligned"]
    assert len(found) == 1
    assert "(got 19)" in found[0].message
