"""The scenario corpus: whole racks (power, NVLink domains, IMEX) and fabric events across racks."""

from __future__ import annotations

from gb300.facts.loader import data
from gb300.heal import sim

from .conftest import SCENARIOS, simulate


def assert_rack_held_as_one_nvlink_incident(result: sim.Result, rack: str) -> None:
    """``rack`` (``r0001``) is the one rack incident, all 18 of its nodes drained, none of them sent a reboot, reimage
    or redeploy, and the run's only Guest Health Report is in the NVLink category."""
    scale_set = f"sim-gpu-{rack}"
    assert result.report()["rack_incidents"] == [scale_set]
    assert all(result.world.nodes[f"{rack}-{i:02d}"].drained for i in range(18))
    assert not [c for c in result.world.azure_calls if f"/{scale_set}/" in c and c.startswith("POST")]
    nvlink = data("remediation.yaml")["azure"]["guestHealthReport"]["categories"]["nvlink"]
    assert [r["properties"]["impactCategory"] for r in result.world.reports] == [nvlink]


def test_rack_power_loss_is_one_incident_and_recovers() -> None:
    """A rack that loses power is held as one incident, released when its nodes answer again, and never drained."""
    result = simulate(SCENARIOS / "rack-power-loss.yaml")
    decisions = [r["Decision"] for r in result.records]
    assert decisions.count("rack-incident") == 1
    assert "rack-recovered" in decisions
    assert result.report()["drains"] == 0


def test_a_rack_with_its_nvlink_domain_down_is_one_incident() -> None:
    """NVLink failures on 14 of 18 nodes of one rack: one rack incident, all 18 nodes held out of service as one
    block (none left schedulable on the broken domain), one Guest Health Report in the NVLink category, no node
    rebooted, reimaged or redeployed; the other rack's lone NVLink fault is repaired."""
    result = simulate(SCENARIOS / "nvlink-rack-down.yaml")
    report = result.report()
    assert_rack_held_as_one_nvlink_incident(result, "r0001")
    assert all("r0001" not in b["nodes"] for b in report["blocks"])  # the held rack is no block to schedule on
    assert next(n for n in report["nodes"] if n["node"] == "r0002-08")["actions"][-1] == "return"
    assert [r for r in result.records if r["Decision"] == "rack-incident" and "NVLink" in r["Reason"]]


def test_nvlink_xids_on_most_of_a_rack_are_one_rack_incident() -> None:
    """XID 145 (NVIDIA's NVLink bucket) on 13 of 18 nodes of one rack: the rack is held as one NVLink incident with
    one Guest Health Report in the NVLink category and no node of it rebooted, reimaged or redeployed; a lone XID
    145 on the other rack is repaired by a reboot."""
    result = simulate(SCENARIOS / "nvlink-xid-rack.yaml")
    report = result.report()
    assert_rack_held_as_one_nvlink_incident(result, "r0001")
    assert next(n for n in report["nodes"] if n["node"] == "r0002-05")["actions"] == [
        "drain",
        "reboot",
        "revalidate",
        "return",
    ]


def test_an_imex_blip_during_a_job_is_the_jobs() -> None:
    """IMEX unhealthy on all 18 nodes of a running job, three times in ten minutes: the job's, no node drained."""
    report = simulate(SCENARIOS / "imex-job-blip.yaml").report()
    assert report["drains"] == 0
    assert report["rack_incidents"] == []


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
