"""The head stays: day-2 edits that reach only the nodes' payloads leave the head VM's inputs byte-identical, so
`pulumi up` neither updates nor replaces it; a change that really needs a new head (its image) still errors
against the deployed state. The head takes the new payload in place (`gb300-payload-update`, docs/node-payload.md).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli
from gb300.plan import PlanResult, run_plan
from gb300.rules import destroy
from tests.support.state import write_stack_export

HEAD_VM = "azure-native:compute:VirtualMachine"


def _head_inputs(plan: PlanResult) -> str:
    (head,) = [r for r in plan.resources if r.type == HEAD_VM]
    return json.dumps(head.inputs, sort_keys=True)


def _add_pool(raw: dict[str, Any]) -> None:
    raw["gpuPools"].append({**raw["gpuPools"][0], "name": "extra", "racks": 2})


def _add_mount(raw: dict[str, Any]) -> None:
    raw["storage"]["blob"]["containers"].append(
        {"name": "scratch", "access": "readWrite", "mountPath": "/mnt/blob/scratch"}
    )


def _pin(raw: dict[str, Any]) -> None:
    raw["software"] = {**raw.get("software", {}), "nccl": "2.29.2-1+cuda13.0"}


@pytest.mark.parametrize(
    "edit",
    [pytest.param(_add_pool, id="add-pool"), pytest.param(_add_mount, id="add-mount"), pytest.param(_pin, id="pin")],
)
def test_day2_edits_leave_the_head_inputs_byte_identical(
    edit: Callable[[dict[str, Any]], None], reference_raw: dict[str, Any], reference_plan: PlanResult
) -> None:
    raw = copy.deepcopy(reference_raw)
    edit(raw)
    changed = run_plan("reference", raw)
    assert changed.resources != reference_plan.resources  # the edit did change the plan
    assert _head_inputs(changed) == _head_inputs(reference_plan)


def test_a_new_head_image_still_errors_against_the_deployed_state(
    write_stack: Any, reference_raw: dict[str, Any], reference_plan: PlanResult, tmp_path: Path
) -> None:
    state = write_stack_export(tmp_path / "state.json", reference_plan)
    raw = copy.deepcopy(reference_raw)
    raw.setdefault("head", {})["image"] = "canonical:ubuntu-24_04-lts:server:24.04.202611010"
    out = tmp_path / "plan.json"
    code = cli.main(
        ["plan", "--stack-file", str(write_stack(raw, "reference")), "--state", str(state), "--json", str(out)]
    )
    assert code == 1
    errors = [f for f in json.loads(out.read_text())["findings"] if f["level"] == "error"]
    assert any(f["rule"] == destroy.RULE_ID and "VM ref-head" in f["message"] for f in errors), errors
