"""The simulated fleet of ``gb300 heal simulate`` (:mod:`gb300.heal.sim`): nodes, jobs and faults, answering the loop's
channels from the scenario's ``truth``, which the loop never sees.

:class:`World` answers Slurm command lines (:meth:`World.slurm`, the JSON of ``scontrol --json show node`` that
:func:`gb300.slurm.client.parse_nodes` reads on the head too), Azure Resource Manager requests (:meth:`World.arm`,
behind :mod:`gb300.heal.fake_arm`), gate results in the gate's own ``boot.result`` format (the failed checks from
:mod:`gb300.heal.gate_checks`, the table the head reads drain reasons with), KVP pool bytes, nccl-tests output taken
from the repository's fixtures, and fabric identity lines.
"""

from __future__ import annotations

import bisect
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gb300 import paths
from gb300.facts import slurm_releases
from gb300.facts.loader import data
from gb300.heal import fake_arm, gate_checks, platform
from gb300.heal.evidence import Event
from gb300.heal.ladder import PREFIX
from gb300.heal.nccl import nccl_eval
from gb300.heal.scenario import CURE_LEVEL, RACK_SIZE, Scenario, match
from gb300.slurm.client import HEALTH_PREFIX, MAINTENANCE_PREFIX
from gb300.slurm.hostlist import expand

FIXTURES = paths.REPO_ROOT / "tests" / "fixtures" / "slurm"
RUNG_LEVEL = {"restart": 1, "reimage": 2, "redeploy": 3}


def sim_times() -> dict[str, float]:
    raw = data("remediation.yaml")["simulation"]
    keys = {"restart": "reboot", "reimage": "reimage", "redeploy": "replace", "nccl": "nccl"}
    return {time: raw[f"{key}Seconds"] for time, key in keys.items()}


@dataclass
class Fault:
    """What is really wrong with one node (from ``truth``)."""

    level: int
    start: float
    until: float | None
    kinds: list[Event]
    cured_at: float | None = None
    recurs_after: float | None = None
    returns_at: float | None = None
    nccl_only: bool = False  # the gate passes; only the rack NCCL run shows the fault (truth.seen_by: nccl)


@dataclass
class SimNode:
    name: str
    rack: int
    reason: str = ""
    drained: bool = False
    boot_time: float = 0.0
    busy_until: float = -1.0  # an Azure action in progress
    pending_level: int = 0
    op_started: float = 0.0  # when the VM's provisioning state last changed (instance view)
    op_ended: float = 0.0
    resumed_at: float | None = None  # the last `state=resume`: NOT_RESPONDING, boot time 0 for a moment after
    failing: str | None = None  # the operation under way was accepted (202) and will fail with this ARM code
    failed: str | None = None  # the last operation failed with this code: the VM is stopped until the next one
    moves: int = 0  # redeploys that completed: each puts the VM on a new physical host with a new name
    published: str = ""  # the host gb300-heal-publish last wrote to the node's Slurm comment (kept while unreachable)
    frozen_until: float = -1.0  # a platform Freeze pauses the VM (no reboot)
    deleted: bool = False  # Azure preempted or terminated the VM: a Slurm record with no VM

    @property
    def physical_host(self) -> str:
        """The physical host the VM runs on now: a new name after each completed redeploy."""
        return f"SIMHOST-{self.name}" + (f"-m{self.moves}" if self.moves else "")


@dataclass
class World:
    """The simulated fleet: nodes, jobs, faults; answers the loop's channels from the truth.

    Slurm answers as ``release`` does (data/slurm_releases.yaml; gb300's pinned release by default): a resume keeps
    the node's old reason where that release does (reasonKeptAfterResume), and for notRespondingAfterResume
    ``seconds`` after a resume the node reads NOT_RESPONDING with boot time 0.
    """

    scenario: Scenario
    release: str = field(default_factory=slurm_releases.ours)
    now: float = 0.0
    nodes: dict[str, SimNode] = field(default_factory=dict)
    faults: dict[str, Fault] = field(default_factory=dict)
    jobs: dict[str, tuple[float, float, list[str]]] = field(default_factory=dict)
    requeued: dict[str, float] = field(default_factory=dict)
    azure_calls: list[str] = field(default_factory=list)
    reports: list[dict[str, Any]] = field(default_factory=list)
    topology: str = ""
    topology_history: list[tuple[float, str]] = field(default_factory=list)
    nccl_runs: dict[str, tuple[float, list[str]]] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=sim_times)
    refusals: int = 0
    failed_operations: int = 0
    azure_log: list[dict[str, Any]] = field(default_factory=list)  # per node: each repair call and Azure's answer
    lifted: dict[str, dict[str, str]] = field(default_factory=dict)  # NCCL run -> the loop's drains lifted for it
    _events: list[Event] = field(default_factory=list)
    _windows: list[tuple[Any, set[str] | None]] = field(default_factory=list)
    _next_event: int = 0
    _fabric: str = ""
    _report_names: dict[str, int] = field(default_factory=dict)  # a Guest Health Report's ARM path -> its index
    scheduled: list[platform.PlatformEvent] = field(default_factory=list)  # Azure Scheduled Events

    def __post_init__(self) -> None:
        names = self.scenario.nodes
        for name in names:
            sim = self.nodes[name] = SimNode(name, int(name[1:5]))
            sim.published = sim.physical_host  # published by gb300-heal-publish at the node's first boot
        for job in self.scenario.jobs:
            self.jobs[job.name] = (job.start, job.end, match(job.nodes, names))
        events = []
        for spec in self.scenario.events:
            for node in match(spec.node, names):
                code = None if spec.code is None else str(spec.code)
                events.append(Event(spec.at, node, spec.kind, code, spec.check, spec.context))
        self._events = sorted(events, key=lambda e: (e.at, e.node))
        for truth in self.scenario.truth:
            for node in match(truth.node, names):
                # The fault's own reports: a job's teardown burst on the same node is not part of it.
                mine = [e for e in self._events if e.node == node and e.context != "job-teardown"]
                start = mine[0].at if mine else 0.0
                until = truth.until if truth.until is not None else (mine[-1].at if truth.cured_by == "self" else None)
                level = CURE_LEVEL[truth.cured_by]
                fault = Fault(level, start, until, mine, None, truth.recurs_after, nccl_only=truth.seen_by == "nccl")
                self.faults[node] = fault
        self._windows = [(w, set(match(w.node, names)) if w.node else None) for w in self.scenario.azure]
        self.scheduled = platform.events_of(self.scenario)
        self._fabric = "".join(
            f"{n} {uuid.uuid5(uuid.NAMESPACE_DNS, f'gb300-sim-rack-{s.rack}')} {s.rack}\n"
            for n, s in self.nodes.items()
        )

    # -- the truth, read only here ---------------------------------------------------------------------

    def _fault(self, node: str) -> Fault | None:
        fault = self.faults.get(node)
        if fault is None or fault.cured_at is not None or self.now < fault.start:
            return None
        if fault.until is not None and self.now > fault.until and fault.level in (0, CURE_LEVEL["none"]):
            return None  # ended by itself, or (none) by what no VM action is: a person's fix, a driver rolled back
        return fault

    def _unreachable(self, node: str) -> bool:
        fault = self._fault(node)
        down = bool(fault and any(e.kind == "unreachable" for e in fault.kinds))
        sim = self.nodes[node]
        return down or self._busy(node) or sim.failed is not None or sim.deleted or sim.frozen_until > self.now

    def unreachable(self, node: str) -> bool:
        """Whether the node does not answer now (its fault, or an Azure action in progress)."""
        return self._unreachable(node)

    def reported(self) -> set[str]:
        """Every node an event of the scenario is about."""
        return {e.node for e in self._events}

    def _busy(self, node: str) -> bool:
        return self.nodes[node].busy_until > self.now

    def advance(self, now: float) -> None:
        """Finish actions whose time has come: the node boots; the fault is cured when the action reaches it."""
        self.now = now
        for node in self.nodes.values():
            if 0 <= node.busy_until <= now and node.failing is not None:
                # The operation ARM accepted failed: the VM is left stopped, nothing cured (ProvisioningState/failed).
                node.op_ended, node.failed, node.failing = node.busy_until, node.failing, None
                node.busy_until, node.pending_level = -1.0, 0
                self.failed_operations += 1
                entry = {"at": node.op_ended, "node": node.name, "call": "operation", "answer": "failed"}
                self.azure_log.append({**entry, "code": node.failed})
            if 0 <= node.busy_until <= now:
                node.boot_time = node.op_ended = node.busy_until
                node.failed = None
                node.moves += node.pending_level == RUNG_LEVEL["redeploy"]  # a new host, named anew
                node.published = node.physical_host  # gb300-heal-publish writes it again at boot
                fault = self.faults.get(node.name)
                if fault and fault.cured_at is None and fault.level <= node.pending_level:
                    fault.cured_at = node.busy_until
                    if fault.recurs_after is not None:
                        self._recur(fault, fault.cured_at + fault.recurs_after)
                node.busy_until, node.pending_level = -1.0, 0
        for fault in self.faults.values():
            if fault.returns_at is not None and fault.returns_at <= now:
                fault.cured_at, fault.start, fault.returns_at = None, fault.returns_at, None
        for event in self.scheduled:
            if event.announced <= now and event.phase != "done":
                self._scheduled(event, now)

    def _scheduled(self, event: platform.PlatformEvent, now: float) -> None:
        """An Azure Scheduled Event and the node's gb300-scheduled-events around it: drain the node when announced
        (unless drained already: that drain keeps its reason), the platform's action at NotBefore, and the node's
        own maintenance drain resumed once the event is over."""
        node = self.nodes[event.node]
        if event.phase == "future":
            event.phase = "scheduled"
            if not node.drained:
                node.drained, node.reason = True, event.reason()
        if event.phase == "scheduled" and event.starts <= now:
            event.phase = "started"
            if event.type in platform.GONE:
                node.deleted = True
            elif event.type == "Freeze":
                node.frozen_until = event.starts + platform.freeze_s()
            else:
                call = platform.CALL[event.type]  # what the loop's call of the same kind takes and cures
                node.busy_until = max(node.busy_until, event.starts + self.times[call])
                node.op_started, node.pending_level = event.starts, max(node.pending_level, RUNG_LEVEL[call])
            self.azure_log.append({"at": event.starts, "node": node.name, "call": "scheduled", "answer": event.type})
        if event.phase == "started" and not node.deleted and not self._unreachable(node.name):
            event.phase = "done"
            others = [e for e in self.scheduled if e.node == node.name and e.phase in ("scheduled", "started")]
            if node.drained and node.reason.startswith(MAINTENANCE_PREFIX) and not others:
                self._resume(node)

    def request(self, host: str, action: str, now: float) -> None:
        """A person drains the node with ``Action:Reboot`` or ``Action:Replace`` in its reason (as for HyperPod); the
        head's feed reads it from the reason (gb300.heal.head_slurm.SlurmFeed), here it arrives as that event."""
        node = self.nodes[host]
        node.drained, node.reason = True, f"Action:{action.capitalize()} requested by an operator"
        event = Event(now, host, "request", action)
        keys = [(e.at, e.node) for e in self._events]
        self._events.insert(bisect.bisect_right(keys, (now, host), lo=self._next_event), event)

    @property
    def cursor(self) -> int:
        """How many events the feed has handed out (the head saves its feed's memory with its state)."""
        return self._next_event

    def rewind(self, cursor: int) -> None:
        """The head died before it saved: its feed hands out again what it read since ``cursor``, as the head reads
        a reason still on a node again; a gate's or a person's reason the loop drained over since is gone (a node
        still down is read as down again). Events inserted since sit after the cursor, so it still holds."""
        cursor = min(cursor, self._next_event)
        again = self._events[cursor : self._next_event]
        mine = {n for n, node in self.nodes.items() if node.drained and node.reason.startswith(PREFIX)}
        self._events[cursor : self._next_event] = [e for e in again if e.node not in mine or e.kind == "unreachable"]
        self._next_event = cursor

    def _recur(self, fault: Fault, at: float) -> None:
        """The cure holds ``recurs_after`` seconds, then the fault and its reports come back (truth.recurs_after)."""
        fault.returns_at = at
        first = min(e.at for e in fault.kinds) if fault.kinds else at
        for event in fault.kinds:
            again = Event(at + event.at - first, event.node, event.kind, event.code, event.check, event.context)
            keys = [(e.at, e.node) for e in self._events]
            self._events.insert(bisect.bisect_right(keys, (again.at, again.node), lo=self._next_event), again)

    def next_change(self) -> float | None:
        times = [n.busy_until for n in self.nodes.values() if n.busy_until > self.now]
        times += [f.returns_at for f in self.faults.values() if f.returns_at is not None and f.returns_at > self.now]
        times += [o.at for o in self.scenario.operator if o.at > self.now]
        times += [w.until for w, _ in self._windows if w.until > self.now]
        times += [f.until for f in self.faults.values() if f.until is not None and f.until > self.now]
        times += [t + self.times["nccl"] for t, _ in self.nccl_runs.values() if t + self.times["nccl"] > self.now]
        times += [t for e in self.scheduled for t in (e.announced, e.starts) if t > self.now]
        times += [n.frozen_until for n in self.nodes.values() if n.frozen_until > self.now]
        if self._next_event < len(self._events):
            times.append(self._events[self._next_event].at)
        return min(times, default=None)

    # -- channels ----------------------------------------------------------------------------------------

    def poll(self, now: float) -> list[Event]:
        """Events up to ``now``; a cured node stops reporting its fault; the node's running job is attached."""
        out = []
        while self._next_event < len(self._events) and self._events[self._next_event].at <= now:
            event = self._events[self._next_event]
            self._next_event += 1
            fault = self.faults.get(event.node)
            if fault is not None and fault.cured_at is not None and fault.level > 0:
                continue
            if event.kind == "unreachable" and self._others(event.node):
                continue  # as the head's feed: a node down under someone else's drain is not evidence
            job = next(iter(self._running([event.node], event.at)), None)
            if job is None and event.context == "job-teardown":
                job = self._last_job(event.node, event.at)
            out.append(Event(event.at, event.node, event.kind, event.code, event.check, event.context, job))
        return out

    def _others(self, host: str) -> bool:
        """Whether someone else drained the node (a person, Scheduled Events, the rollout)."""
        node = self.nodes[host]
        return node.drained and bool(node.reason) and not node.reason.startswith((PREFIX, HEALTH_PREFIX))

    def _running(self, hosts: Sequence[str], at: float) -> list[str]:
        wanted = set(hosts)
        return [
            name
            for name, (start, end, nodes) in self.jobs.items()
            if start <= at < min(end, self.requeued.get(name, end)) and wanted.intersection(nodes)
        ]

    def _last_job(self, node: str, at: float) -> str | None:
        ended = [(end, name) for name, (_, end, nodes) in self.jobs.items() if node in nodes and end <= at]
        return max(ended)[1] if ended else None

    def slurm(self, argv: Sequence[str]) -> str:
        """scontrol / squeue, as the loop sends them (gb300.heal.ports.HealSlurm)."""
        args = list(argv)
        if args[:2] == ["scontrol", "update"]:
            opts = dict(a.split("=", 1) for a in args[2:])
            for host in expand(opts["nodename"]):
                node = self.nodes[host]
                if opts["state"] == "drain":
                    node.drained, node.reason = True, opts.get("reason", "")
                elif opts["state"] == "resume":
                    self._resume(node)
            return ""
        if args[:2] == ["scontrol", "requeue"]:
            for job in args[2].split(","):
                self.requeued[job] = self.now
            return ""
        if args[0] == "squeue":
            hosts = expand(next(a for a in args if a.startswith("--nodelist=")).split("=", 1)[1])
            return "".join(f"{j}\n" for j in self._running(hosts, self.now))
        if args[:4] == ["scontrol", "--json", "show", "node"]:
            return self._show_nodes(expand(args[4]) if len(args) > 4 else list(self.nodes))
        raise ValueError(f"simulated Slurm: unexpected command {' '.join(args)}")

    def _show_nodes(self, hosts: Sequence[str]) -> str:
        """``scontrol --json show node <hosts>``: the records :func:`gb300.slurm.client.parse_nodes` reads."""
        records = []
        for host in hosts:
            if host not in self.nodes:
                continue
            node = self.nodes[host]
            states = ["ALLOCATED" if self._running([host], self.now) else "IDLE"]
            boot = node.boot_time
            if self._unreachable(host):
                states = ["DOWN", "NOT_RESPONDING"]
            elif node.resumed_at is not None and self.now - node.resumed_at < self._blip_s():
                states, boot = [*states, "NOT_RESPONDING"], 0.0  # registering again after the resume
            if node.drained:
                states.append("DRAIN")
            boot_time = {"set": True, "infinite": False, "number": int(boot)}
            records.append({"name": host, "state": states, "reason": node.reason, "boot_time": boot_time})
        return json.dumps({"nodes": records})

    def _resume(self, node: SimNode) -> None:
        """``scontrol update state=resume`` as ``release`` answers it: the reason stays where that release keeps it."""
        node.drained, node.resumed_at = False, self.now
        if not slurm_releases.shows("reasonKeptAfterResume", self.release):
            node.reason = ""

    def _blip_s(self) -> float:
        shown = slurm_releases.shows("notRespondingAfterResume", self.release)
        return slurm_releases.not_responding_seconds() if shown else 0.0

    def gate_result(self, host: str) -> str | None:
        """The node's gate verdict in gb300-health-check's boot.result format (None: the node does not answer)."""
        if self._unreachable(host):
            return None
        fault = self._fault(host)
        if fault is None or fault.nccl_only:
            return "pass"
        failures = []
        for event in fault.kinds:
            if event.kind == "check-failed":
                failures.append(f"{event.check}: failed")
            elif (shown := gate_checks.gate_failure(event.kind, event.code)) is not None:
                failures.append(f"{shown[0]}: {shown[1]}")
        return "fail: " + "; ".join(dict.fromkeys(failures)) if failures else "pass"

    def physical_host(self, host: str) -> str | None:
        """The host the node last published: while it answers, the name in its Hyper-V KVP pool 3 record (512-byte
        key, 2048-byte value, read with nccl-eval's parser) now; while it does not, the one it published last, as
        the head reads it from the node's Slurm comment (slurmctld keeps the comment of a node that is down)."""
        node = self.nodes[host]
        if not self._unreachable(host):
            pool = b"PhysicalHostName".ljust(512, b"\0") + node.physical_host.encode().ljust(2048, b"\0")
            node.published = str(nccl_eval().physical_host(pool))
        return node.published or None

    def submit(self, hosts: Sequence[str]) -> str:
        """Start the rack run; as the head's runner (gb300.heal.head_slurm.SrunNccl), the loop's own drains are
        lifted for it and put back when the run is collected."""
        handle = f"nccl-{len(self.nccl_runs) + 1}"
        self.nccl_runs[handle] = (self.now, list(hosts))
        for host in hosts:
            node = self.nodes[host]
            if node.drained and node.reason.startswith("gb300-heal:"):
                self.lifted.setdefault(handle, {})[host] = node.reason
                self._resume(node)
        return handle

    def collect(self, handle: str) -> str | None:
        """nccl-tests output from the repository's fixtures: full bandwidth when every host is really healthy."""
        started, hosts = self.nccl_runs[handle]
        if self.now < started + self.times["nccl"]:
            return None
        for host, reason in self.lifted.pop(handle, {}).items():
            node = self.nodes[host]
            if node.drained and not node.reason.startswith("gb300-heal:"):
                continue  # someone else drained it meanwhile
            node.drained, node.reason = True, reason
        healthy = all(self._fault(h) is None or self._fault(h).level == 0 for h in hosts)  # type: ignore[union-attr]
        name = "all_reduce_perf.rack-ok.txt" if healthy else "all_reduce_perf.rack-report.txt"
        return (FIXTURES / name).read_text(encoding="utf-8")

    def fabric_lines(self) -> str:
        return self._fabric

    def write(self, rendered: str) -> None:
        self.topology = rendered
        self.topology_history.append((self.now, rendered))

    def _refused(self, call: str, host: str | None) -> fake_arm.Answer | None:
        """The scenario's ``azure`` window that answers this call now, as ARM would."""
        for window, hosts in self._windows:
            if window.status < 400 or not (window.start <= self.now < window.until) or window.call not in (call, "any"):
                continue
            if hosts is not None and host not in hosts:
                continue
            self.refusals += 1
            headers = {"Retry-After": f"{window.retryAfter:.0f}"} if window.retryAfter is not None else {}
            body = fake_arm.error(window.status, f"simulated {window.status} {window.code or ''}".strip(), window.code)
            return window.status, body, headers
        return None

    def _host(self, scale_set: str, instance: str) -> str:
        return f"r{int(scale_set.rsplit('-r', 1)[1]):04d}-{int(instance):02d}"

    def arm(self, method: str, path: str, body: Any) -> fake_arm.Answer:
        """Azure Resource Manager for the loop's calls (answered for :class:`gb300.heal.fake_arm.FakeArm`): the
        scenario's ``azure`` windows first, then a VM that is busy with an operation refuses another with 409, as ARM
        does. The head's crashes are the simulator's (:func:`gb300.heal.sim.run`)."""
        self.azure_calls.append(f"{method} {path}")
        reply = self._arm(method, path, body)
        request = fake_arm.route(method, path)
        if request.call in RUNG_LEVEL or (request.call == "report" and method == "PUT"):
            vm = (request.scale_set, request.instance)
            host = self._host(vm[0], vm[1]) if vm[0] and vm[1] else self._report_host(body)
            code = ((reply[1] or {}).get("error") or {}).get("code") if isinstance(reply[1], dict) else None
            self.azure_log.append(
                {"at": self.now, "node": host, "call": request.call, "answer": reply[0], "code": code}
            )
        return reply

    def _accepts_then_fails(self, call: str, host: str) -> str | None:
        """The ARM code an accepted operation will fail with (a scenario window with ``status: 202``), if any."""
        for window, hosts in self._windows:
            active = window.start <= self.now < window.until and window.call in (call, "any")
            if window.status == 202 and active and (hosts is None or host in hosts):
                return str(window.code)
        return None

    def _arm(self, method: str, path: str, body: Any) -> fake_arm.Answer:  # noqa: PLR0911 - one return per call
        request = fake_arm.route(method, path)
        host = self._host(request.scale_set, request.instance) if request.scale_set and request.instance else None
        refused = self._refused(request.call, host or self._report_host(body))
        if refused is not None:
            return refused
        if host is not None and self.nodes[host].deleted:
            return 404, fake_arm.error(404, f"the VM of {host} was deleted", "ResourceNotFound"), {}
        if request.action == "instanceView" and host is not None:
            node = self.nodes[host]
            busy = node.busy_until > self.now
            return 200, fake_arm.instance_view(busy, node.op_started if busy else node.op_ended, node.failed), {}
        if request.call == "list" and request.scale_set and request.instance is None:
            rack = int(request.scale_set.rsplit("-r", 1)[1])
            hosts = [f"r{rack:04d}-{i:02d}" for i in range(RACK_SIZE)]
            vm_id = lambda i: str(uuid.uuid5(uuid.NAMESPACE_DNS, f"gb300-sim-vm-{rack}-{i}"))  # noqa: E731
            gone = {h for h in hosts if self.nodes[h].deleted}
            return 200, fake_arm.vm_list(path, hosts, vm_id, gone), {}
        if request.call in RUNG_LEVEL and host is not None:
            node = self.nodes[host]
            if node.busy_until > self.now:
                return 409, fake_arm.error(409, "another operation is in progress on the VM"), {}
            node.busy_until = self.now + self.times[request.call]
            node.op_started = self.now
            node.failing = self._accepts_then_fails(request.call, host)
            node.pending_level = max(node.pending_level, RUNG_LEVEL[request.call])
            return 202, None, {}
        if request.call == "report" and method == "PUT":  # ARM's PUT is idempotent: the same name, the same report
            named = self._report_names.setdefault(path.split("?", 1)[0], len(self.reports))
            self.reports[named : named + 1] = [body]
            return 201, body, {}
        if request.call == "report" and request.action == "insights":
            return 200, fake_arm.insights("simulated: report received"), {}
        return 404, fake_arm.error(404, path), {}

    def _report_host(self, body: Any) -> str | None:
        resource = str(((body or {}).get("properties") or {}).get("impactedResourceId") or "")
        m = re.search(r"virtualMachineScaleSets/([^/]+)/virtualMachines/(\d+)$", resource)
        return self._host(m.group(1), m.group(2)) if m else None


__all__ = ["FIXTURES", "Fault", "SimNode", "World", "sim_times"]
