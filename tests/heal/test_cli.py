"""``gb300 heal simulate`` and ``gb300 heal role`` as a user runs them."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gb300 import cli

from .conftest import SCENARIOS


def test_simulate_prints_per_node_actions_and_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The summary names each node's actions and totals; --json holds the fields the issue names."""
    report_path, decisions = tmp_path / "report.json", tmp_path / "decisions.jsonl"
    code = cli.main(
        ["heal", "simulate", str(SCENARIOS / "ecc.yaml"), "--json", str(report_path), "--decisions", str(decisions)]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "  r0002-09: in-service, case returned (truth: reimage)\n    actions: drain -> reboot -> reimage" in out
    assert "drains 3, false drains 0, repaired 3" in out
    report = json.loads(report_path.read_text())
    for key in ("drains", "false_drains", "repaired", "mttr_seconds", "halted", "blocks", "nodes"):
        assert key in report
    node = next(n for n in report["nodes"] if n["node"] == "r0002-07")
    assert node["final_state"] == "in-service"
    assert node["actions"][-2:] == ["revalidate", "return"]
    lines = decisions.read_text().splitlines()
    assert len(lines) == report["decisions"]
    assert json.loads(lines[0])["Source"] == "gb300-heal"
    records = [json.loads(line) for line in lines]
    # every decision about a node names its rack too, so per-rack queries find it
    about_nodes = [r for r in records if r["Node"] and "," not in r["Node"] and "[" not in r["Node"]]
    assert about_nodes
    assert {(r["Node"], r["Rack"]) for r in about_nodes if not r["Rack"]} == set()
    assert {r["Rack"] for r in about_nodes if r["Node"] == "r0002-09"} == {"sim-gpu-r0002"}


def test_simulate_leads_with_what_happened_and_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A halted day's summary opens with the halt and the rail's reason, lists no node the loop never touched, and
    (human and --json) shows per node Azure's answers and the case's states with times, then the Guest Health
    Reports with node, host and category."""
    assert cli.main(["heal", "simulate", str(SCENARIOS / "bad-rollout-halt.yaml")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("halted: 60 of 180 nodes showed fault evidence within 3600s")
    assert not [line for line in out if "no action" in line and "in-service" in line]
    assert len(out) < 20  # 60 queued nodes are one line, not 60
    report_path = tmp_path / "report.json"
    assert cli.main(["heal", "simulate", str(SCENARIOS / "no-capacity.yaml"), "--json", str(report_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "running: never halted"
    assert "AllocationFailed" in out[2]
    report = json.loads(report_path.read_text())
    assert report["summary"] == out[:3]
    node = next(n for n in report["nodes"] if n["node"] == "r0002-07")
    assert any(entry.endswith("redeploy 400 SkuNotAvailable") for entry in node["azure"])
    assert [s.split(" ", 1)[1] for s in node["states"]][-1] == "escalated"
    assert {"node": "r0002-07", "host": "SIMHOST-r0002-07"}.items() <= next(
        r for r in report["reports"] if r["node"] == "r0002-07"
    ).items()
    assert all(r["category"].startswith("Resource.Hpc.") for r in report["reports"])
    assert f"  r0002-07 host SIMHOST-r0002-07 {report['reports'][0]['category']}" in out or any(
        line.startswith("  r0002-07 host SIMHOST-r0002-07 Resource.Hpc.") for line in out
    )


def test_bad_scenario_exits_two_with_one_line_per_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every problem of a scenario is one line naming its key path; exit 2, no traceback."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "racks: 0\nduration: 100\nevents:\n  - {at: 5, node: r0001-00, kind: xid}\n"
        "  - {at: 5, node: r0001-00, kind: check-failed, check: nope}\n"
        "truth:\n  - {node: r0001-00, cured_by: magic}\n"
    )
    assert cli.main(["heal", "simulate", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "bad.yaml.racks: Input should be greater than or equal to 1 (got 0)" in err
    assert "bad.yaml.events[0]: kind xid needs an integer 'code' (got None)" in err
    assert any(line.startswith("bad.yaml.events[1]: kind check-failed needs 'check'") for line in err)
    assert any(line.startswith("bad.yaml.truth[0].cured_by:") and "'magic'" in line for line in err)
    assert not any("Traceback" in line for line in err)


def test_missing_scenario_exits_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A scenario that cannot be read is one line naming the file."""
    assert cli.main(["heal", "simulate", str(tmp_path / "none.yaml")]) == 2
    assert "none.yaml: cannot be read (No such file or directory)" in capsys.readouterr().err


def test_role_prints_the_roles_to_create(capsys: pytest.CaptureFixture[str]) -> None:
    """`gb300 heal role` prints role definitions az accepts, scoped to the resource groups given."""
    sub = "11111111-2222-3333-4444-555555555555"
    assert cli.main(["heal", "role", "--subscription", sub, "--resource-group", "rg-gpu"]) == 0
    roles = json.loads(capsys.readouterr().out)
    assert roles[0]["AssignableScopes"] == [f"/subscriptions/{sub}/resourceGroups/rg-gpu"]
    assert "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/redeploy/action" in roles[0]["Actions"]


@pytest.mark.parametrize("value", ["s1", "", "11111111-2222-3333-4444-55555555555", "/subscriptions/x"])
def test_role_refuses_a_subscription_that_is_not_a_guid(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A subscription id that is not a GUID is exit 2, one line naming the flag, and no role is printed (a scope
    built from it would be refused by Azure only at `az role definition create`)."""
    assert cli.main(["heal", "role", "--subscription", value, "--resource-group", "rg-gpu"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    [line] = err.strip().splitlines()
    assert line.startswith("gb300 heal: --subscription must be a subscription id, a GUID")


def test_heal_help_shows_no_raw_markup(capsys: pytest.CaptureFixture[str]) -> None:
    """`gb300 heal --help` reads as text: no reStructuredText double backticks."""
    with pytest.raises(SystemExit):
        cli.main(["heal", "--help"])
    assert "``" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "args", "expect"),
    [
        ("racks: 2000\nduration: 2592000\n", [], "node-ticks; at most"),
        ("racks: 1\nduration: 3600\n", ["--poll", "0.001"], "--poll: must be 10 to 3600 seconds (got 0.001)"),
        ("racks: 1\nduration: 3600\n#" + "x" * 300_000 + "\n", [], "bytes; a scenario may have at most"),
    ],
    ids=["work", "poll", "file-size"],
)
def test_simulate_refuses_work_beyond_its_bounds_in_one_line_fast(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, args: list[str], expect: str
) -> None:
    """A scenario of 2,000 racks for 30 days, a --poll of a millisecond, or a file over 256 KiB: refused in one
    line, exit 2, before any simulated tick (in well under a second)."""
    path = tmp_path / "big.yaml"
    path.write_text(content)
    started = time.perf_counter()
    code = cli.main(["heal", "simulate", str(path), *args])
    assert time.perf_counter() - started < 5
    err = capsys.readouterr().err
    assert code == 2
    assert expect in err
    assert "Traceback" not in err


def test_bad_failure_path_keys_name_their_key_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The azure, head, operator and recurs_after keys are checked like the rest: one line per problem, exit 2."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "racks: 1\nduration: 3600\n"
        "azure:\n  - {from: 600, until: 100, call: restart, status: 429}\n"
        "  - {from: 0, until: 100, call: reboot, status: 200}\n"
        "  - {from: 0, until: 100, call: list, status: 202}\n"
        "head:\n  - {at: 10, kind: explode}\n"
        "operator:\n  - {at: 10, kind: request}\n"
        "scheduled:\n  - {at: 10, node: r0001-01, type: Migrate}\n"
        "truth:\n  - {node: r0001-01, cured_by: reboot, recurs_after: 5}\n"
    )
    assert cli.main(["heal", "simulate", str(bad)]) == 2
    err = capsys.readouterr().err
    for line in (
        "bad.yaml.azure[0]: until must be after from (got 100.0)",
        "bad.yaml.azure[1].call: Input should be 'restart', 'reimage', 'redeploy', 'list', 'report' or 'any'",
        "bad.yaml.azure[1].status: Input should be greater than or equal to 202 (got 200)",
        "bad.yaml.azure[2]: status below 400 must be 202 with a 'code' and a call of restart, reimage, redeploy",
        "bad.yaml.head[0].kind: Input should be 'crash-after-call' or 'crash-in-tick' (got 'explode')",
        "bad.yaml.scheduled[0].type: Input should be 'Freeze', 'Reboot', 'Redeploy', 'Preempt' or 'Terminate' "
        "(got 'Migrate')",
        "bad.yaml.operator[0]: kind request needs 'node' and 'action' (reboot or replace)",
        "bad.yaml.truth[0].recurs_after: Input should be greater than or equal to 600 (got 5)",
    ):
        assert line in err
    assert "Traceback" not in err
