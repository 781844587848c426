"""The required-tags rule, as a table of resources and settings -> findings."""

from __future__ import annotations

import pytest

from gb300.config import PolicySettings
from gb300.resources import ResourceRecord
from tests.support.policy_support import TAGS, levels, record, run, subnet


def _rg(tags: object = TAGS) -> ResourceRecord:
    inputs = {"resourceGroupName": "t-rg", "location": "eastus2"}
    if tags is not None:
        inputs["tags"] = tags  # type: ignore[assignment]
    return record("azure-native:resources:ResourceGroup", "t-rg", inputs)


@pytest.mark.parametrize(
    ("resources", "policy", "expected"),
    [
        pytest.param([_rg()], PolicySettings(), [], id="compliant"),
        pytest.param([_rg({"gb300-cluster": "t"})], PolicySettings(), ["warning"], id="no-owner"),
        pytest.param([_rg(None)], PolicySettings(), ["warning"], id="property-absent"),
        pytest.param([_rg({"owner": ""})], PolicySettings(), ["warning"], id="empty-value"),
        pytest.param([_rg()], PolicySettings(requiredTags=["costCenter"]), ["warning"], id="configured-tag"),
        pytest.param([_rg({})], PolicySettings(requiredTags=[]), [], id="none-required"),
        pytest.param([subnet("gpu", "10.0.0.0/24")], PolicySettings(), [], id="untaggable-child"),
        pytest.param([record("gb300:compute:GpuPool", "c", {"location": "x"})], PolicySettings(), [], id="component"),
        pytest.param([_rg({}), _rg({"owner": "x"})], PolicySettings(), ["warning", "warning"], id="several"),
    ],
)
def test_required_tags(resources: list[ResourceRecord], policy: PolicySettings, expected: list[str]) -> None:
    """A taggable Azure resource lacking a required tag is a warning naming the tag and where to set it."""
    found = run("required-tags", resources, policy)
    assert levels(found) == expected
    for f in found:
        assert "gb300:cluster.tags" in f.message or "component" in f.message
