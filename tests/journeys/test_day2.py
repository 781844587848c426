"""Day-2 safety against an export of the deployed reference stack: what destroys machines, data or addresses
fails the plan unless gb300:allowDestroy names it, and growing the pool or toggling Bastion moves no subnet."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli, config
from gb300 import tags as gb300_tags
from gb300.errors import ConfigError
from gb300.plan import PlanResult, run_plan
from gb300.plan.mocks import SUBSCRIPTION_ID
from gb300.plan.state import parse_state
from gb300.rules import destroy
from tests.support.state import stack_export, write_stack_export

RULE = destroy.RULE_ID


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory, reference_plan: PlanResult) -> Path:
    """The deployed reference stack's export, written once."""
    return write_stack_export(tmp_path_factory.mktemp("state") / "state.json", reference_plan)


def _plan(write_stack: Any, raw: dict[str, Any], state: Path, tmp_path: Path) -> tuple[int, list[dict[str, Any]]]:
    """Exit code and findings of ``gb300 plan --state`` for the stack ``raw``."""
    out = tmp_path / "plan.json"
    code = cli.main(
        ["plan", "--stack-file", str(write_stack(raw, "reference")), "--state", str(state), "--json", str(out)]
    )
    return code, json.loads(out.read_text())["findings"] if out.exists() else []


def _errors(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in findings if f["rule"] == RULE and f["level"] == "error"]


def test_a_real_subscription_in_the_state_changes_nothing(
    write_stack: Any, reference_raw: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An export of the stack deployed in a real subscription (its ids, and the storage account names gb300 derives
    from it, are that subscription's; the plan's mocks have their own) plans clean: no rack, group, Lustre
    filesystem or storage account is taken for replaced."""
    from gb300.plan import mocks  # noqa: PLC0415

    with monkeypatch.context() as patched:
        patched.setattr(mocks, "SUBSCRIPTION_ID", "6f1c2d3e-aaaa-bbbb-cccc-0123456789ab")
        deployed = run_plan("reference", copy.deepcopy(reference_raw))
    real = stack_export(deployed)
    assert SUBSCRIPTION_ID not in json.dumps(real)
    path = tmp_path / "real.json"
    path.write_text(json.dumps(real), encoding="utf-8")
    code, findings = _plan(write_stack, copy.deepcopy(reference_raw), path, tmp_path)
    assert [f for f in findings if f["level"] == "error"] == []
    assert code == 0


def test_unchanged_stack_plans_clean(
    write_stack: Any, reference_raw: dict[str, Any], state: Path, tmp_path: Path
) -> None:
    """The deployed reference stack planned against its own export exits 0 with no destroys-deployed finding."""
    code, findings = _plan(write_stack, copy.deepcopy(reference_raw), state, tmp_path)
    assert code == 0
    assert [f for f in findings if f["rule"] == RULE] == []


def test_shrinking_a_pool_names_each_deleted_rack(
    write_stack: Any, reference_raw: dict[str, Any], state: Path, tmp_path: Path
) -> None:
    """64 -> 60 racks exits 1 with one error per deleted rack scale set, each naming its 18 VMs."""
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["racks"] = 60
    code, findings = _plan(write_stack, raw, state, tmp_path)
    assert code == 1
    errors = _errors(findings)
    assert len(errors) == 4
    for index, error in zip(range(61, 65), errors, strict=True):
        assert f"rack scale set ref-train-r{index:04d}" in error["message"]
        assert "18 VMs affected" in error["message"]


def test_renaming_a_pool_deletes_every_rack_and_the_interconnect_group(
    write_stack: Any, reference_raw: dict[str, Any], state: Path, tmp_path: Path
) -> None:
    """Renaming the pool exits 1: all 64 racks (1,152 VMs) and the pool's interconnect group are named."""
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["name"] = "pretrain"
    code, findings = _plan(write_stack, raw, state, tmp_path)
    assert code == 1
    messages = [e["message"] for e in _errors(findings)]
    assert sum("rack scale set ref-train-r" in m for m in messages) == 64
    (group,) = [m for m in messages if "interconnect group ref-train-ig" in m]
    assert "1,152 VMs affected" in group


def test_removing_a_container_is_an_error(
    write_stack: Any, reference_raw: dict[str, Any], state: Path, tmp_path: Path
) -> None:
    """Dropping the datasets container exits 1: storage-data-loss names it and its blobs. The head's mount of it
    changes only the head's payload, not its custom data, so the head VM is not replaced (a running head takes the
    new payload with gb300-payload-update: docs/node-payload.md#updating)."""
    raw = copy.deepcopy(reference_raw)
    raw["storage"]["blob"]["containers"] = [c for c in raw["storage"]["blob"]["containers"] if c["name"] != "datasets"]
    code, findings = _plan(write_stack, raw, state, tmp_path)
    assert code == 1
    errors = {f["rule"]: f["message"] for f in findings if f["level"] == "error"}
    assert set(errors) == {"storage-data-loss"}
    assert "the blob container and every blob in it (ref-blob-datasets)" in errors["storage-data-loss"]


def test_moving_a_subnet_is_an_error(
    write_stack: Any, reference_raw: dict[str, Any], state: Path, tmp_path: Path
) -> None:
    """Asking for a smaller GPU subnet re-addresses it: exit 1, naming the subnet, both prefixes and its VMs."""
    raw = copy.deepcopy(reference_raw)
    raw["network"]["gpuSubnetPrefixLength"] = 20
    code, findings = _plan(write_stack, raw, state, tmp_path)
    assert code == 1
    (error,) = [e for e in _errors(findings) if "subnet" in e["message"]]
    assert "moves subnet gpu (addressPrefix 10.40.128.0/17 -> 10.40.240.0/20" in error["message"]
    assert "1,152 VMs affected" in error["message"]


def test_growing_the_pool_moves_no_subnet(
    write_stack: Any, reference_raw: dict[str, Any], state: Path, tmp_path: Path
) -> None:
    """64 -> 120 racks exits 0: new racks are added and every existing subnet keeps its prefix."""
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["racks"] = 120
    code, findings = _plan(write_stack, raw, state, tmp_path)
    assert code == 0, [f["message"] for f in findings if f["level"] == "error"]
    assert [f for f in findings if f["rule"] == RULE] == []


def test_turning_bastion_off_moves_no_other_subnet(reference_raw: dict[str, Any], reference_plan: PlanResult) -> None:
    """Without Bastion only its own empty subnet goes; head, storage, endpoints and gpu keep their prefixes."""
    raw = copy.deepcopy(reference_raw)
    raw["network"]["bastion"] = False
    deployed = parse_state(stack_export(reference_plan))
    plan = run_plan("reference", raw, deployed=deployed)
    assert [f for f in plan.findings if f.rule == RULE] == []
    before = {r.name: r.inputs["addressPrefix"] for r in reference_plan.resources if r.type == destroy.SUBNET}
    after = {r.name: r.inputs["addressPrefix"] for r in plan.resources if r.type == destroy.SUBNET}
    assert set(before) - set(after) == {"ref-AzureBastionSubnet"}
    assert all(before[name] == prefix for name, prefix in after.items())


def test_retiring_rack_5_deletes_exactly_that_rack_with_consent(
    write_stack: Any, reference_raw: dict[str, Any], state: Path, tmp_path: Path
) -> None:
    """retiredRacks: [5] deletes r0005 alone: an error without consent, a warning with gb300:allowDestroy."""
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["retiredRacks"] = [5]
    code, findings = _plan(write_stack, raw, state, tmp_path)
    assert code == 1
    (error,) = _errors(findings)
    assert "rack scale set ref-train-r0005" in error["message"]
    raw["allowDestroy"] = [{"resource": "ref-train-r0005", "reason": "rack 5 failed its NVLink check"}]
    code, findings = _plan(write_stack, raw, state, tmp_path)
    assert code == 0
    (warning,) = [f for f in findings if f["rule"] == RULE]
    assert warning["level"] == "warning"
    assert "ref-train-r0005" in warning["message"]
    assert "rack 5 failed its NVLink check" in warning["message"]


def test_retired_rack_leaves_the_other_racks_untouched(
    reference_raw: dict[str, Any], reference_plan: PlanResult
) -> None:
    """With rack 5 retired, the other 63 racks keep their names and inputs exactly; r0064 is still r0064."""
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["retiredRacks"] = [5]
    plan = run_plan("reference", raw)
    racks = {r.urn: r.inputs for r in plan.resources if r.inputs.get("gb300Kind") == "rack-scale-set"}
    before = {r.urn: r.inputs for r in reference_plan.resources if r.inputs.get("gb300Kind") == "rack-scale-set"}
    assert set(before) - set(racks) == {u for u in before if u.endswith("::ref-train-r0005")}
    changed = [u for u in racks if {**racks[u], "tags": None} != {**before[u], "tags": None}]
    assert changed == []
    assert plan.summary["vms"] == 63 * 18


def test_unused_consent_is_a_warning(
    write_stack: Any, reference_raw: dict[str, Any], state: Path, tmp_path: Path
) -> None:
    """An allowDestroy entry that matches nothing the plan destroys is reported so it does not linger."""
    raw = copy.deepcopy(reference_raw)
    raw["allowDestroy"] = [{"resource": "ref-train-r0009", "reason": "old"}]
    code, findings = _plan(write_stack, raw, state, tmp_path)
    assert code == 0
    (warning,) = [f for f in findings if f["rule"] == RULE]
    assert warning["resource"] == "gb300:allowDestroy[0].resource"


@pytest.mark.parametrize(
    ("retired", "expected"),
    [
        ([65], "gb300:gpuPools[0].retiredRacks[0]: must be a rack number from 1 to racks (64) (got 65)"),
        ([5, 5], "gb300:gpuPools[0].retiredRacks[1]: duplicates another entry (got 5)"),
        ([0], "gb300:gpuPools[0].retiredRacks[0]: must be at least 1 (got 0)"),
    ],
)
def test_bad_retired_racks_name_the_key(reference_raw: dict[str, Any], retired: list[int], expected: str) -> None:
    """A retired rack outside 1..racks, or listed twice, is refused with its full key path."""
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["retiredRacks"] = retired
    with pytest.raises(ConfigError) as err:
        config.parse(raw)
    assert expected in str(err.value)


@pytest.mark.parametrize("racks", [60, 120])
def test_resizing_a_pool_leaves_the_head_custom_data_unchanged(reference_raw: dict[str, Any], racks: int) -> None:
    """The head's bootstrap does not depend on pool sizes: 60 or 120 racks render the same bytes as 64."""
    from gb300.node import custom_data as nodes  # noqa: PLC0415 - mocks are set in conftest before the program is imported

    before = nodes.render(gb300_tags.ROLE_HEAD, config.parse(copy.deepcopy(reference_raw)))
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["racks"] = racks
    after = nodes.render(gb300_tags.ROLE_HEAD, config.parse(raw))
    assert after.sha256 == before.sha256
    assert after.payload.archive == before.payload.archive
    assert "MaxNodeCount=32763" in after.payload.cloud_config


def test_renaming_counts_each_vm_once_and_lists_what_changes(
    write_stack: Any, reference_raw: dict[str, Any], state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Renaming the pool counts each rack VM once (the group's VMs are its racks'), and the plan text lists
    the adds and destroys against the state."""
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["name"] = "pretrain"
    out = tmp_path / "plan.json"
    path = write_stack(raw, "reference")
    assert cli.main(["plan", "--stack-file", str(path), "--state", str(state), "--json", str(out)]) == 1
    summary = json.loads(out.read_text())["summary"]
    # 64 racks of 18, plus the head while its custom data still names the pools (replacesVms).
    assert summary["destroys"]["vms"] == 1152 + len(summary["replacesVms"])
    changes = summary["changes"]
    assert "ref-train-r0001" in changes["destroys"]
    assert "ref-pretrain-r0001" in changes["adds"]
    text = capsys.readouterr().out
    assert "Against the deployed state" in text
    assert f"  destroys  {len(changes['destroys']):>6,}  " in text


def test_a_state_of_another_stack_is_one_refusal(
    write_stack: Any, reference_raw: dict[str, Any], state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reference stack's export given to another stack's plan: exit 2, one line naming both stacks and the
    command that exports the right state, instead of a destroys-deployed error per resource."""
    path = write_stack(copy.deepcopy(reference_raw), "mylab")
    assert cli.main(["plan", "--stack-file", str(path), "--state", str(state), "--quiet"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "is the state of stack reference, not mylab" in line
    assert "pulumi stack export --stack mylab > state.json" in line
