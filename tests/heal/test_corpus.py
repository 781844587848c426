"""The shipped scenario corpus and generated scenarios, judged against their truth (issue 30's Done when)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gb300.heal import generate, sim
from gb300.heal.policy import EVENT_KINDS
from gb300.heal.scenario import load

from .conftest import SCENARIOS, misjudged, simulate

CORPUS = sorted(SCENARIOS.glob("*.yaml"))
HALTING = {"bad-rollout-halt.yaml", "halt-during-revalidation.yaml", "resume-too-early.yaml"}
# Scenarios that end with a person by design (asserted in their own tests below): not judged by misjudged().
TO_A_PERSON = {
    "flapping-xid48.yaml",
    "recurs-after-redeploy.yaml",
    "azure-forbidden.yaml",
    "nvlink-rack-down.yaml",
    "nvlink-xid-rack.yaml",
    "no-capacity.yaml",
    "week-long-job.yaml",  # not a person: its job-bound nodes still wait for their job when the day ends
}


def calls(result: sim.Result, action: str) -> list[str]:
    """The ARM requests of one kind the simulated Azure received (restart, reimage, redeploy, instanceView)."""
    return [c for c in result.world.azure_calls if c.rsplit("/", 1)[-1] == action]


def test_corpus_has_twelve_cases_and_every_event_kind() -> None:
    """At least 12 scenarios ship, and together they use every event kind."""
    assert len(CORPUS) >= 12
    kinds = {e.kind for path in CORPUS for e in load(path)[0].events}
    assert kinds == set(EVENT_KINDS)


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_shipped_scenario(path: Path) -> None:
    """Each faulty node is cured by the least disruptive action that cures it; benign nodes are never drained;
    only the fleet-wide failure halts."""
    report = simulate(path).report()
    assert report["halted"] is (path.name in HALTING)
    assert report["false_drains"] == 0
    if not report["halted"] and path.name not in TO_A_PERSON:
        assert misjudged(report) == []


def test_fleet_wide_failure_halts_before_draining() -> None:
    """A bad rollout hitting 60 of 180 nodes at once halts the loop and drains nothing: it waits for a person."""
    result = simulate(SCENARIOS / "bad-rollout-halt.yaml")
    report = result.report()
    assert report["halted"] is True
    assert report["drains"] == 0
    assert [r for r in result.records if r["Decision"] == "halt"]


def test_benign_bursts_drain_nothing() -> None:
    """Teardown XID 45 bursts, a crashed job's 77 nodes, IMEX on idle nodes and a rack power loss drain no node."""
    for name in ("xid45-teardown-burst", "crashed-nvlink-job", "imex", "rack-power-loss"):
        report = simulate(SCENARIOS / f"{name}.yaml").report()
        benign = [n for n in report["nodes"] if n["truth"] in (None, "self")]
        assert benign, name
        assert all("drain" not in n["actions"] for n in benign), name


def test_rack_power_loss_is_one_incident_and_recovers() -> None:
    """A rack that loses power is held as one incident, released when its nodes answer again, and never drained."""
    result = simulate(SCENARIOS / "rack-power-loss.yaml")
    decisions = [r["Decision"] for r in result.records]
    assert decisions.count("rack-incident") == 1
    assert "rack-recovered" in decisions
    assert result.report()["drains"] == 0


@pytest.mark.parametrize("pattern", sorted(generate.PATTERNS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_evidence_different_cures(pattern: str, seed: int) -> None:
    """The same evidence on several nodes with randomly drawn cures: each node still gets exactly its cure."""
    raw = generate.same_evidence(pattern, seed)
    report = simulate(raw).report()
    assert not report["halted"]
    assert misjudged(report) == []


def test_generated_cures_differ_for_the_same_evidence() -> None:
    """The generator really gives one evidence pattern several cures (no one-cure-per-evidence table passes)."""
    cures = {t["cured_by"] for seed in range(3) for t in generate.same_evidence("gpu-missing", seed)["truth"]}
    assert len(cures) >= 3


@pytest.mark.slow
def test_fleet_day_of_64_racks() -> None:
    """A simulated day of 64 racks (faults of every kind, jobs, teardown bursts): every node judged right."""
    report = simulate(generate.fleet_day(racks=64, seed=1)).report()
    assert report["repaired"] > 20
    assert misjudged(report) == []
    assert len(report["blocks"]) == 64


def test_decision_records_carry_evidence() -> None:
    """Every drain is recorded for Azure Monitor with its time, node, rack step and the evidence behind it."""
    result = simulate(SCENARIOS / "ib-flap-rate.yaml")
    drains = [r for r in result.records if r["Decision"] == "drain"]
    assert len(drains) == 1
    record = drains[0]
    assert record["Node"] == "r0001-03"
    assert record["Step"] == "drain"
    assert record["Source"] == "gb300-heal"
    assert len(record["Evidence"]) == 3
    assert all("ib-flap" in e for e in record["Evidence"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", record["TimeGenerated"])


def test_azure_not_now_keeps_the_node_on_its_rung() -> None:
    """429 with Retry-After on every restart for 25 minutes, and 409 on one VM for half an hour: both nodes are
    restarted once Azure lets them; no reimage, no redeploy, nothing escalated, no report; refusals counted."""
    result = simulate(SCENARIOS / "azure-throttled.yaml")
    report = result.report()
    assert report["azure_refusals"] > 10
    assert report["escalated"] == 0
    assert report["guest_health_reports"] == 0
    assert calls(result, "reimage") == calls(result, "redeploy") == []
    assert misjudged(report) == []
    later = [r for r in result.records if r["Decision"] == "azure-later"]
    assert any("in 60s" in r["Reason"] for r in later)  # Retry-After honoured


def test_a_refusal_that_will_not_change_fails_the_rung_but_never_escalates() -> None:
    """403 on every call for one node: each rung fails, the node stays drained for a person, it is not escalated
    and no Guest Health Report is filed (ARM errors alone are no evidence against the host)."""
    report = simulate(SCENARIOS / "azure-forbidden.yaml").report()
    (node,) = [n for n in report["nodes"] if n["node"] == "r0001-04"]
    assert node["final_state"] == "drained"
    assert node["case"] == "held"
    assert node["escalated"] is False
    assert report["escalated"] == 0
    assert report["guest_health_reports"] == 0


def test_a_head_that_dies_after_the_call_does_not_repeat_it() -> None:
    """The head dies right after its restart call returns and is back 2 minutes later: it reads its intent,
    asks the VM's instance view, and does not restart the VM again; the node is repaired by that one restart."""
    result = simulate(SCENARIOS / "head-crash-mid-action.yaml")
    report = result.report()
    assert report["head_crashes"] == 1
    assert len(calls(result, "restart")) == 1
    assert len(calls(result, "instanceView")) == 1
    assert misjudged(report) == []
    assert [r for r in result.records if r["Decision"] == "reconcile"]


def test_a_flapping_node_goes_to_a_person_after_its_second_recurrence() -> None:
    """XID 48 back three hours after every reboot: two repairs, then the third case is drained and escalated
    (NVSentinel's 7-day MultipleRemediations), not rebooted a third time; the report counts every case."""
    result = simulate(SCENARIOS / "flapping-xid48.yaml")
    report = result.report()
    (node,) = [n for n in report["nodes"] if n["node"] == "r0001-09"]
    assert node["cases"] == 3
    assert node["escalated"] is True
    assert node["final_state"] == "drained"
    assert len(calls(result, "restart")) == 2
    assert report["escalated"] == 1


def test_a_fault_back_after_a_redeploy_is_reported_not_redeployed_again() -> None:
    """The fault returns after the redeploy cured it: one redeploy in all, a second Guest Health Report (against
    the new host), and the node escalated to a person."""
    result = simulate(SCENARIOS / "recurs-after-redeploy.yaml")
    report = result.report()
    (node,) = [n for n in report["nodes"] if n["node"] == "r0001-11"]
    assert node["cases"] == 2
    assert node["escalated"] is True
    assert len(calls(result, "redeploy")) == 1
    assert report["guest_health_reports"] == 2


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


def test_xids_are_judged_by_nvidias_catalog() -> None:
    """XID 45 mid-job and XID 121 drain nothing; three XID 79s under one job are three node faults, each rebooted;
    an XID 79 a reboot does not cure is redeployed without a reimage."""
    result = simulate(SCENARIOS / "xid-catalog-buckets.yaml")
    report = result.report()
    nodes = {n["node"]: n for n in report["nodes"]}
    assert nodes["r0001-01"]["actions"] == nodes["r0002-02"]["actions"] == []
    assert all(nodes[f"r0001-1{i}"]["actions"][:2] == ["drain", "reboot"] for i in range(3))
    assert nodes["r0002-09"]["actions"][:3] == ["drain", "reboot", "replace"]
    assert calls(result, "reimage") == []
    assert misjudged(report) == []


def test_a_rack_with_its_nvlink_domain_down_is_one_incident() -> None:
    """NVLink failures on 14 of 18 nodes of one rack: one rack incident, all 18 nodes held out of service as one
    block (none left schedulable on the broken domain), one Guest Health Report in the NVLink category, no node
    rebooted, reimaged or redeployed; the other rack's lone NVLink fault is repaired."""
    from gb300.facts.loader import data  # noqa: PLC0415

    result = simulate(SCENARIOS / "nvlink-rack-down.yaml")
    report = result.report()
    assert report["rack_incidents"] == ["sim-gpu-r0001"]
    assert all(result.world.nodes[f"r0001-{i:02d}"].drained for i in range(18))
    assert not [c for c in result.world.azure_calls if "/sim-gpu-r0001/" in c and c.startswith("POST")]
    nvlink = data("remediation.yaml")["azure"]["guestHealthReport"]["categories"]["nvlink"]
    assert [r["properties"]["impactCategory"] for r in result.world.reports] == [nvlink]
    assert all("r0001" not in b["nodes"] for b in report["blocks"])  # the held rack is no block to schedule on
    assert next(n for n in report["nodes"] if n["node"] == "r0002-08")["actions"][-1] == "return"
    assert [r for r in result.records if r["Decision"] == "rack-incident" and "NVLink" in r["Reason"]]


def test_an_imex_blip_during_a_job_is_the_jobs() -> None:
    """IMEX unhealthy on all 18 nodes of a running job, three times in ten minutes: the job's, no node drained."""
    report = simulate(SCENARIOS / "imex-job-blip.yaml").report()
    assert report["drains"] == 0
    assert report["rack_incidents"] == []


def test_a_node_lifted_for_its_rack_run_stays_out_when_the_loop_halts() -> None:
    """The loop halts while a repaired node's rack NCCL run (which lifted its drain) is under way: the run is still
    collected, the drain put back, and the node stays out of service while the loop waits for a person."""
    report = simulate(SCENARIOS / "halt-during-revalidation.yaml").report()
    assert report["halted"] is True
    (node,) = [n for n in report["nodes"] if n["node"] == "r0001-03"]
    assert node["final_state"] == "drained"
    assert node["case"] == "revalidating"


def test_a_persons_request_starts_the_ladder_where_they_asked() -> None:
    """Action:Replace in a node's reason: drained by the loop, redeployed without a reboot first, revalidated and
    returned; Action:Reboot: rebooted. Neither counts as fault evidence for the halt rail."""
    result = simulate(SCENARIOS / "operator-request.yaml")
    report = result.report()
    nodes = {n["node"]: n for n in report["nodes"]}
    assert nodes["r0001-02"]["actions"] == ["drain", "replace", "revalidate", "return"]
    assert nodes["r0001-05"]["actions"] == ["drain", "reboot", "revalidate", "return"]
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


def test_a_fabric_event_across_many_racks_halts_and_leaves_nothing_drained() -> None:
    """Ten racks' NVLink domains down at once: the loop halts naming the racks held in the window, drains none of
    the 180 nodes, files no Guest Health Report, and after the links came back and a person resumed it, every node
    is in service and the racks are judged again."""
    result = simulate(SCENARIOS / "nvlink-fabric-storm.yaml")
    report = result.report()
    [halt] = [r for r in result.records if r["Decision"] == "halt"]
    racks = [f"sim-gpu-r{r:04d}" for r in range(1, 11)]
    assert halt["Reason"].startswith(f"{len(racks)} of {len(racks)} racks held as NVLink incidents")
    assert all(rack in halt["Reason"] for rack in racks)
    assert report["drains"] == 0
    assert report["guest_health_reports"] == 0
    assert not [c for c in result.world.azure_calls if c.startswith("POST")]
    assert not any(n.drained for n in result.world.nodes.values())
    assert sorted(r["Rack"] for r in result.records if r["Decision"] == "rack-recovered") == racks
    assert len(report["blocks"]) == len(racks)


def test_a_failed_revalidation_counts_as_a_failed_recheck() -> None:
    """A fault only the rack NCCL run sees (the gate passes after each reboot and reimage): each failed rack run
    counts against the node, so the redeploy files the Guest Health Report for its old host, and it returns."""
    result = simulate(SCENARIOS / "nccl-only-fault.yaml")
    report = result.report()
    (node,) = [n for n in report["nodes"] if n["node"] == "r0001-06"]
    assert node["actions"].index("guest-health-report") == node["actions"].index("replace") + 1
    assert [r["properties"]["impactedResourceId"].rsplit("/", 1)[-1] for r in result.world.reports] == ["6"]
    assert not [r for r in result.records if r["Reason"] == "skipped: no recheck failed on this host"]
    assert misjudged(report) == []


def test_nvlink_xids_on_most_of_a_rack_are_one_rack_incident() -> None:
    """XID 145 (NVIDIA's NVLink bucket) on 13 of 18 nodes of one rack: the rack is held as one NVLink incident with
    one Guest Health Report in the NVLink category and no node of it rebooted, reimaged or redeployed; a lone XID
    145 on the other rack is repaired by a reboot."""
    from gb300.facts.loader import data  # noqa: PLC0415

    result = simulate(SCENARIOS / "nvlink-xid-rack.yaml")
    report = result.report()
    assert report["rack_incidents"] == ["sim-gpu-r0001"]
    assert all(result.world.nodes[f"r0001-{i:02d}"].drained for i in range(18))
    assert not [c for c in result.world.azure_calls if "/sim-gpu-r0001/" in c and c.startswith("POST")]
    nvlink = data("remediation.yaml")["azure"]["guestHealthReport"]["categories"]["nvlink"]
    assert [r["properties"]["impactCategory"] for r in result.world.reports] == [nvlink]
    assert next(n for n in report["nodes"] if n["node"] == "r0002-05")["actions"] == [
        "drain",
        "reboot",
        "revalidate",
        "return",
    ]


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


def test_no_capacity_tells_a_person_and_reports_the_host() -> None:
    """Redeploy refused with AllocationFailed for ten hours: a person is told within four hours, the host that failed
    two rechecks is reported once, and the VM moves and returns when capacity is back; SkuNotAvailable: the move
    cannot happen, the host is reported and the node goes to a person with a reason that names it."""
    result = simulate(SCENARIOS / "no-capacity.yaml")
    report = result.report()
    nodes = {n["node"]: n for n in report["nodes"]}
    first = min(r["TimeGenerated"] for r in result.records if "AllocationFailed" in r["Reason"])
    [told] = [r for r in result.records if r["Decision"] == "capacity"]
    assert told["Node"] == "r0001-04"
    assert _seconds(told["TimeGenerated"]) - _seconds(first) <= 4 * 3600
    assert nodes["r0001-04"]["actions"].count("guest-health-report") == 1
    assert nodes["r0001-04"]["actions"][-1] == "return"
    assert nodes["r0002-07"]["escalated"] is True
    assert "guest-health-report" in nodes["r0002-07"]["actions"]
    [closed] = [r for r in result.records if r["Node"] == "r0002-07" and r["Decision"] == "escalated"]
    assert "SkuNotAvailable" in closed["Reason"]
    assert report["guest_health_reports"] == 2


def _seconds(stamp: str) -> float:
    from datetime import datetime  # noqa: PLC0415

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_a_switch_blip_drains_nothing_that_came_back() -> None:
    """IB links of 16 nodes down for nine minutes while their rack's repair slots are busy: each waiting node is
    judged again when a slot frees, its gate passes, and it is dropped; only the two real faults are drained."""
    result = simulate(SCENARIOS / "switch-blip.yaml")
    report = result.report()
    assert report["drains"] == 2
    dismissed = [r for r in result.records if r["Decision"] == "dismissed"]
    assert len(dismissed) == 16
    assert all("judged again at admission" in r["Reason"] for r in dismissed)
    assert misjudged(report) == []


def test_nodes_waiting_for_a_long_job_hold_no_rack_slot() -> None:
    """Four racks each have a drained node waiting for a week-long job: idle faulty nodes in two other racks are
    still rebooted and returned the same day, and the waiting nodes stay drained, unrepaired, under their job."""
    report = simulate(SCENARIOS / "week-long-job.yaml").report()
    nodes = {n["node"]: n for n in report["nodes"]}
    for name in ("r0005-03", "r0006-03"):
        assert nodes[name]["actions"] == ["drain", "reboot", "revalidate", "return"]
    for rack in range(1, 5):
        waiting = nodes[f"r{rack:04d}-00"]
        assert waiting["actions"] == ["drain"]
        assert waiting["final_state"] == "drained"
