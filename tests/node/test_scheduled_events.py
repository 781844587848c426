"""A node drains itself before Azure maintenance: gb300-scheduled-events against a fake IMDS (a real HTTP server
answering Azure's Scheduled Events API, read by the real curl) and a stand-in Slurm controller."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from gb300 import tags as gb300_tags
from tests.cloud_init.slurm.conftest import _STANDIN, STANDINS, Sandbox

VM = "gb300ref-train-r000_3"
NODE = "gb300ref-train-r000000003"
EVENTS_PATH = "/metadata/scheduledevents?api-version=2020-07-01"
NAME_PATH = "/metadata/instance/compute/name?api-version=2021-02-01&format=text"

# A stand-in slurmctld for one node: state and reason in files, jobs in out/squeue.
_SCONTROL = r"""#!/usr/bin/env bash
printf 'scontrol %s\n' "$*" >>"$SANDBOX/calls.log"
if [ "$1" = show ]; then
  printf 'NodeName=%s State=%s Reason=%s\n' "$3" "$(cat "$SANDBOX/state")" "$(cat "$SANDBOX/reason")"
  exit 0
fi
case "$*" in
  *state=drain*)
    all="$*"
    reason=${all#*reason=}
    printf '%s\n' "$reason" >"$SANDBOX/reason"
    state=IDLE+DRAIN
    [ ! -s "$SANDBOX/out/squeue" ] || state=MIXED+DRAIN
    echo "$state" >"$SANDBOX/state" ;;
  *state=resume*) echo IDLE >"$SANDBOX/state"; : >"$SANDBOX/reason" ;;
esac
"""


@dataclass
class FakeImds:
    """Azure's IMDS as far as Scheduled Events go: the events it lists and the acknowledgements it received."""

    events: list[dict[str, Any]] = field(default_factory=list)
    incarnation: int = 1
    acks: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def imds() -> Iterator[FakeImds]:
    fake = FakeImds()

    class Handler(BaseHTTPRequestHandler):
        def _reply(self, body: bytes, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.headers.get("Metadata") != "true":
                self.send_error(400, "Metadata header required")
            elif self.path == EVENTS_PATH:
                doc = {"DocumentIncarnation": fake.incarnation, "Events": fake.events}
                self._reply(json.dumps(doc).encode(), "application/json")
            elif self.path == NAME_PATH:
                self._reply(VM.encode(), "text/plain")
            else:
                self.send_error(404)

        def do_POST(self) -> None:
            if self.path != EVENTS_PATH or self.headers.get("Metadata") != "true":
                self.send_error(400)
                return
            fake.acks.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self._reply(b"", "text/plain")

        def log_message(self, *args: object) -> None:
            del args

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield fake
    server.shutdown()


@pytest.fixture
def node(tmp_path: Path) -> Sandbox:
    """A GPU node's Slurm view: one node, running one job, the real curl and python3 on PATH."""
    for sub in ("bin", "out", "rc", "units", "root"):
        (tmp_path / sub).mkdir()
    for name in STANDINS:
        if name == "curl":
            continue
        (tmp_path / "bin" / name).write_text(_STANDIN)
        (tmp_path / "bin" / name).chmod(0o755)
    box = Sandbox(tmp_path)
    box.replace("scontrol", _SCONTROL.removeprefix("#!/usr/bin/env bash\n"))
    box.replace("squeue", 'cat "$SANDBOX/out/squeue"\n')
    (tmp_path / "state").write_text("ALLOCATED\n")
    (tmp_path / "reason").write_text("")
    (tmp_path / "out" / "squeue").write_text("4242\n")
    if shutil.which("curl") is None:
        pytest.fail("curl is not installed (scripts/ensure-test-tools installs it)")
    return box


def _event(kind: str, vm: str = VM, status: str = "Scheduled") -> dict[str, Any]:
    return {
        "EventId": f"EVT-{kind}",
        "EventStatus": status,
        "EventType": kind,
        "ResourceType": "VirtualMachine",
        "Resources": [vm],
        "NotBefore": "Mon, 07 Dec 2026 10:00:00 GMT",
        "Description": "",
        "EventSource": "Platform",
        "DurationInSeconds": -1,
    }


def _pass(node: Sandbox, imds: FakeImds) -> None:
    env = {"GB300_IMDS_URL": imds.url, "GB300_NODENAME": NODE, "GB300_SCHEDULED_EVENTS_INTERVAL": "0"}
    result = node.run("gb300-scheduled-events", env=env)
    assert result.returncode == 0, result.stderr


def _slurm(node: Sandbox) -> tuple[str, str]:
    return (node.path / "state").read_text().strip(), (node.path / "reason").read_text().strip()


@pytest.mark.parametrize("kind", ["Reboot", "Redeploy", "Freeze", "Preempt", "Terminate"])
def test_a_scheduled_event_drains_acknowledges_once_idle_and_resumes(node: Sandbox, imds: FakeImds, kind: str) -> None:
    """Azure schedules `kind` for this VM: the node drains at once, acknowledges only when its job has ended
    (once), and is resumed when Azure no longer lists the event."""
    imds.events = [_event(kind)]
    _pass(node, imds)
    state, reason = _slurm(node)
    assert "DRAIN" in state
    assert reason.startswith(f"gb300-maintenance: {kind} EVT-{kind} ")
    assert imds.acks == []  # a job still runs there
    (node.path / "out" / "squeue").write_text("")
    (node.path / "state").write_text("IDLE+DRAIN\n")
    _pass(node, imds)
    _pass(node, imds)
    assert imds.acks == [{"StartRequests": [{"EventId": f"EVT-{kind}"}]}]
    imds.events = []  # the VM came back; Azure lists the event no more
    _pass(node, imds)
    assert _slurm(node) == ("IDLE", "")


def test_another_vms_event_or_an_idle_list_changes_nothing(node: Sandbox, imds: FakeImds) -> None:
    """An event for another VM of the scale set neither drains nor acknowledges anything here."""
    imds.events = [_event("Reboot", vm="gb300ref-train-r000_4")]
    _pass(node, imds)
    assert _slurm(node) == ("ALLOCATED", "")
    assert imds.acks == []
    assert not [c for c in node.calls("scontrol") if c.startswith("update")]


@pytest.mark.parametrize(
    "other",
    ["gb300: gpu: 3 of 4 GPUs visible", "gb300-rollout: reimage r000", "admin: replacing a cable"],
    ids=["health-gate", "rollout", "admin"],
)
def test_a_drain_by_someone_else_is_never_reasoned_over_or_resumed(node: Sandbox, imds: FakeImds, other: str) -> None:
    """A node the health gate, a rollout or an admin drained keeps that reason through the event, is still
    acknowledged once idle, and stays drained after the event."""
    (node.path / "state").write_text("IDLE+DRAIN\n")
    (node.path / "reason").write_text(other + "\n")
    (node.path / "out" / "squeue").write_text("")
    imds.events = [_event("Redeploy")]
    _pass(node, imds)
    assert _slurm(node) == ("IDLE+DRAIN", other)
    assert imds.acks == [{"StartRequests": [{"EventId": "EVT-Redeploy"}]}]
    imds.events = []
    _pass(node, imds)
    assert _slurm(node) == ("IDLE+DRAIN", other)


def test_a_started_event_is_not_acknowledged_again(node: Sandbox, imds: FakeImds) -> None:
    """An event Azure already started keeps the node drained and is not acknowledged (nothing left to allow)."""
    (node.path / "out" / "squeue").write_text("")
    (node.path / "state").write_text("IDLE\n")
    imds.events = [_event("Freeze", status="Started")]
    _pass(node, imds)
    assert "DRAIN" in _slurm(node)[0]
    assert imds.acks == []


def test_every_gpu_scale_set_opts_in_to_the_notifications(dev_plan: Any) -> None:
    """Each rack's scale set asks Azure for Terminate and OS image events with the longest notice Azure allows
    (data/platform.yaml), and each GPU node runs the watcher as a service."""
    from gb300.facts import catalog  # noqa: PLC0415
    from gb300.node import custom_data as nodes  # noqa: PLC0415

    limits = catalog.load()
    want = {
        "terminateNotificationProfile": {
            "enable": True,
            "notBeforeTimeout": limits.limit("terminateNotificationTimeout"),
        },
        "osImageNotificationProfile": {"enable": True, "notBeforeTimeout": limits.limit("osImageNotificationTimeout")},
    }
    sets = [r for r in dev_plan.resources if r.type.endswith(":compute:VirtualMachineScaleSet")]
    assert sets
    for record in sets:
        assert record.inputs["virtualMachineProfile"]["scheduledEventsProfile"] == want
    gpu = nodes.render(gb300_tags.ROLE_GPU_NODE, dev_plan.config, dev_plan.config.gpu_pools[0])
    paths = {f["path"] for f in yaml.safe_load(gpu.payload.cloud_config)["write_files"]}
    assert {"/usr/local/sbin/gb300-scheduled-events", "/opt/gb300/systemd/gb300-scheduled-events.service"} <= paths
