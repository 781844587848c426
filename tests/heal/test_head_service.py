"""The loop on the head, run from the plan's own head payload: ``gb300-heal`` as the timer runs it, as a process,
against stand-in Slurm and systemd commands on PATH (tests/heal/fake_head.py), the instance metadata service, and
Azure Resource Manager over HTTPS (azure-identity's ManagedIdentityCredential and azure-mgmt-compute, unmodified)."""

from __future__ import annotations

import copy
import datetime
import io
import ipaddress
import json
import os
import re
import shlex
import signal
import ssl
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gb300 import config, paths
from gb300 import tags as gb300_tags
from gb300.heal import deploy, fake_arm, head_slurm
from gb300.heal import head as heal_head
from gb300.heal.ports import HealSlurm, decision_record
from gb300.ops import payload_publish
from gb300.plan import PlanResult, run_plan
from gb300.slurm.client import run_local
from gb300.slurm.hostlist import compress
from tests.support import plan_custom_data
from tests.support.standin import hostlist

ROLE_ID = (
    "/subscriptions/00000000-0000-0000-0000-00000000cafe/providers/Microsoft.Authorization/roleDefinitions/"
    "5d5b6a4e-0c39-4f7e-9d53-2f8a3e1c7b10"
)
SUBSCRIPTION = "00000000-0000-0000-0000-00000000cafe"
GROUP = "dev-rg"
CLIENT_ID = "33333333-3333-3333-3333-333333333333"
TOKEN = "heal-standin-token"  # noqa: S105 - a stand-in bearer token
FAKE = Path(__file__).with_name("fake_head.py")
NCCL_OK = paths.REPO_ROOT / "tests" / "fixtures" / "slurm" / "all_reduce_perf.rack-ok.txt"
XID_REASON = "gb300: xid: XID in kernel log: 95@0000:01:00.0 (reboot or report the node)"


@pytest.fixture(scope="module")
def heal_raw(dev_raw: dict[str, Any]) -> dict[str, Any]:
    raw = copy.deepcopy(dev_raw)
    raw["remediation"] = {"enabled": True, "roleDefinitionId": ROLE_ID}
    return raw


@pytest.fixture(scope="module")
def heal_plan(heal_raw: dict[str, Any]) -> PlanResult:
    """The dev stack with the loop on, planned once."""
    return run_plan("dev", copy.deepcopy(heal_raw))


def _payload(plan: PlanResult, raw: dict[str, Any], role: str) -> bytes:
    """A role's payload archive as `gb300 payload publish` renders it from the stack, checked against the
    digest the plan's upload command declares (the bytes the node would fetch)."""
    rendered = {r.name: r for r in payload_publish.render(config.parse(copy.deepcopy(raw)))}
    words = shlex.split(plan_custom_data.publish_command(plan))
    expect = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--expect")
    name = plan_custom_data.payload_env(plan, role)["GB300_PAYLOAD_NAME"]
    assert expect[name] == rendered[name].payload.sha256
    return rendered[name].payload.archive


def _extract(archive: bytes, root: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(root, filter="data")


@dataclass
class Arm:
    """What the stand-in Azure answers: IMDS (tags, compute, token) and ARM (list a rack's VMs, restart...).

    A server on a socket, not :mod:`gb300.heal.fake_arm`'s in-process transport (which the simulator and the rollout
    tests share): here the head runs as its own process, as its timer starts it, with the unmodified Azure SDK and
    azure-identity, so IMDS and ARM must be reached over HTTP(S). Like that transport it cannot show Azure's real
    throttling, long-running operation records or Entra sign-in."""

    state: Path
    racks: dict[str, list[str]]
    requests: list[str] = field(default_factory=list)
    authorized: list[bool] = field(default_factory=list)
    crash_after: str | None = None  # a path suffix: the tick process is killed right after this call is answered
    victim: int | None = None  # that process's pid
    operations: dict[str, float] = field(default_factory=dict)  # instance -> when its last operation started

    def after(self, path: str) -> None:
        """Runs once the answer is on the wire: the head dies there, before it can save (SIGKILL, no clean-up)."""
        if self.crash_after and path.split("?", 1)[0].endswith(self.crash_after) and self.victim:
            self.crash_after = None
            os.kill(self.victim, signal.SIGKILL)

    def imds(self, path: str) -> tuple[int, Any]:
        if path.startswith("/metadata/instance/compute"):
            tags = [{"name": "gb300-heal-client-id", "value": CLIENT_ID}]
            return 200, {"subscriptionId": SUBSCRIPTION, "resourceGroupName": GROUP, "tagsList": tags}
        if path.startswith("/metadata/identity/oauth2/token") and f"client_id={CLIENT_ID}" in path:
            return 200, {
                "access_token": TOKEN,
                "expires_in": "3600",
                "expires_on": str(int(datetime.datetime.now(datetime.UTC).timestamp()) + 3600),
                "resource": "https://management.azure.com",
                "token_type": "Bearer",
            }
        return 404, {"error": path}

    def arm(self, method: str, path: str, auth: str) -> tuple[int, Any]:
        """ARM's answers in the shapes of the simulator's fake ARM (gb300.heal.fake_arm), over real HTTPS."""
        self.requests.append(f"{method} {path.split('?', maxsplit=1)[0]}")
        self.authorized.append(auth == f"Bearer {TOKEN}")
        call = fake_arm.route(method, path)
        if call.scale_set is None or call.scale_set not in self.racks:
            return 404, fake_arm.error(404, path)
        hosts = self.racks[call.scale_set]
        if call.call == "list" and call.instance is None:
            return 200, fake_arm.vm_list(path, hosts, lambda i: f"00000000-0000-0000-0000-{i:012d}")
        assert call.instance is not None
        if call.action == "instanceView":
            return 200, fake_arm.instance_view(False, self.operations.get(call.instance, 0.0))
        if call.call in ("restart", "reimage"):
            self.operations[call.instance] = datetime.datetime.now(datetime.UTC).timestamp()
            doc = json.loads(self.state.read_text())
            node = doc["nodes"][hosts[int(call.instance)]]
            node["boot_time"] = int(datetime.datetime.now(datetime.UTC).timestamp()) + 5  # it boots again
            self.state.write_text(json.dumps(doc, indent=1))
            return 202, None
        return 404, fake_arm.error(404, path)


def _certificate(base: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (the stand-in ARM endpoint); requests trusts it through
    REQUESTS_CA_BUNDLE."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = base / "arm.pem", base / "arm.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def _serve(answer: Any, tls: ssl.SSLContext | None, after: Any = lambda _path: None) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            status, body = answer(self.command, self.path, self.headers)
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            after(self.path)

        do_GET = do_POST = _reply  # noqa: N815 - http.server's names

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    scheme = "https" if tls is not None else "http"
    return server, f"{scheme}://127.0.0.1:{server.server_address[1]}"


@dataclass
class Head:
    """The head's disk (the payload laid out under ``root``), its stand-ins, and how to run its tools."""

    root: Path
    state: Path
    env: dict[str, str]
    arm: Arm
    hosts: list[str]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        tool = self.root / "usr/local/sbin/gb300-heal"
        return subprocess.run(
            [str(tool), *args], env=self.env, capture_output=True, text=True, check=False, timeout=120
        )

    def start(self, *args: str) -> subprocess.Popen[str]:
        """``gb300-heal`` as a process this test can watch (and the stand-in ARM can kill)."""
        tool = self.root / "usr/local/sbin/gb300-heal"
        return subprocess.Popen(
            [str(tool), *args], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def slurm(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.state.read_text())
        return doc

    def set_node(self, host: str, **values: Any) -> None:
        doc = self.slurm()
        doc["nodes"][host].update(values)
        self.state.write_text(json.dumps(doc, indent=1))

    def decisions(self) -> list[dict[str, Any]]:
        log = self.root / "var/log/gb300/health/remediation.log"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def head(heal_plan: PlanResult, heal_raw: dict[str, Any], tmp_path: Path) -> Iterator[Head]:
    """The dev stack's head: its payload extracted under a scratch root, one rack of 18 idle nodes in Slurm."""
    root = tmp_path / "root"
    _extract(_payload(heal_plan, heal_raw, gb300_tags.ROLE_HEAD), root)
    config = json.loads((root / "etc/gb300/heal.json").read_text())
    [rack] = config["racks"]
    hosts = [f"{rack}-{i:06d}" for i in range(1, 19)]
    nodes = {
        h: {"state": ["IDLE"], "reason": "", "boot_time": 1000, "extra": f"gb300-nvlink:c0ffee:{7}"} for h in hosts
    }
    state = tmp_path / "slurm.json"
    state.write_text(json.dumps({"nodes": nodes, "jobs": {}}, indent=1))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for cmd in ("scontrol", "squeue", "systemd-run", "systemctl"):
        wrapper = bin_dir / cmd
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "{cmd}" "$@"\n')
        wrapper.chmod(0o755)
    arm = Arm(state, {rack: hosts})
    cert, key = _certificate(tmp_path)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    imds_server, imds_url = _serve(lambda m, p, h: arm.imds(p), None)
    arm_server, arm_url = _serve(lambda m, p, h: arm.arm(m, p, h.get("Authorization", "")), tls, arm.after)
    # Azure's public endpoint becomes the stand-in's: the one value of heal.json the test changes.
    config["armEndpoint"] = arm_url
    (root / "etc/gb300/heal.json").write_text(json.dumps(config))
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "GB300_ROOT": str(root),
        "GB300_HEAL_PYTHON": sys.executable,  # the project's venv holds the same packages as data/heal-python.yaml
        "AZURE_POD_IDENTITY_AUTHORITY_HOST": imds_url,
        "REQUESTS_CA_BUNDLE": str(cert),
        "FAKE_HEAD_STATE": str(state),
        "FAKE_NCCL_OUTPUT": str(NCCL_OK),
        "HOME": str(tmp_path),
        "USER": "operator",
    }
    try:
        yield Head(root, state, env, arm, hosts)
    finally:
        imds_server.shutdown()
        arm_server.shutdown()


def test_a_node_the_gate_drained_for_an_xid_is_drained_rebooted_revalidated_and_returned(head: Head) -> None:
    """A node the health gate drained for XID 95 (uncontained error): the first tick drains it with the loop's reason
    and restarts its VM through ARM as the remediation identity; the next ticks, each a new process reading the
    saved state, see it back, run the rack's NCCL check inside a maintenance reservation, and return it to service."""
    sick = head.hosts[4]
    head.set_node(sick, state=["IDLE", "DRAIN"], reason=XID_REASON)

    first = head.run("tick")
    assert first.returncode == 0, first.stderr
    node = head.slurm()["nodes"][sick]
    assert node["reason"].startswith("gb300-heal: XID 95")
    rack = next(iter(head.arm.racks))
    restart = (
        f"POST /subscriptions/{SUBSCRIPTION}/resourceGroups/{GROUP}/providers/Microsoft.Compute/"
        f"virtualMachineScaleSets/{rack}/virtualMachines/4/restart"
    )
    assert restart in head.arm.requests
    assert all(head.arm.authorized)  # every ARM call carried the managed identity's token
    assert [d["Decision"] for d in head.decisions() if d["Node"] == sick][:3] == ["suspect", "drain", "reboot"]
    saved = json.loads((head.root / "var/lib/gb300/heal/state.json").read_text())
    assert [(c["node"], c["state"], c["actions"]) for c in saved["cases"]] == [(sick, "acting", ["drain", "reboot"])]
    assert (head.root / "var/lib/gb300/heal/state.json").stat().st_mode & 0o777 == 0o600

    for _ in range(2):
        again = head.run("tick")
        assert again.returncode == 0, again.stderr
    node = head.slurm()["nodes"][sick]
    assert "DRAIN" not in node["state"]
    assert node["reason"] == ""
    calls = head.slurm()["calls"]
    [create] = [c for c in calls if c[:3] == ["scontrol", "create", "reservation"]]
    assert "flags=maint,ignore_jobs" in create
    assert head.slurm().get("reservations") == {}  # deleted after the run
    [srun] = [c for c in calls if c[0] == "systemd-run"]
    assert "--mpi=pmix" in srun
    assert sick in _expand_nodelist(next(a for a in srun if a.startswith("--nodelist=")))
    decisions = [d["Decision"] for d in head.decisions() if d["Node"] == sick]
    assert decisions[-3:] == ["recheck", "revalidate", "returned"]
    assert (
        sum(1 for r in head.arm.requests if r.endswith("/virtualMachines") and r.startswith("GET")) == 1
    )  # listed once


def test_a_head_killed_right_after_its_restart_call_does_not_restart_again(head: Head) -> None:
    """The tick process is killed (SIGKILL) the moment ARM has answered its restart, before it saves. The loop had
    saved its intent before the call; the next tick, a new process, reads it, asks the VM's instance view and
    Slurm, sees the restart went through, and does not send a second restart."""
    sick = head.hosts[4]
    head.set_node(sick, state=["IDLE", "DRAIN"], reason=XID_REASON)
    head.arm.crash_after = "/virtualMachines/4/restart"
    process = head.start("tick")
    head.arm.victim = process.pid
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == -signal.SIGKILL, stderr
    saved = json.loads((head.root / "var/lib/gb300/heal/state.json").read_text())
    [case] = saved["cases"]
    assert case["intent"]["call"] == "reboot"  # saved before the call
    assert case["actions"] == ["drain"]

    again = head.run("tick")
    assert again.returncode == 0, again.stderr
    restarts = [r for r in head.arm.requests if r.endswith("/virtualMachines/4/restart")]
    assert len(restarts) == 1
    assert [r for r in head.arm.requests if r.endswith("/virtualMachines/4/instanceView")]
    saved = json.loads((head.root / "var/lib/gb300/heal/state.json").read_text())
    [case] = saved["cases"]
    assert case.get("intent") is None  # a field at its default is left out of the state
    assert case["actions"][:2] == ["drain", "reboot"]
    assert "reconcile" in [d["Decision"] for d in head.decisions() if d["Node"] == sick]


def _expand_nodelist(arg: str) -> list[str]:
    return hostlist(arg.split("=", 1)[1])  # the stand-ins' own hostlist reader


def test_a_halted_loop_says_why_and_a_person_resumes_it(head: Head) -> None:
    """Seven of 18 nodes drained by the gate at once is more than the halt rail allows: the loop halts without
    draining or calling Azure; `gb300-heal status` says why and how to resume; `gb300-heal resume --reason`
    records who and why, and the next tick repairs again inside the rails."""
    for host in head.hosts[:7]:
        head.set_node(host, state=["IDLE", "DRAIN"], reason=XID_REASON)
    assert head.run("tick").returncode == 0
    assert not [r for r in head.arm.requests if r.startswith("POST")]
    assert not any(n["reason"].startswith("gb300-heal:") for n in head.slurm()["nodes"].values())

    status = head.run("status")
    assert status.returncode == 0, status.stderr
    assert "HALTED since" in status.stdout
    assert "7 of 18 nodes showed fault evidence" in status.stdout
    assert "gb300-heal resume --reason" in status.stdout

    refused = head.run("resume")
    assert refused.returncode == 2  # --reason is required
    resumed = head.run("resume", "--reason", "driver rollout rolled back")
    assert resumed.returncode == 0, resumed.stderr
    assert "running" in resumed.stdout
    assert "by operator: driver rollout rolled back" in resumed.stdout
    assert head.decisions()[-1]["Decision"] == "resume"

    assert head.run("tick").returncode == 0
    drained = [h for h, n in head.slurm()["nodes"].items() if n["reason"].startswith("gb300-heal:")]
    assert len(drained) == 2  # maxNodesPerRack: two of the rack under repair at once, the others queued
    assert "running" in head.run("status").stdout


def test_the_payload_code_imports_only_the_standard_library_and_the_pinned_packages(head: Head) -> None:
    """The loop's modules in the head payload import nothing but the standard library, themselves and the
    projects of data/heal-python.yaml (no pulumi, pydantic or PyYAML on the head)."""
    pinned = {p["name"] for p in yaml.safe_load((paths.DATA_DIR / "heal-python.yaml").read_text())["packages"]}
    allowed = {
        "azure", "msal", "msal_extensions", "requests", "urllib3", "certifi", "idna", "charset_normalizer",
        "typing_extensions", "isodate", "jwt", "cryptography", "cffi", "_cffi_backend", "pycparser", "gb300",
    }  # fmt: skip
    assert {"azure-core", "azure-identity", "azure-mgmt-compute", "msal", "PyJWT", "cryptography"} <= pinned
    guard = (
        "import sys\n"
        f"allowed = {sorted(allowed)!r}\n"
        "class Guard:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        top = name.split('.')[0]\n"
        "        if top not in sys.stdlib_module_names and top not in allowed:\n"
        "            raise ImportError(f'{name} is not available on the head')\n"
        "sys.meta_path.insert(0, Guard())\n"
        f"sys.path.insert(0, {str(head.root / 'opt/gb300/heal/python')!r})\n"
        "import gb300.heal.head, azure.identity, azure.mgmt.compute\n"
        "from gb300.heal.nccl import nccl_eval\n"
        "print(gb300.heal.head.__file__, nccl_eval().__file__)\n"
    )
    done = subprocess.run([sys.executable, "-I", "-c", guard], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        str(head.root / "opt/gb300/heal/python/gb300/heal/head.py"),
        str(head.root / "opt/gb300/heal/examples/nccl-eval.py"),
    ]


def test_requirements_pin_every_file_by_hash(heal_plan: PlanResult) -> None:
    """The head's requirements.txt pins each project of data/heal-python.yaml to one version and lists a sha256
    for every file, so pip --require-hashes installs nothing the payload does not name."""
    raw = yaml.safe_load((paths.DATA_DIR / "heal-python.yaml").read_text())
    lines = [x for x in deploy.requirements_text().splitlines() if not x.startswith("#")]
    assert len(lines) == len(raw["packages"])
    for line, package in zip(lines, raw["packages"], strict=True):
        assert line.startswith(f"{package['name']}=={package['version']} ")
        hashes_here = re.findall(r"--hash=sha256:([0-9a-f]{64})", line)
        assert hashes_here == [f["sha256"] for f in package["files"]]
        assert hashes_here
    binary = [p for p in raw["packages"] if any("manylinux" in f["file"] for f in p["files"])]
    for package in binary:  # the head may be x64 or arm64 (data/skus.yaml): both wheels are pinned
        assert any("x86_64" in f["file"] for f in package["files"]), package["name"]
        assert any("aarch64" in f["file"] for f in package["files"]), package["name"]


def test_the_plan_grants_the_operators_role_to_the_heads_own_identity_only(
    heal_plan: PlanResult, dev_plan: PlanResult
) -> None:
    """With the loop on, the plan declares an identity of its own for the head, attached to the head VM only, with
    one role assignment: gb300:remediation.roleDefinitionId on the cluster's resource group; the node identity the
    GPU nodes run as gets nothing new. With the loop off (dev as shipped) none of it exists."""
    assignments = [r for r in heal_plan.resources if r.type == "azure-native:authorization:RoleAssignment"]
    [grant] = [r for r in assignments if r.inputs["roleDefinitionId"] == ROLE_ID]
    [group] = [r for r in heal_plan.resources if r.type == "azure-native:resources:ResourceGroup"]
    assert grant.inputs["scope"].endswith(f"/resourceGroups/{group.inputs['resourceGroupName']}")
    assert grant.inputs["scope"].count("/") == 4  # the group itself, not a resource in it
    assert grant.inputs["principalType"] == "ServicePrincipal"
    others = {r.inputs["principalId"] for r in assignments if r is not grant}
    assert grant.inputs["principalId"] not in others  # not the node identity (which holds the other grants)

    identities = {r.name: r for r in heal_plan.resources if r.type.endswith("managedidentity:UserAssignedIdentity")}
    assert set(identities) == {"dev-node-id", "dev-heal-id"}
    vms = [r for r in heal_plan.resources if r.type == "azure-native:compute:VirtualMachine"]
    [vm] = vms
    attached = vm.inputs["identity"]["userAssignedIdentities"]
    assert [a.rsplit("/", 1)[1] for a in attached] == ["dev-node-id", "dev-heal-id"]
    assert re.fullmatch(r"[0-9a-f-]{36}", vm.inputs["tags"]["gb300-heal-client-id"])
    scale_sets = [r for r in heal_plan.resources if "VirtualMachineScaleSet" in r.type]
    assert scale_sets
    assert all("dev-heal-id" not in json.dumps(r.inputs.get("identity")) for r in scale_sets)

    assert not [r for r in dev_plan.resources if r.name.startswith("dev-heal")]
    [plain] = [r for r in dev_plan.resources if r.type == "azure-native:compute:VirtualMachine"]
    assert len(plain.inputs["identity"]["userAssignedIdentities"]) == 1
    assert "gb300-heal-client-id" not in plain.inputs["tags"]


def test_a_node_whose_gate_still_fails_after_the_reboot_climbs_to_reimage(
    head: Head, heal_plan: PlanResult, heal_raw: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPU node's gb300-heal-publish (from its own payload) puts the gate's failing boot verdict, and the
    physical host its KVP pool names, in its Slurm record after the reboot; the head reads the host (for a Guest
    Health Report) and on its next tick rechecks with the verdict, records the failure and reimages the VM."""
    sick = head.hosts[2]
    head.set_node(sick, state=["IDLE", "DRAIN"], reason=XID_REASON)
    assert head.run("tick").returncode == 0
    gpu = tmp_path / "gpu-root"
    _extract(_payload(heal_plan, heal_raw, gb300_tags.ROLE_GPU_NODE), gpu)
    (gpu / "var/lib/gb300/health").mkdir(parents=True, exist_ok=True)
    (gpu / "var/lib/gb300/health/boot.result").write_text("fail: xid: XID in kernel log: 95@0000:01:00.0\n")
    kvp = gpu / "var/lib/hyperv/.kvp_pool_3"  # Hyper-V KVP records: 512-byte key, 2048-byte value
    kvp.parent.mkdir(parents=True)
    kvp.write_bytes(
        b"VirtualMachineName".ljust(512, b"\0")
        + b"vm".ljust(2048, b"\0")
        + b"PhysicalHostName".ljust(512, b"\0")
        + b"GBHOST-0042".ljust(2048, b"\0")
    )
    env = {**head.env, "GB300_ROOT": str(gpu), "GB300_NODENAME": sick}
    tool = gpu / "usr/local/sbin/gb300-heal-publish"
    published = subprocess.run([str(tool)], env=env, capture_output=True, text=True, check=False, timeout=60)
    assert published.returncode == 0, published.stderr
    assert head.slurm()["nodes"][sick]["comment"] == (
        "gb300-gate: fail: xid: XID in kernel log: 95@0000:01:00.0 | gb300-host: GBHOST-0042"
    )
    for key, value in head.env.items():
        monkeypatch.setenv(key, value)
    view = head_slurm.SlurmView(HealSlurm(run=run_local), run_local)
    assert head_slurm.SlurmProbe(view).physical_host(sick) == "GBHOST-0042"

    assert head.run("tick").returncode == 0, head.run("status").stdout
    mine = [d for d in head.decisions() if d["Node"] == sick]
    [recheck] = [d for d in mine if d["Decision"] == "recheck"]
    assert recheck["Reason"] == "fail: xid: XID in kernel log: 95@0000:01:00.0"
    assert mine[-1]["Decision"] == "reimage"
    assert head.arm.requests[-1].endswith("/virtualMachines/2/reimage")
    assert "DRAIN" in head.slurm()["nodes"][sick]["state"]


def _tick_at(head: Head, now: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """One tick of the head's loop at ``now``, in this process with the head's environment (its stand-in scontrol,
    IMDS and ARM)."""
    for key, value in head.env.items():
        monkeypatch.setenv(key, value)
    heal_head.tick(now)


def _jobs(head: Head, *jobs: dict[str, Any]) -> None:
    doc = head.slurm()
    doc["slurm_jobs"] = list(jobs)
    head.state.write_text(json.dumps(doc, indent=1))


def test_a_hard_xid_on_many_nodes_of_one_job_is_each_nodes(head: Head, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three nodes the gate drained for XID 95 right after one job failed on them: the same-job rule is only for
    NVIDIA's teardown artifacts, so each is a node fault; the loop suspects all three at once and drains two
    (maxNodesPerRack) without waiting for the job's peers."""
    now = time.time()
    crashed = head.hosts[:3]
    _jobs(head, {"id": 777, "nodes": compress(crashed), "state": "FAILED", "start": now - 7200, "end": now - 30})
    for host in crashed:
        head.set_node(host, state=["IDLE", "DRAIN"], reason=XID_REASON)

    _tick_at(head, now, monkeypatch)
    suspects = {d["Node"] for d in head.decisions() if d["Decision"] == "suspect"}
    assert suspects == set(crashed)
    assert not [d for d in head.decisions() if "nodes of job" in d["Reason"]]
    assert len([d for d in head.decisions() if d["Decision"] == "drain"]) == 2


def test_an_xid_on_one_node_of_a_running_job_is_the_nodes(head: Head, monkeypatch: pytest.MonkeyPatch) -> None:
    """XID 95 on one node of a four-node job that still runs: the loop drains that node and restarts its VM on
    the same tick."""
    now = time.time()
    _jobs(
        head, {"id": 779, "nodes": compress(head.hosts[:4]), "state": "RUNNING", "start": now - 60, "end": now + 7200}
    )
    sick = head.hosts[2]
    head.set_node(sick, state=["MIXED", "DRAIN"], reason=XID_REASON)

    _tick_at(head, now, monkeypatch)
    [suspect] = [d for d in head.decisions() if d["Decision"] == "suspect"]
    assert suspect["Node"] == sick
    assert head.slurm()["nodes"][sick]["reason"].startswith("gb300-heal: XID 95")


@pytest.mark.parametrize(("ended_ago", "why"), [(20, "teardown"), (3600, "catalog")], ids=["at-teardown", "mid-job"])
def test_a_teardown_xid_drain_is_never_the_nodes(
    head: Head, monkeypatch: pytest.MonkeyPatch, ended_ago: float, why: str
) -> None:
    """A gate drain for XID 45 (from a node whose gate could not apply the rule itself): right after its job ended
    it is teardown; an hour later it is still what NVIDIA's catalog calls the application's (WORKFLOW_XID_45). The
    loop ignores both and leaves the gate's drain alone."""
    now = time.time()
    host = head.hosts[5]
    _jobs(head, {"id": 780, "nodes": host, "state": "COMPLETED", "start": now - 9000, "end": now - ended_ago})
    head.set_node(
        host,
        state=["IDLE", "DRAIN"],
        reason="gb300: xid: XID in kernel log: 45@0000:01:00.0 (reboot or report the node)",
    )
    _tick_at(head, now, monkeypatch)
    [ignore] = [d for d in head.decisions() if d["Node"] == host]
    assert ignore["Decision"] == "ignore"
    assert why in ignore["Reason"]
    assert not head.slurm()["nodes"][host]["reason"].startswith("gb300-heal:")


def test_the_timer_ticks_at_the_policys_poll_interval(
    heal_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head's timer starts the next tick service.pollSeconds after the last one, the period heal.json gives the
    loop: a changed pollSeconds reaches both."""
    real = deploy.data

    def slower(name: str) -> Any:
        doc = copy.deepcopy(real(name))
        if name == "remediation.yaml":
            doc["service"]["pollSeconds"] = int(doc["service"]["pollSeconds"]) * 2
        return doc

    monkeypatch.setattr(deploy, "data", slower)
    poll = slower("remediation.yaml")["service"]["pollSeconds"]
    files = {f.path: f.content for f in deploy.head_files(config.parse(copy.deepcopy(heal_raw)))}
    timer = next(text for path, text in files.items() if path.endswith("/gb300-heal.timer"))
    assert re.findall(r"(?m)^OnUnitInactiveSec=(.*)$", timer) == [f"{poll}s"]
    assert json.loads(files["/etc/gb300/heal.json"])["pollSeconds"] == poll


def test_one_malformed_record_is_skipped_and_the_tick_goes_on(head: Head) -> None:
    """Root on a node can write its own drain reason: a 5,000-digit "XID" (which int() refuses) on one node must
    not stop the tick for the fleet. That record is ignored and logged; the real XID on another node is repaired."""
    bad, sick = head.hosts[1], head.hosts[6]
    head.set_node(bad, state=["IDLE", "DRAIN"], reason=f"gb300: xid: XID in kernel log: {'5' * 5000}@0000:01:00.0")
    head.set_node(sick, state=["IDLE", "DRAIN"], reason=XID_REASON)
    tick = head.run("tick")
    assert tick.returncode == 0, tick.stderr
    [ignored] = [d for d in head.decisions() if d["Node"] == bad]
    assert ignored["Decision"] == "ignore"
    assert "not a code" in ignored["Reason"]
    assert len(json.dumps(ignored)) < 2000  # the 5,000 digits never reach the log
    assert head.slurm()["nodes"][sick]["reason"].startswith("gb300-heal: XID 95")


def test_a_hostile_host_name_never_reaches_azure_or_the_log(head: Head, monkeypatch: pytest.MonkeyPatch) -> None:
    """A node's comment naming a 612-character "physical host" with a bidi override: the head reads no host from
    it (a Guest Health Report would be skipped), and a decision record escapes control and bidi characters."""
    sick = head.hosts[3]
    hostile = "\u202e" + "A" * 611
    head.set_node(sick, comment=f"gb300-gate: fail: gpus: 3 GPUs | gb300-host: {hostile}")
    for key, value in head.env.items():
        monkeypatch.setenv(key, value)
    view = head_slurm.SlurmView(HealSlurm(run=run_local), run_local)
    assert head_slurm.SlurmProbe(view).physical_host(sick) is None
    head.set_node(sick, comment="gb300-gate: fail: gpus: 3 GPUs | gb300-host: GBHOST-0007")
    assert head_slurm.SlurmProbe(head_slurm.SlurmView(HealSlurm(run=run_local), run_local)).physical_host(sick) == (
        "GBHOST-0007"
    )
    record = decision_record(now=0, cluster="c", decision="recheck", reason=f"fail: gpus: {hostile}")
    assert "\u202e" not in record["Reason"]
    assert "\\u202e" in record["Reason"]
    assert len(record["Reason"]) <= 500
