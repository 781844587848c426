"""The scenario corpus: halts, resumes and a person's requests (the rails around the ladder)."""

from __future__ import annotations

from gb300.heal.summary import seconds as _seconds

from .conftest import SCENARIOS, calls, misjudged, simulate


def test_resume_judges_the_queued_cases_again() -> None:
    """40 of 180 nodes fail a DCGM diagnostic in one minute (a glitch): the loop halts; after a person's resume the
    queued cases are judged on the gate's current result, and no healthy node is drained."""
    result = simulate(SCENARIOS / "resume-rejudges-glitch.yaml")
    report = result.report()
    decisions = [r["Decision"] for r in result.records]
    assert "halt" in decisions
    assert report["halted"] is False
    assert report["drains"] == 0
    assert sum(1 for n in report["nodes"] if n["case"] == "dismissed") == 40


def test_a_node_lifted_for_its_rack_run_stays_out_when_the_loop_halts() -> None:
    """The loop halts while a repaired node's rack NCCL run (which lifted its drain) is under way: the run is still
    collected, the drain put back, and the node stays out of service while the loop waits for a person."""
    report = simulate(SCENARIOS / "halt-during-revalidation.yaml").report()
    assert report["halted"] is True
    (node,) = [n for n in report["nodes"] if n["node"] == "r0001-03"]
    assert node["final_state"] == "drained"
    assert node["case"] == "revalidating"


def test_a_resume_too_early_halts_again_at_the_first_failed_repairs() -> None:
    """A person resumes the loop while the bad driver that halted it is still there: the first repairs' rechecks
    fail and the loop halts again, naming them; no redeploy, no Guest Health Report, and only the nodes the rails
    admitted were drained (not dozens)."""
    from gb300.facts.loader import data  # noqa: PLC0415

    result = simulate(SCENARIOS / "resume-too-early.yaml")
    report = result.report()
    halts = [r for r in result.records if r["Decision"] == "halt"]
    assert len(halts) == 2
    assert "failed their rechecks" in halts[1]["Reason"]
    assert report["halted"] is True
    rails = data("remediation.yaml")["rails"]
    assert report["drains"] <= rails["maxNodesPerRack"] * rails["maxRacks"]
    assert calls(result, "redeploy") == []
    assert report["guest_health_reports"] == 0
    failed = [r for r in result.records if r["Decision"] == "recheck" and r["Reason"].startswith("fail")]
    assert len(failed) == rails["resumeRecheckFailures"]


def test_a_persons_request_starts_the_ladder_where_they_asked() -> None:
    """Action:Replace in a node's reason: drained by the loop, redeployed without a reboot first, revalidated and
    returned; Action:Reboot: rebooted. Neither counts as fault evidence for the halt rail."""
    result = simulate(SCENARIOS / "operator-request.yaml")
    report = result.report()
    nodes = {n["node"]: n for n in report["nodes"]}
    assert nodes["r0001-02"]["actions"] == ["drain", "replace", "revalidate", "return"]
    assert nodes["r0001-05"]["actions"] == ["drain", "reboot", "revalidate", "return"]
    assert misjudged(report) == []


def test_a_request_during_a_repair_takes_the_node_over() -> None:
    """Action:Replace during a reboot: the node is redeployed and returned, not left drained; Action:Reboot on a node
    queued behind its rack: rebooted when a slot frees, not closed held; Action:Reboot during a reimage: refused in
    the node's record, and the node returns after its reimage."""
    result = simulate(SCENARIOS / "request-during-repair.yaml")
    report = result.report()
    nodes = {n["node"]: n for n in report["nodes"]}
    assert nodes["r0001-03"]["actions"] == ["drain", "reboot", "replace", "revalidate", "return"]
    assert nodes["r0002-02"]["case"] == "returned"
    assert nodes["r0002-02"]["actions"] == ["drain", "reboot", "revalidate", "return"]
    assert nodes["r0001-08"]["actions"] == ["drain", "reboot", "reimage", "revalidate", "return"]
    refused = [r for r in result.records if r["Decision"] == "request" and r["Node"] == "r0001-08"]
    assert refused
    assert "already under way" in refused[0]["Reason"]
    assert misjudged(report) == []


def test_shadow_mode_records_every_decision_and_acts_on_none() -> None:
    """gb300:remediation.shadow: the XID 95 and the NVLink rack are judged and recorded as they would be, but no
    node is drained and no Azure call is made."""
    result = simulate(SCENARIOS / "shadow-mode.yaml")
    report = result.report()
    assert report["drains"] == 0
    assert not [c for c in result.world.azure_calls if not c.startswith("GET")]
    assert not any(n.drained for n in result.world.nodes.values())
    reasons = [r["Reason"] for r in result.records]
    assert "shadow mode: would drain, then reboot" in reasons
    assert any(r.startswith("shadow mode: would hold rack") for r in reasons)


def test_a_halt_freezes_every_repair_under_way() -> None:
    """A bad rollout halts the loop while a node is being reimaged and another's restart was refused just before the
    head died: no VM action is sent after the halt (not even the one the head only meant to make), the reimage in
    flight is followed by no recheck nor rung, and every node the loop was acting on stays drained."""
    result = simulate(SCENARIOS / "halt-freezes-repairs.yaml")
    report = result.report()
    [halt] = [r for r in result.records if r["Decision"] == "halt"]
    halted_at = _seconds(halt["TimeGenerated"])
    assert report["halted"] is True
    assert not [e for e in result.world.azure_log if e["call"] != "report" and e["at"] >= halted_at]
    nodes = {n["node"]: n for n in report["nodes"]}
    assert nodes["r0001-02"]["actions"] == ["drain", "reboot", "reimage"]
    assert not [r for r in result.records if r["Node"] == "r0001-02" and _seconds(r["TimeGenerated"]) > halted_at]
    assert len(calls(result, "restart")) == 2  # r0001-02's, and r0005-07's refused one: never sent again
    [kept] = [r for r in result.records if r["Decision"] == "reconcile" and r["Node"] == "r0005-07"]
    assert "halted: not sent" in kept["Reason"]
    assert all(nodes[n]["final_state"] == "drained" for n in ("r0001-02", "r0005-07"))
