"""What a change destroys, stated once: `gb300 plan --state` against an export of the deployed reference stack
prints one line a reviewer reads (VMs destroyed and in what, machines replaced with the head included, data at
risk, the other resources deleted), and the pull request comment prints the same line from the plan's JSON."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli
from gb300.ops import ci_summary
from gb300.plan import PlanResult
from tests.support import signing
from tests.support.state import write_stack_export


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory, reference_plan: PlanResult) -> Path:
    """The deployed reference stack's export, written once."""
    return write_stack_export(tmp_path_factory.mktemp("state") / "state.json", reference_plan)


def _plan(
    write_stack: Any,
    raw: dict[str, Any],
    state: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    *,
    columns: str = "400",
) -> tuple[str, dict[str, Any], str]:
    """The text `gb300 plan --state` prints on a terminal ``columns`` wide (each summary line on one line unless a
    test asks for a narrow one), the summary it writes with --json, and the PR comment of that JSON."""
    out = tmp_path / "plan-reference.json"
    with pytest.MonkeyPatch.context() as patch:  # COLUMNS comes back as it was, set or not
        patch.setenv("COLUMNS", columns)
        cli.main(
            ["plan", "--stack-file", str(write_stack(raw, "reference")), "--state", str(state), "--json", str(out)]
        )
    printed = capsys.readouterr().out
    plan = json.loads(out.read_text(encoding="utf-8"))
    comment = ci_summary.render(ci_summary.load([out]), ["reference"])
    return printed, plan["summary"], comment


def _line(printed: str) -> str:
    """The reviewer's line: third line of the text plan, after the stack and the cluster, with the lines it wraps
    onto (indented under it, on a narrow terminal) joined back."""
    lines = printed.splitlines()
    assert lines[2].startswith("Against the deployed state: "), lines[:4]
    wrapped = [lines[2]]
    for more in lines[3:]:
        if not more.startswith("    "):
            break
        wrapped.append(more.strip())
    return " ".join(wrapped).removeprefix("Against the deployed state: ")


def test_retiring_4_racks_says_72_vms_and_counts_the_log_associations_apart(
    write_stack: Any, reference_raw: dict[str, Any], state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """retiredRacks [1..4]: 72 VMs in 4 rack scale sets; the racks' -logs associations are other resources, never
    machines, and are named after the racks."""
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["retiredRacks"] = [1, 2, 3, 4]
    printed, summary, comment = _plan(write_stack, raw, state, tmp_path, capsys)
    line = _line(printed)
    assert line == (
        "Destroys 72 VMs (4 rack scale sets); replaces no machine; no data at risk; also deletes 4 other "
        "resource(s): 4 DataCollectionRuleAssociation."
    )
    assert summary["destroys"]["resources"] == 4
    assert f"- `reference`: {line}" in comment  # the same words in the pull request comment
    deletes = next(row for row in printed.splitlines() if row.startswith("  destroys "))
    assert deletes.split()[2:6] == ["ref-train-r0001,", "ref-train-r0002,", "ref-train-r0003,", "ref-train-r0004,"]
    # four errors of one cause: one line with the count before the details
    assert (
        "  error   destroys-deployed x4: the plan deletes rack scale set <name> (the plan no longer declares it; "
        "18 VMs affected; its machines and their local disks are lost). <name>: ref-train-r0001, ref-train-r0002, "
        "ref-train-r0003, ... (1 more)"
    ) in printed


def test_renaming_a_pool_is_one_line_and_one_grouped_finding(
    write_stack: Any, reference_raw: dict[str, Any], state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Renaming the pool: 1,152 VMs in 64 racks and the interconnect group, in one line; the 64 rack errors are
    one summary line with the count, then each finding."""
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["name"] = "pretrain"
    printed, _, comment = _plan(write_stack, raw, state, tmp_path, capsys)
    line = _line(printed)
    assert line.startswith("Destroys 1,152 VMs (64 rack scale sets, 1 interconnect group); ")
    assert "64 DataCollectionRuleAssociation" in line
    assert f"- `reference`: {line}" in comment
    findings = printed[printed.index("Findings: ") :].splitlines()
    assert findings[1].startswith("  error   destroys-deployed x64: the plan deletes rack scale set <name> ")
    assert findings[2] == "  each finding:"
    assert sum("destroys-deployed x" in row for row in findings) == 1  # the group ig is one finding: no line


def test_rotating_the_signing_key_names_the_head_replaced(
    write_stack: Any, reference_raw: dict[str, Any], state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new payload signing key changes the head's custom data: the line says the head VM is replaced and one VM
    destroyed, never "destroys 0"; the comment says it in the same words."""
    printed, summary, comment = _plan(write_stack, signing.with_test_key(reference_raw), state, tmp_path, capsys)
    line = _line(printed)
    assert line == "Destroys 1 VM; replaces the head VM ref-head; no data at risk."
    assert summary["destroys"]["replaced"] == ["the head VM ref-head"]
    assert "  replaces       1  the head VM ref-head" in printed
    assert f"- `reference`: {line}" in comment


def test_a_lustre_resize_puts_its_data_at_risk(
    write_stack: Any, reference_raw: dict[str, Any], state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Growing Lustre replaces the filesystem (and moves its subnet): the line names it as data at risk, though no
    VM goes."""
    raw = copy.deepcopy(reference_raw)
    raw["storage"]["lustre"]["capacityTiB"] = 256
    printed, summary, _ = _plan(write_stack, raw, state, tmp_path, capsys)
    assert summary["destroys"]["dataAtRisk"]
    line = _line(printed)
    assert line == (
        "Destroys 0 VMs and 1 subnet; replaces no machine; data at risk: ref-lustre-amlfs (the Azure Managed Lustre "
        "filesystem and every file on it)."
    )


def test_an_older_plan_without_the_breakdown_still_reads() -> None:
    """A plan JSON from before the breakdown (resources and VMs only) gives a line too, never an exception."""
    summary = {"destroys": {"resources": 5, "vms": 73}, "replacesVms": ["ref-head"]}
    assert ci_summary.impact_line(summary) == "Destroys 73 VMs; replaces ref-head; no data at risk."
    assert ci_summary.impact_line({"racks": 1}) is None


def test_an_80_column_terminal_wraps_every_summary_line(
    write_stack: Any,
    reference_raw: dict[str, Any],
    state: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """On an 80-column terminal a 64-rack rename still says what it destroys, the grouped finding with its count
    and the cost headline, and none of those lines runs past column 80."""
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["name"] = "pretrain"
    printed, _, _ = _plan(write_stack, raw, state, tmp_path, capsys, columns="80")
    lines = printed.splitlines()
    head = lines[2 : lines.index("Compute") - 1]
    cost_at = next(i for i, row in enumerate(lines) if row.startswith("Cost ("))
    headline = lines[cost_at + 1 : next(i for i in range(cost_at + 1, len(lines)) if "largest items" in lines[i])]
    found_at = next(i for i, row in enumerate(lines) if row.startswith("Findings: "))
    groups = lines[found_at + 1 : lines.index("  each finding:")]
    assert head[0].startswith("Against the deployed state: Destroys 1,152 VMs")
    assert headline[0].startswith("  lower bound: excludes 1,152 Standard_ND128isr_GB300_v6")
    assert "destroys-deployed x64:" in " ".join(groups)
    assert [row for row in head + headline + groups if len(row) > 80] == []
