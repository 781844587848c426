"""`storage-data-loss` suggests an alias only when the plan declares the same Azure resource (same resource
group, account and name) under another URN; removing one container while another exists gets no alias advice,
since an alias there would make Pulumi take one container for the other."""

from __future__ import annotations

import dataclasses

import pytest

from gb300.findings import Level
from gb300.plan import PlanResult
from gb300.plan.state import parse_state
from gb300.resources import ResourceRecord
from gb300.rules.data_loss import data_loss
from tests.support.state import stack_export

DATASETS = "ref-blob-datasets"


def _container(plan: PlanResult) -> ResourceRecord:
    [rec] = [r for r in plan.resources if r.name == DATASETS]
    return rec


@pytest.mark.parametrize(
    ("change", "alias"),
    [
        pytest.param("remove", False, id="removed-while-checkpoints-remains"),
        pytest.param("moved", True, id="same-container-under-another-urn"),
        pytest.param("renamed", False, id="another-container-name-under-another-urn"),
    ],
)
def test_alias_advice_only_for_the_same_azure_resource(reference_plan: PlanResult, change: str, alias: bool) -> None:
    """The datasets container gone from its URN: an error either way; the alias advice (naming the deployed URN)
    only when the same container (ref-rg / account / datasets) is declared elsewhere."""
    deployed = parse_state(stack_export(reference_plan))
    old = _container(reference_plan)
    planned: list[ResourceRecord] = [r for r in reference_plan.resources if r is not old]
    if change != "remove":
        inputs = dict(old.inputs)
        if change == "renamed":
            inputs["containerName"] = "datasets2"
        planned.append(dataclasses.replace(old, urn=old.urn + "-moved", name=DATASETS + "-moved", inputs=inputs))
    [finding] = [f for f in data_loss(planned, deployed, ()) if f.resource == old.urn]
    assert finding.level is Level.ERROR
    assert f"the plan would delete the blob container and every blob in it ({DATASETS})" in finding.message
    assert ("alias" in finding.message) is alias
    if alias:
        assert f"give it the alias {old.urn} instead" in finding.message
        assert "/datasets" in finding.message
