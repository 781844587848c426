"""``gb300 status``: each deployed rack's nodes, live through azure-mgmt-compute over a fake HTTP transport
(instance views and Run Command answering like ARM)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import requests

from gb300 import cli
from gb300.commands import status as status_cmd
from gb300.ops import fleet_status, rollout
from gb300.plan import PlanResult
from tests.ops.test_rollout import RG
from tests.support import fake_arm
from tests.support.fake_arm import SUBSCRIPTION, FakeHttp, StaticCredential, json_response
from tests.support.state import write_stack_export

READY = "state: ready\n"


class FakeArm(FakeHttp):
    """Per rack, the VMs that exist (with instance views) and what each node's status file says."""

    def __init__(self, racks: dict[str, dict[int, Any]], old: frozenset[tuple[str, int]] = frozenset()) -> None:
        super().__init__()
        self.old = old  # (rack, instance id) of the VMs Azure reports on an old model
        self.racks = racks  # rack -> instance id -> status text, or ("failed-provisioning", msg) / ("stopped",)
        self.seen: list[str] = []

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        url = urlparse(request.url or "")
        self.seen.append(f"{request.method} {url.path}")
        base = (
            rf"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RG}/providers/Microsoft\.Compute/virtualMachineScaleSets/"
        )
        m = re.fullmatch(base + r"([^/]+)/virtualMachines", url.path)
        if m and request.method == "GET":
            assert parse_qs(url.query).get("$expand") == ["instanceView"]
            rack = m.group(1)
            value = [self._vm(rack, i, v, (rack, i) not in self.old) for i, v in self.racks[rack].items()]
            return json_response(request, 200, {"value": value})
        m = re.fullmatch(base + r"([^/]+)/virtualMachines/(\d+)/runCommand", url.path)
        if m and request.method == "POST":
            body = json.loads(request.body or b"{}")
            assert body["commandId"] == "RunShellScript"
            assert "/var/lib/gb300/status" in " ".join(body["script"])
            text = self.racks[m.group(1)][int(m.group(2))]
            message = f"Enable succeeded: \n[stdout]\n{text}\n[stderr]\n"
            return json_response(
                request, 200, {"value": [{"code": "ProvisioningState/succeeded", "level": "Info", "message": message}]}
            )
        return json_response(request, 404, {"error": {"code": "NotFound", "message": url.path}})

    @staticmethod
    def _vm(rack: str, i: int, how: Any, latest: bool) -> dict[str, Any]:
        provisioning = ("failed", how[1]) if how[0] == "failed-provisioning" else ("succeeded", "")
        power = "deallocated" if how == ("stopped",) else "running"
        return {
            "name": f"{rack}_{i}",
            "instanceId": str(i),
            "properties": {
                "osProfile": {"computerName": f"{rack}-{i:06d}"},
                "provisioningState": provisioning[0].capitalize(),
                "latestModelApplied": latest,
                "instanceView": {
                    "statuses": [
                        {"code": f"ProvisioningState/{provisioning[0]}", "message": provisioning[1] or None},
                        {"code": f"PowerState/{power}"},
                    ]
                },
            },
        }


def _status(
    tmp_path: Path,
    plan: PlanResult,
    racks: dict[str, dict[int, Any]],
    extra: list[str],
    old: frozenset[tuple[str, int]] = frozenset(),
) -> tuple[int, FakeArm]:
    state = write_stack_export(tmp_path / "state.json", plan, subscription=SUBSCRIPTION)
    adapter = FakeArm(racks, old)
    client_for = rollout.azure_client_factory(
        StaticCredential(), transport=fake_arm.transport(adapter), retry_total=0, polling_interval=0
    )
    args = cli.build_parser().parse_args(["status", "--state", str(state), *extra])
    return status_cmd.run(args, client_for=client_for), adapter


def test_status_lists_ready_failed_booting_missing(
    reference_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ready rack, and a rack with a failed step, a booting node, a failed provisioning, two missing VMs and four
    VMs that Azure reports on an old model (counted, and the rack named with the command that rolls it out)."""
    good = dict.fromkeys(range(18), READY)
    bad: dict[int, Any] = dict.fromkeys(range(18), READY)
    bad[3] = "state: failed\nstep: 40-nccl\nreason: apt-get install libnccl2 exited 100\n"
    bad[7] = "state: booting\ncurrent: 20-nvidia-driver\n"
    bad[9] = ("failed-provisioning", "OS Provisioning for VM did not finish in the allotted time.")
    del bad[15], bad[14]
    code, adapter = _status(
        tmp_path,
        reference_plan,
        {"ref-train-r0001": good, "ref-train-r0002": bad},
        ["--rack", "ref-train-r0001", "--rack", "ref-train-r0002"],
        old=frozenset(("ref-train-r0002", i) for i in (0, 1, 2, 3)),
    )
    out = capsys.readouterr().out
    assert code == 1
    rows = {
        line.split()[0]: line.split()[1:]
        for line in out.splitlines()
        if line.startswith("ref-train-r000") and ":" not in line
    }
    assert rows == {
        "ref-train-r0001": ["18/18", "0", "0", "0", "0", "0"],
        "ref-train-r0002": ["13/18", "2", "1", "0", "2", "4"],
    }
    assert "1 rack(s) run an old node configuration (Azure: latestModelApplied false): ref-train-r0002" in out
    assert "`gb300 rollout`" in out
    assert "ref-train-r0002: ref-train-r0002-000003: failed at 40-nccl: apt-get install libnccl2 exited 100" in out
    assert "ref-train-r0002-000009: failed at azure: OS Provisioning for VM did not finish" in out
    assert "ref-train-r0002-000007: booting (step 20-nvidia-driver)" in out
    assert out.count(": missing: no VM in the scale set") == 2
    assert "31 of 36 node(s) ready in 2 rack(s)" in out
    # The failed-provisioning VM gets no Run Command; every other existing VM gets one.
    assert sum("runCommand" in s for s in adapter.seen) == 18 + 15


def test_status_all_ready_exits_zero(
    reference_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rack whose 18 nodes are all ready exits 0."""
    code, _ = _status(
        tmp_path, reference_plan, {"ref-train-r0064": dict.fromkeys(range(18), READY)}, ["--rack", "ref-train-r0064"]
    )
    assert code == 0
    assert "18 of 18 node(s) ready in 1 rack(s)" in capsys.readouterr().out


def test_status_unknown_rack_exits_two(
    reference_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --rack that is not deployed is a usage error naming it."""
    state = write_stack_export(tmp_path / "state.json", reference_plan, subscription=SUBSCRIPTION)
    assert cli.main(["status", "--state", str(state), "--rack", "ref-train-r0099"]) == 2
    assert "--rack ref-train-r0099: not a deployed rack" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("state: ready\n", ("ready", "", "")),
        ("state: failed\nstep: 80-fabric\nreason: CliqueId 0\n", ("failed", "80-fabric", "CliqueId 0")),
        ("state: booting\n", ("booting", "", "")),
        ("", ("booting", "", "")),
    ],
)
def test_parse_status(text: str, expected: tuple[str, str, str]) -> None:
    """The node's status file reads as ready, failed with step and reason, or booting."""
    assert fleet_status.parse_status(text) == expected


def test_status_names_the_subscription_it_asks(
    reference_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first line says which subscription Azure was asked: the racks' own, from their ids in --state."""
    code, adapter = _status(
        tmp_path, reference_plan, {"ref-train-r0001": dict.fromkeys(range(18), READY)}, ["--rack", "ref-train-r0001"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert (
        out.splitlines()[0] == f"gb300 status: Azure subscription {SUBSCRIPTION} (from the racks' Azure ids in --state)"
    )
    assert all(f"/subscriptions/{SUBSCRIPTION}/" in seen for seen in adapter.seen)
