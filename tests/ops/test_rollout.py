"""``gb300 rollout``: the racks Azure reports on an old model (a saved ``az vmss list-instances`` answer, or live),
the dry-run plan, and the live path (manual upgrade, reimage, health gate) through azure-mgmt-compute over a fake
HTTP transport with a stand-in Slurm controller."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli
from gb300.commands import rollout as rollout_cmd
from gb300.heal import fake_arm
from gb300.heal.fake_arm import StaticCredential
from gb300.ops import rollout
from gb300.plan import PlanResult
from gb300.plan.runner import register
from gb300.resources import ResourceRecord
from gb300.rules import reimage
from gb300.slurm.hostlist import expand
from tests.support.fake_arm import SUBSCRIPTION
from tests.support.state import stack_export

RG = "ref-rg"
VMS = 18


def _export(plan: PlanResult, stale: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A `pulumi stack export` document of the plan as deployed (real-looking addresses on the racks); the racks in
    ``stale`` still carry an old custom-data hash (a state taken before `pulumi up`)."""

    def inputs(r: ResourceRecord) -> dict[str, Any]:
        tags = r.inputs.get("tags")
        if r.name not in stale or not isinstance(tags, dict):
            return r.inputs
        return {**r.inputs, "tags": {**tags, reimage.HASH_TAG: "0" * 64}}

    return stack_export(plan, inputs=inputs, subscription=SUBSCRIPTION)


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "state.json"
    path.write_text(json.dumps(doc))
    return path


REFERENCE_RACKS = [f"ref-train-r{i:04d}" for i in range(1, 65)]


def _vm(rack: str, i: int, latest: bool) -> dict[str, Any]:
    """One VM as `az vmss list-instances -o json` prints it (the CLI lifts `properties` to the top)."""
    return {
        "id": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RG}/providers/Microsoft.Compute/"
        f"virtualMachineScaleSets/{rack}/virtualMachines/{i}",
        "instanceId": str(i),
        "name": f"{rack}_{i}",
        "latestModelApplied": latest,
        "osProfile": {"computerName": f"{rack}-{i:06d}", "adminUsername": "azureuser"},
        "provisioningState": "Succeeded",
        "resourceGroup": RG.upper(),
    }


def _saved_answer(folder: Path, old: dict[str, int], racks: Sequence[str] = REFERENCE_RACKS) -> Path:
    """One `az vmss list-instances ... -o json > DIR/<rack>.json` per rack; ``old`` rack -> VMs on an old model."""
    folder.mkdir(parents=True, exist_ok=True)
    for rack in racks:
        vms = [_vm(rack, i, latest=i >= old.get(rack, 0)) for i in range(VMS)]
        (folder / f"{rack}.json").write_text(json.dumps(vms, indent=2))
    return folder


def _batches(out: str) -> list[list[str]]:
    return [re.findall(r"ref-train-r\d{4}", line) for line in out.splitlines() if line.startswith("batch")]


def test_dry_run_after_pulumi_up_without_azure_exits_two(
    reference_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The state exported after `pulumi up` already holds the new hash: without Azure's answer the dry run says it
    cannot know which racks run an old configuration (exit 2), and never that there is nothing to roll out."""
    state = _write(tmp_path, _export(reference_plan))
    assert cli.main(["rollout", "--stack", "reference", "--state", str(state), "--dry-run"]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1].startswith("gb300 rollout: --dry-run: which racks")
    assert "is Azure's to say" in captured.err
    assert "--azure live" in captured.err
    assert "nothing to roll out" not in captured.out + captured.err


def test_dry_run_lists_exactly_the_racks_azure_reports_on_an_old_model(
    reference_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a saved answer in which racks 7 and 3 (some of their VMs) run an old model, the dry run lists exactly
    those two, in rack order, each with how many of its VMs are behind."""
    state = _write(tmp_path, _export(reference_plan))
    answer = _saved_answer(tmp_path / "instances", {"ref-train-r0007": 18, "ref-train-r0003": 2})
    argv = ["rollout", "--stack", "reference", "--state", str(state), "--azure", str(answer), "--dry-run"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert _batches(out) == [["ref-train-r0003"], ["ref-train-r0007"]]
    assert "ref-train-r0003 (pool train, rack 3, 18 VMs, 2 on an old model)" in out
    assert "2 rack(s) to reimage" in out


def test_dry_run_of_a_whole_pool_in_batches_of_four(
    reference_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After a change to every GPU node's custom data, Azure reports all 64 racks behind: 16 batches of four, in
    order; one file holding every rack's VMs is read as well as a directory."""
    state = _write(tmp_path, _export(reference_plan))
    folder = _saved_answer(tmp_path / "instances", dict.fromkeys(REFERENCE_RACKS, VMS))
    one_file = tmp_path / "all.json"
    one_file.write_text(json.dumps([vm for f in sorted(folder.glob("*.json")) for vm in json.loads(f.read_text())]))
    argv = ["rollout", "--stack", "reference", "--state", str(state), "--azure", str(one_file), "--dry-run"]
    assert cli.main([*argv, "--concurrency", "4"]) == 0
    out = capsys.readouterr().out
    batches = _batches(out)
    assert len(batches) == 16
    assert all(len(b) == 4 for b in batches)
    assert [r for b in batches for r in b] == REFERENCE_RACKS
    assert "64 rack(s) to reimage, concurrency 4, 16 batch(es)" in out


def test_a_rest_body_answer_is_read_too(
    reference_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The REST body of `GET .../virtualMachines` (`{"value": [...]}` with `properties`) is a saved answer too."""
    state = _write(tmp_path, _export(reference_plan))
    vms = []
    for rack in REFERENCE_RACKS:
        for i in range(VMS):
            flat = _vm(rack, i, latest=rack != "ref-train-r0042")
            props = {k: flat.pop(k) for k in ("latestModelApplied", "osProfile", "provisioningState")}
            vms.append({**flat, "properties": props})
    answer = tmp_path / "rest.json"
    answer.write_text(json.dumps({"value": vms}))
    argv = ["rollout", "--stack", "reference", "--state", str(state), "--azure", str(answer), "--dry-run"]
    assert cli.main(argv) == 0
    assert _batches(capsys.readouterr().out) == [["ref-train-r0042"]]


def test_every_rack_on_the_latest_model_has_nothing_to_roll_out(
    reference_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """When Azure reports every VM on the latest model, the rollout says so, naming its source, and exits 0."""
    state = _write(tmp_path, _export(reference_plan))
    answer = _saved_answer(tmp_path / "instances", {})
    argv = ["rollout", "--stack", "reference", "--state", str(state), "--azure", str(answer), "--dry-run"]
    assert cli.main(argv) == 0
    assert "nothing to roll out: Azure" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("case", "words"),
    [
        ("rack-missing", "no VM listed for 1 deployed rack(s) (ref-train-r0064)"),
        ("not-json", "is not JSON"),
        ("no-flag", "latestModelApplied must be true or false"),
        ("saved-without-dry-run", "a saved answer is only for --dry-run"),
    ],
)
def test_an_answer_that_cannot_tell_exits_two(
    reference_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, words: str
) -> None:
    """A saved answer that leaves a rack out, is not JSON, lacks latestModelApplied, or is used for a real
    rollout: exit 2 on one line, nothing rolled out."""
    state = _write(tmp_path, _export(reference_plan))
    answer = _saved_answer(tmp_path / "instances", {"ref-train-r0001": 18})
    if case == "rack-missing":
        (answer / "ref-train-r0064.json").unlink()
    elif case == "not-json":
        (answer / "ref-train-r0002.json").write_text("InstanceId  LatestModelApplied\n0  True\n")
    elif case == "no-flag":
        vms = json.loads((answer / "ref-train-r0002.json").read_text())
        del vms[0]["latestModelApplied"]
        (answer / "ref-train-r0002.json").write_text(json.dumps(vms))
    argv = ["rollout", "--stack", "reference", "--state", str(state), "--azure", str(answer)]
    assert cli.main(argv if case == "saved-without-dry-run" else [*argv, "--dry-run"]) == 2
    captured = capsys.readouterr()
    assert words in captured.err
    assert "batch" not in captured.out


def test_a_state_before_pulumi_up_is_refused(
    reference_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A state whose racks still carry another custom data hash than the stack's means `pulumi up` has not put the
    new model in place: reimaging would bring back the old configuration, so the rollout says to run it first."""
    state = _write(tmp_path, _export(reference_plan, stale=frozenset({"ref-train-r0005"})))
    answer = _saved_answer(tmp_path / "instances", {"ref-train-r0005": 18})
    argv = ["rollout", "--stack", "reference", "--state", str(state), "--azure", str(answer), "--dry-run"]
    assert cli.main(argv) == 2
    assert "(ref-train-r0005) do not have the stack's custom data in their model yet: run 'pulumi up' first" in (
        capsys.readouterr().err
    )


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


class FakeArm(fake_arm.FakeArm):
    """ARM for rack scale sets on the one fake ARM (:class:`gb300.heal.fake_arm.FakeArm`, which checks the bearer
    token), keeping what Azure keeps: each VM's own model (``latestModelApplied``) and the model its OS disk was last
    built from. It lists a rack's VMs, takes ``POST manualupgrade`` (the VMs' models become the scale set's) and
    ``POST reimage`` (each OS disk rebuilt from its VM's own model), both as 202 + Azure-AsyncOperation, and answers
    the operation status."""

    def __init__(self, slurm: SlurmStandIn, behaviour: dict[str, str], old: set[str]) -> None:
        super().__init__(self._answer)
        self.slurm = slurm
        self.behaviour = behaviour  # rack -> "ok" | "azure-fails" | "health-fails" | "never-back"
        self.model: dict[str, list[bool]] = {}  # rack -> per VM: its model is the scale set's latest
        self.runs: dict[str, list[bool]] = {}  # rack -> per VM: its OS disk was built from the latest model
        for i in range(1, 65):
            rack = f"ref-train-r{i:04d}"
            self.model[rack] = [rack not in old] * VMS
            self.runs[rack] = [rack not in old] * VMS
        self.seen: list[str] = []
        self.pending: dict[str, tuple[str, str, list[int]]] = {}  # operation -> (kind, rack, instance ids)

    def _answer(self, method: str, path: str, body: Any) -> fake_arm.Answer:
        self.seen.append(f"{method} {path}")
        m = re.fullmatch(
            rf"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RG}/providers/Microsoft\.Compute/"
            r"virtualMachineScaleSets/([^/]+)/(virtualMachines|reimage|manualupgrade)",
            path,
        )
        if m and m.group(2) == "virtualMachines" and method == "GET":
            rack = m.group(1)
            value = [
                {
                    "name": f"{rack}_{i}",
                    "instanceId": str(i),
                    "id": f"{path}/{i}",
                    "properties": {
                        "osProfile": {"computerName": host},
                        "provisioningState": "Succeeded",
                        "latestModelApplied": self.model[rack][i],
                    },
                }
                for i, host in enumerate(_hosts(rack))
            ]
            return 200, {"value": value}, {}
        if m and method == "POST":
            rack, kind = m.group(1), m.group(2)
            ids = [int(x) for x in body.get("instanceIds", [])] if body else list(range(VMS))
            if kind == "manualupgrade":
                assert ids, "manualupgrade needs instanceIds"
            operation = f"{kind}-{rack}-{len(self.pending)}"
            self.pending[operation] = (kind, rack, ids)
            op = f"https://management.azure.com/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Compute/locations/eastus2/operations/{operation}"
            return 202, None, {"Azure-AsyncOperation": op, "Retry-After": "0"}
        op = re.fullmatch(r".*/operations/([^/]+)", path)
        if op and method == "GET":
            kind, rack, ids = self.pending[op.group(1)]
            if kind == "manualupgrade":
                for i in ids:
                    self.model[rack][i] = True
                return 200, {"status": "Succeeded"}, {}
            how = self.behaviour.get(rack, "ok")
            if how == "azure-fails":
                failed = {"code": "OSProvisioningTimedOut", "message": "OS provisioning did not finish in time."}
                return 200, {"status": "Failed", "error": failed}, {}
            for i in ids:
                self.runs[rack][i] = self.model[rack][i]  # the OS disk is rebuilt from the VM's own model
            self.slurm.clock.sleep(600)  # a reimage takes minutes
            self.slurm.reboot(
                _hosts(rack),
                health_failure="gb300: fabric: CliqueId 0 on GPU 2" if how == "health-fails" else None,
                never=how == "never-back",
            )
            return 200, {"status": "Succeeded"}, {}
        return 404, fake_arm.error(404, path), {}


OLD = {f"ref-train-r{i:04d}" for i in range(1, 7)}  # racks 1 to 6 run an old model after `pulumi up`


@pytest.fixture(scope="module")
def after_up(reference_plan: PlanResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An export of the reference stack taken after `pulumi up`: the state holds the stack's hash everywhere."""
    return _write(tmp_path_factory.mktemp("state"), _export(reference_plan))


def _live(
    state: Path,
    behaviour: dict[str, str],
    extra: Sequence[str] = (),
    job_seconds: float = 0.0,
    adapter: FakeArm | None = None,
) -> tuple[int, SlurmStandIn, FakeArm]:
    clock = Clock()
    slurm = adapter.slurm if adapter else SlurmStandIn(clock, job_seconds=job_seconds)
    if adapter is None:
        for i in range(1, 7):
            for host in _hosts(f"ref-train-r{i:04d}"):
                slurm.nodes[host] = Node({"ALLOCATED"}, boot_time=clock.now() - 86400)
                slurm.jobs[host] = [str(1000 + i)]
        adapter = FakeArm(slurm, behaviour, OLD)
    adapter.behaviour = behaviour
    client_for = rollout.azure_client_factory(
        StaticCredential(), transport=fake_arm.transport(adapter), retry_total=0, polling_interval=0
    )
    args = cli.build_parser().parse_args(
        ["rollout", "--stack", "reference", "--state", str(state), "--poll", "60", "--health-timeout", "1800", *extra]
    )
    code = rollout_cmd.run(
        args, client_for=client_for, slurm_run=slurm.run, sleep=slurm.clock.sleep, now=slurm.clock.now
    )
    return code, slurm, adapter


def _posts(adapter: FakeArm, kind: str) -> list[str]:
    return [s.split("/")[-2] for s in adapter.seen if s.startswith("POST") and s.endswith(f"/{kind}")]


def test_live_rollout_updates_reimages_gates_and_resumes_every_old_rack(
    after_up: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each rack Azure reports behind, in turn: drained, jobs waited for, its VMs brought to the latest model, then
    reimaged, health-gated and resumed; afterwards every VM runs the latest model (not only reports it); exit 0."""
    code, slurm, adapter = _live(after_up, {}, job_seconds=120)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "rollout: 6 rack(s) reimaged and resumed" in out
    rolled = [f"ref-train-r{i:04d}" for i in range(1, 7)]
    assert _posts(adapter, "manualupgrade") == rolled
    assert _posts(adapter, "reimage") == rolled
    # The manual upgrade of a rack comes before its reimage: Azure reimages a VM from its own model.
    for rack in rolled:
        posts = [s for s in adapter.seen if s.startswith("POST") and f"/{rack}/" in s]
        assert [s.rsplit("/", 1)[-1] for s in posts] == ["manualupgrade", "reimage"]
    assert all(all(adapter.runs[r]) for r in adapter.runs)
    first = [c for c in slurm.calls if "ref-train-r0001" in c and c.startswith("scontrol update")]
    assert "state=drain" in first[0]
    assert "reason=gb300-rollout: reimage ref-train-r0001" in first[0]
    assert "state=resume" in first[-1]
    order = [c for c in slurm.calls if c.startswith("scontrol update")]
    assert [("drain" if "drain" in c else "resume") for c in order] == ["drain", "resume"] * 6
    assert all(not n.states & {"DRAIN"} for n in slurm.nodes.values())


def test_live_rollout_in_batches_of_three(after_up: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With --concurrency 3, three racks are drained before any of them is reimaged."""
    code, slurm, _ = _live(after_up, {}, ["--concurrency", "3"])
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
    after_up: Path, capsys: pytest.CaptureFixture[str], how: str, step: str, words: str
) -> None:
    """Rack 3 fails: the rollout exits 1 naming the rack, step and reason; rack 3 stays drained; 4-6 untouched."""
    code, slurm, adapter = _live(after_up, {"ref-train-r0003": how})
    out = capsys.readouterr().out
    assert code == 1
    assert f"rollout stopped: rack ref-train-r0003 (pool train, rack 3) failed at {step}" in out
    assert words in out
    assert "rollout: 2 rack(s) reimaged and resumed" in out
    assert "not started (3): ref-train-r0004, ref-train-r0005, ref-train-r0006" in out
    assert not any("ref-train-r0004" in s for s in adapter.seen if s.startswith("POST"))
    assert all("DRAIN" in slurm.nodes[h].states for h in _hosts("ref-train-r0003"))
    assert all("DRAIN" not in slurm.nodes[h].states for h in _hosts("ref-train-r0002"))


def test_a_resumed_rollout_ends(after_up: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rack 3's reimage fails after its manual upgrade, so Azure now reports it on the latest model while its OS disk
    is old: the failure says to run again with --rack; that run finishes racks 3 to 6, and a third run has nothing
    left to do. Every VM then runs the latest model."""
    code, slurm, adapter = _live(after_up, {"ref-train-r0003": "azure-fails"})
    out = capsys.readouterr().out
    assert code == 1
    assert "run again with --rack ref-train-r0003" in out
    assert all(adapter.model["ref-train-r0003"])
    assert not any(adapter.runs["ref-train-r0003"])
    for host in _hosts("ref-train-r0003"):  # the operator repairs the rack, leaving it drained for the rollout
        slurm.jobs[host] = []

    code, _, adapter = _live(after_up, {}, ["--rack", "ref-train-r0003"], adapter=adapter)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "rollout: 4 rack(s) reimaged and resumed" in out
    assert all(all(adapter.runs[r]) for r in adapter.runs)

    code, _, _ = _live(after_up, {}, adapter=adapter)
    assert code == 0
    assert "nothing to roll out: Azure (live) reports every VM of the 64 deployed rack scale set(s)" in (
        capsys.readouterr().out
    )


def test_live_rollout_stops_when_jobs_outlast_the_timeout(after_up: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Jobs still running at --job-timeout stop the rollout before any model change; the rack stays drained."""
    code, slurm, adapter = _live(after_up, {}, ["--job-timeout", "600"], job_seconds=10_000)
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


def test_state_of_another_stack_is_refused(
    reference_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A state exported from another stack is exit 2 naming both stacks, not a silent 'nothing to roll out'."""
    state = _write(tmp_path, _export(reference_plan))
    assert cli.main(["rollout", "--stack", "dev", "--state", str(state), "--azure", "live", "--dry-run"]) == 2
    assert "is the state of stack reference, not dev" in capsys.readouterr().err


def test_live_rollout_leaves_other_owners_drains(after_up: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A node the remediation loop drained is reimaged with its rack but neither drained over nor resumed."""
    clock = Clock()
    slurm = SlurmStandIn(clock)
    for i in range(1, 7):
        for host in _hosts(f"ref-train-r{i:04d}"):
            slurm.nodes[host] = Node({"IDLE"}, boot_time=clock.now() - 86400)
    held = "ref-train-r0002-000005"
    slurm.nodes[held] = Node({"IDLE", "DRAIN"}, reason="gb300-heal: XID 79", boot_time=clock.now() - 86400)
    code, slurm, adapter = _live(after_up, {}, adapter=FakeArm(slurm, {}, OLD))
    assert code == 0, capsys.readouterr().out
    assert slurm.nodes[held].reason == "gb300-heal: XID 79"
    assert "DRAIN" in slurm.nodes[held].states
    assert "ref-train-r0002" in _posts(adapter, "reimage")  # reimaged with its rack all the same
    updated = [
        host
        for c in slurm.calls
        if c.startswith("scontrol update")
        for host in expand(c.split("nodename=", 1)[1].split(" ", 1)[0])
    ]
    assert len(updated) == 2 * (6 * VMS - 1)  # every other node drained once and resumed once
    assert held not in updated
    assert all("DRAIN" not in n.states for h, n in slurm.nodes.items() if h != held)


def test_live_rollout_names_the_subscription_it_asks(after_up: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before asking Azure, the rollout says which subscription: the racks' own, from their ids in --state."""
    code, _, adapter = _live(after_up, {}, ["--dry-run", "--azure", "live"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[0] == (
        f"gb300 rollout: Azure subscription {SUBSCRIPTION} (from the racks' Azure ids in --state)"
    )
    assert all(f"/subscriptions/{SUBSCRIPTION}/" in seen for seen in adapter.seen)


def test_state_in_another_subscription_than_the_stack_is_refused(
    reference_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stack file whose azure-native:subscriptionId is not where the state's racks are is one line, exit 2, before
    Azure is asked anything."""
    import yaml  # noqa: PLC0415

    from gb300.config import stacks as gb300_stacks  # noqa: PLC0415

    doc = yaml.safe_load(gb300_stacks.stack_file("reference").read_text(encoding="utf-8"))
    doc["config"]["azure-native:subscriptionId"] = "99999999-8888-7777-6666-555555555555"
    stack = tmp_path / "Pulumi.reference.yaml"
    stack.write_text(yaml.safe_dump(doc), encoding="utf-8")
    state = _write(tmp_path, _export(reference_plan))
    code = cli.main(["rollout", "--stack-file", str(stack), "--state", str(state), "--azure", "live", "--dry-run"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE
    assert err.splitlines()[-1].endswith(
        f"config.azure-native:subscriptionId is 99999999-8888-7777-6666-555555555555, but the state's racks are in "
        f"{SUBSCRIPTION}: export the state of this stack's deployment, or fix the stack file"
    )


def test_a_stack_deployed_in_a_real_subscription_is_not_taken_for_stale(
    dev_raw: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dev stack deployed in a real subscription, its state exported with that subscription's names and ids
    throughout, is current for the rollout (planned in the state's subscription): the dry run lists the rack Azure
    reports behind instead of refusing it as not yet applied."""
    records = register("dev", copy.deepcopy(dev_raw), subscription=SUBSCRIPTION)
    entries = [{"urn": r.urn, "type": r.type, "id": r.id, "inputs": r.inputs, "outputs": {}} for r in records]
    doc = {"version": 3, "deployment": {"resources": entries}}
    state = _write(tmp_path, doc)
    answer = _saved_answer(tmp_path / "instances", {"dev-train-r0001": 2}, racks=["dev-train-r0001"])
    argv = ["rollout", "--stack", "dev", "--state", str(state), "--azure", str(answer), "--dry-run"]
    code = cli.main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert _batches(captured.out.replace("dev-train", "ref-train")) == [["ref-train-r0001"]]
