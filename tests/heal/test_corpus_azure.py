"""The scenario corpus: Azure's answers (throttling, refusals, no capacity, operations that fail after a 202) and
a head that dies mid-call."""

from __future__ import annotations

from gb300.heal.summary import seconds as _seconds

from .conftest import SCENARIOS, calls, misjudged, simulate


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


def test_no_capacity_tells_a_person_and_reports_the_host() -> None:
    """Redeploy refused with AllocationFailed for ten hours: a person is told within four hours, the host that failed
    two rechecks is reported once, and the VM moves and returns when capacity is back; SkuNotAvailable: the move
    cannot happen, the host is reported and the node goes to a person with a reason that names it."""
    result = simulate(SCENARIOS / "no-capacity.yaml")
    report = result.report()
    nodes = {n["node"]: n for n in report["nodes"]}
    first = min(r["TimeGenerated"] for r in result.records if "AllocationFailed" in r["Reason"])
    [told] = [r for r in result.records if r["Decision"] == "capacity" and r["Node"] == "r0001-04"]
    assert _seconds(told["TimeGenerated"]) - _seconds(first) <= 4 * 3600
    assert nodes["r0001-04"]["actions"].count("guest-health-report") == 1
    assert nodes["r0001-04"]["actions"][-1] == "return"
    assert nodes["r0002-07"]["escalated"] is True
    assert "guest-health-report" in nodes["r0002-07"]["actions"]
    [closed] = [r for r in result.records if r["Node"] == "r0002-07" and r["Decision"] == "escalated"]
    assert "SkuNotAvailable" in closed["Reason"]
    assert sorted(r["node"] for r in report["reports"]) == ["r0001-04", "r0002-07", "r0003-02", "r0003-09"]


def test_an_accepted_move_that_fails_later_is_judged_by_its_outcome() -> None:
    """Redeploys ARM accepts with 202 whose operations then fail (ProvisioningState/failed/<code>): AllocationFailed
    for ten hours is read from the instance view, a person is told within four hours of the first failure, the host
    is reported once, and the VM moves and returns once capacity is back; OperationNotAllowed: the host is reported
    and the node escalated with a reason naming the code, not left "acting"."""
    result = simulate(SCENARIOS / "no-capacity.yaml")
    report = result.report()
    nodes = {n["node"]: n for n in report["nodes"]}
    failed = [r for r in result.records if r["Decision"] == "azure-failed" and r["Node"] == "r0003-02"]
    assert failed
    assert all("202" in r["Reason"] and "AllocationFailed" in r["Reason"] for r in failed)
    [told] = [r for r in result.records if r["Decision"] == "capacity" and r["Node"] == "r0003-02"]
    assert _seconds(told["TimeGenerated"]) - _seconds(failed[0]["TimeGenerated"]) <= 4 * 3600
    assert nodes["r0003-02"]["actions"].count("guest-health-report") == 1
    assert nodes["r0003-02"]["actions"][-1] == "return"
    assert nodes["r0003-02"]["final_state"] == "in-service"
    assert nodes["r0003-09"]["case"] == "escalated"
    assert nodes["r0003-09"]["final_state"] == "drained"
    [closed] = [r for r in result.records if r["Node"] == "r0003-09" and r["Decision"] == "escalated"]
    assert "OperationNotAllowed" in closed["Reason"]
    assert "guest-health-report" in nodes["r0003-09"]["actions"]
    assert report["azure_failed_operations"] == len(failed) + 1


def test_the_loop_does_not_act_over_azure_scheduled_events() -> None:
    """A Redeploy Azure announced before the node's XID: the loop waits for the platform, judges the node again on
    its new host and leaves it be (no VM call, no report). A VM Azure terminates during its reboot: the case ends
    with no report and the loop's drain is lifted. A preempted node and a frozen one: never drained by the loop."""
    result = simulate(SCENARIOS / "scheduled-events.yaml")
    report = result.report()
    nodes = {n["node"]: n for n in report["nodes"]}
    redeployed = nodes["r0001-02"]
    assert redeployed["actions"] == []
    assert redeployed["final_state"] == "in-service"
    assert result.world.nodes["r0001-02"].physical_host != "SIMHOST-r0001-02"  # Azure moved it, not the loop
    waited = [r for r in result.records if r["Node"] == "r0001-02" and r["Decision"] in ("platform", "dismissed")]
    assert [r["Decision"] for r in waited] == ["platform", "dismissed"]
    assert "Redeploy" in waited[1]["Reason"]
    terminated = nodes["r0001-05"]
    assert terminated["case"] == "dismissed"
    assert "replace" not in terminated["actions"]
    assert result.world.nodes["r0001-05"].drained is False  # the loop's drain lifted from the record with no VM
    assert report["guest_health_reports"] == 0
    for name in ("r0001-08", "r0001-11"):
        assert name not in nodes or "drain" not in nodes[name]["actions"]
    assert result.world.nodes["r0001-11"].drained is False  # its own maintenance drain was lifted after the Freeze
    on_them = [c for c in result.world.azure_calls if c.endswith(("/8/restart", "/8/reimage", "/8/redeploy"))]
    assert on_them == []


def test_a_report_names_the_host_that_failed_not_the_new_one() -> None:
    """A node that stops answering is reported against the host it last published (its Slurm comment), not left
    unreported; after the redeploy it runs on a new host, and when the fault comes back the second report names
    that new host."""
    result = simulate(SCENARIOS / "new-host-after-redeploy.yaml")
    report = result.report()
    first, again = [r["host"] for r in report["reports"]]
    assert first == "SIMHOST-r0001-04"
    assert again == result.world.nodes["r0001-04"].physical_host != first
    (node,) = report["nodes"]
    assert node["case"] == "escalated"
    assert node["actions"].count("replace") == 1
