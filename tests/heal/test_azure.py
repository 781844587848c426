"""The loop's Azure calls, through azure-mgmt-compute over a fake HTTP transport, and the role that allows them."""

from __future__ import annotations

import re

from gb300.config import stack_yaml
from gb300.heal import azure_calls
from gb300.heal.azure_calls import REPAIR_ACTIONS, REPORT_ACTIONS, role_definitions

from .conftest import SCENARIOS, simulate


def _action(call: str) -> str:
    """The Azure RBAC action an ARM request needs (method and path as the fake transport saw them)."""
    method, path = call.split(" ", 1)
    provider = re.search(r"/providers/(.*)$", path)
    assert provider is not None
    parts = provider.group(1).split("/")
    namespace, rest = parts[0], parts[1:]
    types = rest[0::2]
    if method == "POST":
        return (
            "/".join([namespace, *types[:-1], f"{rest[-1]}/action"])
            if len(rest) % 2
            else "/".join([namespace, *types, "action"])
        )
    verb = {"GET": "read", "PUT": "write", "PATCH": "write", "DELETE": "delete"}[method]
    return "/".join([namespace, *types, verb])


def test_calls_go_through_the_sdk_with_a_token() -> None:
    """Reboot, reimage and replace are POSTs the SDK sends to the VM's instance; nothing writes the scale set."""
    result = simulate(SCENARIOS / "xid-fatal-idle.yaml")
    posts = [c for c in result.world.azure_calls if c.startswith("POST")]
    assert [p.rsplit("/", 1)[1] for p in posts] == ["restart", "reimage", "redeploy"]
    assert all("/virtualMachineScaleSets/sim-gpu-r0001/virtualMachines/5/" in p for p in posts)
    assert not [c for c in result.world.azure_calls if c.startswith(("PUT", "PATCH")) and "Compute" in c]


def test_permissions_equal_the_calls_made() -> None:
    """Over the whole corpus the actions the requests need are exactly the two roles' actions, no more."""
    used: set[str] = set()
    for path in sorted(SCENARIOS.glob("*.yaml")):
        used |= {_action(c) for c in simulate(path).world.azure_calls}
    roles = role_definitions("sub", ["rg"], guest_health_report=True)
    granted = {a for role in roles for a in role["Actions"]}
    assert used == granted == set(REPAIR_ACTIONS) | set(REPORT_ACTIONS)
    assert not any(a.startswith("Microsoft.Compute/virtualMachineScaleSets/write") for a in granted)


def test_report_role_only_with_guest_health_reports() -> None:
    """Without Guest Health Reports the loop gets one role, scoped to the GPU resource groups."""
    roles = role_definitions("sub", ["rg-a", "rg-b"], guest_health_report=False)
    assert [r["Name"] for r in roles] == ["gb300 remediation"]
    assert roles[0]["AssignableScopes"] == [
        "/subscriptions/sub/resourceGroups/rg-a",
        "/subscriptions/sub/resourceGroups/rg-b",
    ]


def test_guest_health_report_names_the_old_physical_host() -> None:
    """With reports on, one report goes to Microsoft.Impact with the host read from KVP before the VM moved."""
    result = simulate(SCENARIOS / "requeue-and-report.yaml")
    assert len(result.world.reports) == 1
    body = result.world.reports[0]["properties"]
    assert body["impactCategory"] == "Resource.Hpc.Unhealthy.HpcMissingGpu"
    assert body["additionalProperties"]["PhysicalHostName"].startswith("SIMHOST")
    assert body["impactedResourceId"].endswith("/virtualMachineScaleSets/sim-gpu-r0001/virtualMachines/7")
    assert any(r["Decision"] == "requeue" for r in result.records)


def test_refused_call_is_recorded_and_the_ladder_goes_on() -> None:
    """When Azure refuses a restart for good (403) the refusal is recorded with Azure's message and the node climbs
    on (a 403 will not change by waiting, unlike 429 or 409)."""
    raw = stack_yaml.load(SCENARIOS / "gate-checks.yaml")
    raw["azure"] = [{"from": 0, "until": raw["duration"], "call": "restart", "status": 403}]
    result = simulate(raw)
    errors = [r for r in result.records if r["Decision"] == "azure-error"]
    assert len(errors) == 2  # the first try and its one retry (data/remediation.yaml ladder.reboot.retries)
    assert "AuthorizationFailed" in errors[0]["Reason"]
    node = next(n for n in result.report()["nodes"] if n["node"] == "r0002-06")
    assert node["actions"][:2] == ["drain", "reimage"]
    assert node["final_state"] == "in-service"


def test_module_lists_each_call_once() -> None:
    """Each rung maps to one SDK method; the repair role lists one action per call."""
    assert set(azure_calls.RUNG_CALLS) == {"reboot", "reimage", "replace"}
    assert len(REPAIR_ACTIONS) == len(set(REPAIR_ACTIONS)) == 2 + len(azure_calls.RUNG_CALLS)  # + list, instance view


def test_guest_health_report_category_follows_the_evidence() -> None:
    """An NVLink fault cured by a move is reported in the NVLink category of data/remediation.yaml, not the generic
    one (the loop once mapped nvlink-down to nothing, so its category was never used)."""
    from gb300.facts.loader import data  # noqa: PLC0415

    ghr = data("remediation.yaml")["azure"]["guestHealthReport"]
    result = simulate(
        {
            "racks": 1,
            "duration": 21600,
            "remediation": {"guestHealthReport": True},
            "events": [
                {"at": 1200, "node": "r0001-08", "kind": "nvlink-down"},
                {"at": 1500, "node": "r0001-08", "kind": "nvlink-down"},
            ],
            "truth": [{"node": "r0001-08", "cured_by": "replace"}],
        }
    )
    assert [r["properties"]["impactCategory"] for r in result.world.reports] == [ghr["categories"]["nvlink"]]
    assert ghr["categories"]["nvlink"] != ghr["categories"]["default"]


def test_a_guest_health_report_as_azure_documents_it() -> None:
    """XID 79 that a reboot did not cure: the report is filed in Azure's XID 79 category (not the generic one),
    names the VM by its VmUniqueId and the host the node itself named, and Azure's insights are read back into a
    decision record. A node whose reboot was only refused by Azure gets no report (tested in test_corpus)."""
    from gb300.facts.loader import data  # noqa: PLC0415

    categories = data("remediation.yaml")["azure"]["guestHealthReport"]["categories"]
    result = simulate(
        {
            "racks": 1,
            "duration": 21600,
            "remediation": {"guestHealthReport": True},
            "events": [{"at": 600, "node": "r0001-09", "kind": "xid", "code": 79}],
            "truth": [{"node": "r0001-09", "cured_by": "replace"}],
        }
    )
    [report] = result.world.reports
    body = report["properties"]
    assert body["impactCategory"] == categories["xid79"] != categories["default"]
    assert re.fullmatch(r"[0-9a-f-]{36}", body["additionalProperties"]["VmUniqueId"])
    assert body["additionalProperties"]["PhysicalHostName"] == "SIMHOST-r0001-09"
    assert [r["Reason"] for r in result.records if r["Decision"] == "report-insights"] == ["simulated: report received"]
