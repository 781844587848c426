"""``gb300 rollout``: the racks to reimage from the deployed state, the dry-run plan, and the live path through
azure-mgmt-compute over a fake HTTP transport with a stand-in Slurm controller."""

from __future__ import annotations

import copy
import io
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import requests
import urllib3
from azure.core.credentials import AccessToken, AccessTokenInfo
from azure.core.pipeline.transport import RequestsTransport

from gb300 import cli
from gb300.commands import rollout as rollout_cmd
from gb300.ops import rollout
from gb300.plan import PlanResult
from gb300.plan.mocks import SUBSCRIPTION_ID as MOCK_SUBSCRIPTION
from gb300.plan.state import parse_state
from gb300.rules import reimage
from gb300.slurm.hostlist import expand
from tests.support import signing

SUBSCRIPTION = "11111111-2222-3333-4444-555555555555"
RG = "ref-rg"
VMS = 18


def _export(plan: PlanResult, stale: set[str] | None = None) -> dict[str, Any]:
    """A `pulumi stack export` document of the plan as deployed (real-looking addresses on the racks)."""
    resources = []
    for r in plan.resources:
        inputs: dict[str, Any] = copy.deepcopy(dict(r.inputs))
        # Azure's real address is in each id (the plan's ids use the mocks' subscription).
        resource_id = r.id.replace(MOCK_SUBSCRIPTION, SUBSCRIPTION) if r.id else r.id
        if stale is not None and r.name in stale and isinstance(inputs.get("tags"), dict):
            inputs["tags"][reimage.HASH_TAG] = "0" * 64
        resources.append({"urn": r.urn, "type": r.type, "id": resource_id, "inputs": inputs})
    return {"version": 3, "deployment": {"resources": resources}}


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "state.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def changed_stack(reference_raw: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference stack file with a new payload signing key (a change to every node's custom data; a change
    that reaches only the payload, such as a new NCCL pin, leaves the custom data and the tag as they were:
    docs/node-payload.md#updating)."""
    import yaml  # noqa: PLC0415

    raw = signing.with_test_key(copy.deepcopy(reference_raw))
    path = tmp_path_factory.mktemp("stack") / "Pulumi.reference.yaml"
    path.write_text(yaml.safe_dump({"config": {f"gb300:{k}": v for k, v in raw.items()}}), encoding="utf-8")
    return path


def test_dry_run_lists_all_64_racks_in_order(
    reference_plan: PlanResult, changed_stack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After a change to the GPU nodes' custom data, the dry run lists the 64 racks in order, 4 per batch."""
    state = _write(tmp_path, _export(reference_plan))
    code = cli.main(
        ["rollout", "--stack-file", str(changed_stack), "--state", str(state), "--dry-run", "--concurrency", "4"]
    )
    out = capsys.readouterr().out
    assert code == 0
    batches = [line for line in out.splitlines() if line.startswith("batch")]
    assert len(batches) == 16
    names = re.findall(r"ref-train-r\d{4}", "\n".join(batches))
    assert names == [f"ref-train-r{i:04d}" for i in range(1, 65)]
    assert all(len(re.findall(r"ref-train-r\d{4}", b)) == 4 for b in batches)
    assert "64 rack(s) to reimage, concurrency 4, 16 batch(es)" in out


def test_dry_run_default_is_one_rack_per_batch(
    reference_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --concurrency each batch is one rack; only the racks whose hash differs are listed."""
    state = _write(tmp_path, _export(reference_plan, stale={"ref-train-r0007", "ref-train-r0003"}))
    assert cli.main(["rollout", "--stack", "reference", "--state", str(state), "--dry-run"]) == 0
    batches = [line for line in capsys.readouterr().out.splitlines() if line.startswith("batch")]
    assert [re.findall(r"ref-train-r\d{4}", b) for b in batches] == [["ref-train-r0003"], ["ref-train-r0007"]]


def test_unchanged_stack_has_nothing_to_roll_out(
    reference_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """When every deployed rack has the stack's hash, the rollout says so and touches nothing (exit 0)."""
    state = _write(tmp_path, _export(reference_plan))
    assert cli.main(["rollout", "--stack", "reference", "--state", str(state)]) == 0
    assert "nothing to roll out" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "words"),
    [(["--concurrency", "0"], "--concurrency must be at least 1"), (["--job-timeout", "-1"], "--job-timeout")],
)
def test_bad_flags_exit_two(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], words: str) -> None:
    """A concurrency below one or a non-positive timeout is a usage error on one line."""
    state = _write(tmp_path, {"version": 3, "deployment": {"resources": []}})
    assert cli.main(["rollout", "--stack", "dev", "--state", str(state), *extra]) == 2
    assert words in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------
# The live path: azure-mgmt-compute over azure-core's RequestsTransport answering like ARM, and a stand-in
# controller that parses the scontrol/squeue command lines the rollout sends.


class Clock:
    """A clock that moves only when the rollout sleeps (or Azure finishes a reimage)."""

    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


@dataclass
class Node:
    states: set[str]
    reason: str = ""
    boot_time: float = 0.0


@dataclass
class SlurmStandIn:
    """The controller's node table and jobs; ``calls`` records every command line in order."""

    clock: Clock
    nodes: dict[str, Node] = field(default_factory=dict)
    jobs: dict[str, list[str]] = field(default_factory=dict)  # host -> job ids
    job_seconds: float = 0.0  # jobs end this long after the drain
    calls: list[str] = field(default_factory=list)
    drained_at: float = 0.0

    def run(self, argv: Sequence[str]) -> str:
        self.calls.append(" ".join(argv))
        args = list(argv)
        if args[:2] == ["scontrol", "update"]:
            opts = dict(a.split("=", 1) for a in args[2:])
            for host in expand(opts["nodename"]):
                node = self.nodes[host]
                if opts["state"] == "drain":
                    node.states.add("DRAIN")
                    node.reason = opts["reason"]
                    self.drained_at = self.clock.now()
                elif opts["state"] == "resume":
                    node.states.discard("DRAIN")
                    node.reason = ""
            return ""
        if args[0] == "squeue":
            hosts = expand(next(a for a in args if a.startswith("--nodelist=")).split("=", 1)[1])
            if self.clock.now() >= self.drained_at + self.job_seconds:
                return ""
            return "".join(f"{j}\n" for h in hosts for j in self.jobs.get(h, []))
        if args[:4] == ["scontrol", "--json", "show", "node"]:
            wanted = expand(args[4])
            return json.dumps(
                {
                    "nodes": [
                        {
                            "name": h,
                            "state": sorted(self.nodes[h].states),
                            "reason": self.nodes[h].reason,
                            "boot_time": {"set": True, "infinite": False, "number": int(self.nodes[h].boot_time)},
                        }
                        for h in wanted
                        if h in self.nodes
                    ]
                }
            )
        raise AssertionError(f"stand-in Slurm: unexpected command {argv}")

    def reboot(self, hosts: list[str], health_failure: str | None = None, never: bool = False) -> None:
        """The reimaged hosts boot and register again (drain kept), or one fails the health check."""
        for i, host in enumerate(hosts):
            node = self.nodes[host]
            if never:
                node.states = {"DOWN", "DRAIN"}
                continue
            node.boot_time = self.clock.now()
            if health_failure and i == 3:
                node.reason = health_failure


def _hosts(rack: str) -> list[str]:
    return [f"{rack}-{i:06d}" for i in range(VMS)]


class FakeArm(requests.adapters.BaseAdapter):
    """ARM for scale sets: list a rack's VMs, POST reimage (202 + Azure-AsyncOperation), the operation status."""

    def __init__(self, slurm: SlurmStandIn, behaviour: dict[str, str]) -> None:
        super().__init__()
        self.slurm = slurm
        self.behaviour = behaviour  # rack -> "ok" | "azure-fails" | "health-fails" | "never-back"
        self.seen: list[str] = []

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        url = urlparse(request.url or "")
        assert request.headers.get("Authorization") == "Bearer fake-token"
        self.seen.append(f"{request.method} {url.path}")
        m = re.fullmatch(
            rf"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RG}/providers/Microsoft\.Compute/"
            r"virtualMachineScaleSets/([^/]+)/(virtualMachines|reimage)",
            url.path,
        )
        if m and m.group(2) == "virtualMachines" and request.method == "GET":
            rack = m.group(1)
            value = [
                {
                    "name": f"{rack}_{i}",
                    "instanceId": str(i),
                    "id": f"{url.path}/{i}",
                    "properties": {"osProfile": {"computerName": host}, "provisioningState": "Succeeded"},
                }
                for i, host in enumerate(_hosts(rack))
            ]
            return _json(request, 200, {"value": value})
        if m and m.group(2) == "reimage" and request.method == "POST":
            op = f"https://management.azure.com/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Compute/locations/eastus2/operations/{m.group(1)}"
            return _json(request, 202, None, {"Azure-AsyncOperation": op, "Retry-After": "0"})
        op = re.fullmatch(r".*/operations/([^/]+)", url.path)
        if op and request.method == "GET":
            rack = op.group(1)
            how = self.behaviour.get(rack, "ok")
            if how == "azure-fails":
                return _json(
                    request,
                    200,
                    {
                        "status": "Failed",
                        "error": {
                            "code": "OSProvisioningTimedOut",
                            "message": "OS provisioning did not finish in time.",
                        },
                    },
                )
            self.slurm.clock.sleep(600)  # a reimage takes minutes
            self.slurm.reboot(
                _hosts(rack),
                health_failure="gb300: fabric: CliqueId 0 on GPU 2" if how == "health-fails" else None,
                never=how == "never-back",
            )
            return _json(request, 200, {"status": "Succeeded"})
        return _json(request, 404, {"error": {"code": "NotFound", "message": url.path}})

    def close(self) -> None:
        pass


def _json(
    request: requests.PreparedRequest, status: int, body: Any, headers: dict[str, str] | None = None
) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response.reason = {200: "OK", 202: "Accepted", 404: "Not Found"}.get(status, "")
    content = b"" if body is None else json.dumps(body).encode()
    response._content = content
    response.raw = urllib3.HTTPResponse(body=io.BytesIO(content), status=status, preload_content=False)
    response.headers["Content-Type"] = "application/json; charset=utf-8"
    response.headers["x-ms-request-id"] = "00000000-0000-0000-0000-000000000001"
    for key, value in (headers or {}).items():
        response.headers[key] = value
    response.url = request.url or ""
    response.request = request
    return response


class StaticCredential:
    """A token credential that hands out a fixed bearer token (no Entra ID call)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("fake-token", int(time.time()) + 3600)

    def get_token_info(self, *scopes: str, options: Any = None) -> AccessTokenInfo:
        return AccessTokenInfo("fake-token", int(time.time()) + 3600)


@pytest.fixture(scope="module")
def stale_state(reference_plan: PlanResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An export of the reference stack in which racks 1 to 6 still carry an older custom data hash."""
    path = tmp_path_factory.mktemp("state") / "state.json"
    path.write_text(json.dumps(_export(reference_plan, stale={f"ref-train-r{i:04d}" for i in range(1, 7)})))
    return path


def _live(
    state: Path, behaviour: dict[str, str], extra: Sequence[str] = (), job_seconds: float = 0.0
) -> tuple[int, SlurmStandIn, FakeArm, Callable[[], None]]:
    clock = Clock()
    slurm = SlurmStandIn(clock, job_seconds=job_seconds)
    for i in range(1, 7):
        for host in _hosts(f"ref-train-r{i:04d}"):
            slurm.nodes[host] = Node({"ALLOCATED"}, boot_time=clock.now() - 86400)
            slurm.jobs[host] = [str(1000 + i)]
    adapter = FakeArm(slurm, behaviour)
    session = requests.Session()
    session.mount("https://", adapter)
    transport = RequestsTransport(session=session, session_owner=False)
    client_for = rollout.azure_client_factory(
        StaticCredential(), transport=transport, retry_total=0, polling_interval=0
    )
    args = cli.build_parser().parse_args(
        ["rollout", "--stack", "reference", "--state", str(state), "--poll", "60", "--health-timeout", "1800", *extra]
    )
    code = rollout_cmd.run(args, client_for=client_for, slurm_run=slurm.run, sleep=clock.sleep, now=clock.now)
    return code, slurm, adapter, lambda: None


def test_live_rollout_drains_reimages_gates_and_resumes_every_rack(
    stale_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each rack in turn: drained, jobs waited for, reimaged through ARM, health-gated, resumed; exit 0."""
    code, slurm, adapter, _ = _live(stale_state, {}, job_seconds=120)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "rollout: 6 rack(s) reimaged and resumed" in out
    reimages = [s for s in adapter.seen if s.startswith("POST")]
    assert [s.split("/")[-2] for s in reimages] == [f"ref-train-r{i:04d}" for i in range(1, 7)]
    # Order per rack: drain before the reimage, resume after the gate; never two racks drained at once.
    first = [c for c in slurm.calls if "ref-train-r0001" in c and c.startswith("scontrol update")]
    assert "state=drain" in first[0]
    assert "reason=gb300-rollout: reimage ref-train-r0001" in first[0]
    assert "state=resume" in first[-1]
    order = [c for c in slurm.calls if c.startswith("scontrol update")]
    assert [("drain" if "drain" in c else "resume") for c in order] == ["drain", "resume"] * 6
    assert all(not n.states & {"DRAIN"} for n in slurm.nodes.values())


def test_live_rollout_in_batches_of_three(stale_state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With --concurrency 3, three racks are drained before any of them is reimaged."""
    code, slurm, _, _ = _live(stale_state, {}, ["--concurrency", "3"])
    assert code == 0
    order = [("drain" if "drain" in c else "resume") for c in slurm.calls if c.startswith("scontrol update")]
    assert order == ["drain"] * 3 + ["resume"] * 3 + ["drain"] * 3 + ["resume"] * 3


@pytest.mark.parametrize(
    ("how", "step", "words"),
    [
        pytest.param("health-fails", "health gate", "ref-train-r0003-000003: gb300: fabric: CliqueId 0", id="health"),
        pytest.param("azure-fails", "reimage", "OS provisioning did not finish in time", id="azure"),
        pytest.param("never-back", "health gate", "18 of 18 node(s) not back after 1800s", id="timeout"),
    ],
)
def test_live_rollout_stops_at_the_failing_rack(
    stale_state: Path, capsys: pytest.CaptureFixture[str], how: str, step: str, words: str
) -> None:
    """Rack 3 fails: the rollout exits 1 naming the rack, step and reason; rack 3 stays drained; 4-6 untouched."""
    code, slurm, adapter, _ = _live(stale_state, {"ref-train-r0003": how})
    out = capsys.readouterr().out
    assert code == 1
    assert f"rollout stopped: rack ref-train-r0003 (pool train, rack 3) failed at {step}" in out
    assert words in out
    assert "rollout: 2 rack(s) reimaged and resumed" in out
    assert "not started (3): ref-train-r0004, ref-train-r0005, ref-train-r0006" in out
    assert not any("ref-train-r0004" in s for s in adapter.seen)
    assert all("DRAIN" in slurm.nodes[h].states for h in _hosts("ref-train-r0003"))
    assert all("DRAIN" not in slurm.nodes[h].states for h in _hosts("ref-train-r0002"))


def test_live_rollout_stops_when_jobs_outlast_the_timeout(
    stale_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Jobs still running at --job-timeout stop the rollout before any reimage; the rack stays drained."""
    code, slurm, adapter, _ = _live(stale_state, {}, ["--job-timeout", "600"], job_seconds=10_000)
    out = capsys.readouterr().out
    assert code == 1
    assert (
        "rack ref-train-r0001 (pool train, rack 1) failed at wait for jobs: 18 job(s) still running after 600s" in out
    )
    assert not [s for s in adapter.seen if s.startswith("POST")]
    assert all("DRAIN" in slurm.nodes[h].states for h in _hosts("ref-train-r0001"))


def test_slurm_commands_through_ssh_are_one_quoted_string() -> None:
    """With --slurm-via, the command reaches the remote shell as one string with the reason quoted."""
    seen: list[list[str]] = []
    slurm = rollout.Slurm(["ssh", "admin@head", "sudo"], run=lambda argv: seen.append(list(argv)) or "")
    slurm.drain(["a-000000", "a-000001"], "gb300-rollout: reimage a")
    assert seen == [
        [
            "ssh",
            "admin@head",
            "sudo",
            "scontrol update 'nodename=a-[000000-000001]' state=drain 'reason=gb300-rollout: reimage a'",
        ]
    ]


def test_rollout_racks_are_the_plans_reimage_racks(reference_plan: PlanResult) -> None:
    """The rollout's racks are the ones the plan's custom-data-changed finding names (one source of truth)."""
    parsed = parse_state(_export(reference_plan, stale={"ref-train-r0010", "ref-train-r0002"}))
    names = [r.name for r in rollout.racks_to_roll(reference_plan.resources, parsed)]
    assert names == reimage.changed(reference_plan.resources, parsed)["train"] == ["ref-train-r0002", "ref-train-r0010"]


def test_state_of_another_stack_is_refused(
    reference_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A state exported from another stack is exit 2 naming both stacks, not a silent 'nothing to roll out'."""
    state = _write(tmp_path, _export(reference_plan, stale={"ref-train-r0001"}))
    assert cli.main(["rollout", "--stack", "dev", "--state", str(state), "--dry-run"]) == 2
    assert "is the state of stack reference, not dev" in capsys.readouterr().err
