"""The scenario corpus: the ladder itself (recurrences, XIDs by catalog bucket, faults only NCCL sees, stragglers,
blips and long jobs)."""

from __future__ import annotations

from .conftest import SCENARIOS, calls, misjudged, simulate


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


def test_a_slow_node_is_found_by_bisection_and_its_neighbour_is_not_blamed() -> None:
    """A node that passes every check but runs slow fails its rack's NCCL run after a neighbour's reboot: both halves
    of the rack run at once, the slow node is found, the neighbour returns after that one reboot (no reimage, no
    redeploy, no report), and the slow node, which no VM action cures, is escalated with its host reported; so is a
    slow node a person names; no reason says Azure refused anything."""
    result = simulate(SCENARIOS / "straggler-bisection.yaml")
    report = result.report()
    nodes = {n["node"]: n for n in report["nodes"]}
    assert nodes["r0001-03"]["actions"] == ["drain", "reboot", "revalidate", "return"]
    found = [r for r in result.records if r["Decision"] == "bisect" and r["Node"] == "r0001-03"]
    assert found[-1]["Reason"].startswith("slow: r0001-11;")
    for name in ("r0001-11", "r0002-05"):
        assert nodes[name]["case"] == "escalated"
        assert nodes[name]["final_state"] == "drained"
    assert sorted(r["node"] for r in report["reports"]) == ["r0001-11", "r0002-05"]
    assert not [r for r in result.records if "Azure refused" in r["Reason"]]
    rounds: dict[float, list[list[str]]] = {}
    for started, hosts in result.world.nccl_runs.values():
        rounds.setdefault(started, []).append(hosts)
    first = next(runs for runs in rounds.values() if len(runs) == 2)
    assert sorted(first[0] + first[1]) == [f"r0001-{i:02d}" for i in range(18)]  # both halves of the rack at once
    assert misjudged(report) == []
