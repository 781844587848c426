"""The head's Slurm adapters of the remediation loop's channels (:mod:`gb300.heal.ports`; docs/self-healing.md).

* :class:`SlurmView`: every node's record, ``scontrol --json show node`` read once per tick
  (:func:`gb300.slurm.client.parse_nodes`, the one reader of that command), read again (bounded) while a node is
  in the NOT_RESPONDING-with-boot-time-0 blip every resume causes; a reason counts only while its node is drained
  (Slurm 24.11 keeps a resumed node's old reason);
* :class:`SlurmFeed`: node evidence: the health gate's drain reasons (``gb300: <check>: <value>; ...``), each
  failed check an event of the kind :mod:`gb300.heal.gate_checks` names, and nodes Slurm sees DOWN or
  NOT_RESPONDING (``unreachable``); an XID event carries the job that ran on the node last (:class:`SlurmJobs`,
  ``scontrol --json show job``), so the same-job rule can tell one crashed job on many nodes from many sick nodes;
* :class:`SlurmProbe`: the gate's verdict for a recheck: down is no answer, a ``gb300:`` reason is a failure,
  a node comment ``gb300-gate: <result>`` (published by ``gb300-heal-publish`` on GPU nodes) is the gate's last
  result, otherwise a pass;
* :class:`SlurmTopology`: fabric identities from the nodes' ``Extra``;
* :class:`SrunNccl`: the rack NCCL run, ``srun`` of nccl-tests in a transient unit, inside a maintenance
  reservation of the rack's hosts.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gb300.heal import gate_checks
from gb300.heal.case import requested_action
from gb300.heal.evidence import Event, checked_host, parse_gate_result, xid_code
from gb300.heal.head_host import node_path
from gb300.heal.ladder import PREFIX
from gb300.heal.ports import HealSlurm
from gb300.node import paths as node_paths
from gb300.slurm.client import (
    DOWN_STATES,
    HEALTH_PREFIX,
    Runner,
    SlurmError,
    SlurmJob,
    SlurmNode,
    parse_jobs,
    parse_nodes,
)
from gb300.slurm.hostlist import compress

GATE_COMMENT = "gb300-gate:"
"""Prefix of the node comment ``gb300-heal-publish`` writes on GPU nodes: the gate's last result."""
HOST_MARK = " | gb300-host:"
"""gb300-heal-publish appends the node's physical host (Hyper-V KVP pool 3) to its gate comment after this mark, so
the head can name the old host in a Guest Health Report before a redeploy moves the VM."""
_XID = re.compile(r"\b(\d+)@")


@dataclass
class SlurmView:
    """Every node's Slurm record, read once per tick with ``scontrol --json show node``.

    A resume (or undrain, or reboot) makes slurmctld ask the node to register again: for about a second it reads
    NOT_RESPONDING with boot time 0 (:attr:`SlurmNode.reregistering`; data/slurm_releases.yaml
    notRespondingAfterResume). While any record reads so, the view reads them all again, ``reread`` = (at most this
    many times, this many seconds apart; heal.json ``slurmReread``), so a node resumed a moment ago is not taken
    for one that does not answer; a node still re-registering after that counts as not answering.
    """

    slurm: HealSlurm
    run: Runner
    _records: dict[str, SlurmNode] | None = None
    reread: tuple[int, float] = (0, 0.0)
    sleep: Callable[[float], None] = time.sleep

    def records(self) -> dict[str, SlurmNode]:
        if self._records is None:
            self._records = self._read()
            attempts, wait_s = self.reread
            for _ in range(attempts):
                if not any(record.reregistering for record in self._records.values()):
                    break
                self.sleep(wait_s)
                self._records = self._read()
        return self._records

    def _read(self) -> dict[str, SlurmNode]:
        return parse_nodes(self.run(["scontrol", "--json", "show", "node"]))

    def forget(self) -> None:
        self._records = None

    def _node(self, host: str) -> SlurmNode:
        return self.records().get(host) or SlurmNode(host, frozenset(), "", 0.0)

    def states(self, host: str) -> frozenset[str]:
        return self._node(host).states

    def reason(self, host: str) -> str:
        """The node's drain reason ("" when it is not drained, whatever reason a resume left on it)."""
        return self._node(host).drain_reason

    def comment(self, host: str) -> str:
        return self._node(host).comment


@dataclass(frozen=True)
class JobContext:
    """The job that ran on a node last, as slurmctld still holds it: its id, and when it ended (None: running)."""

    job: str
    ended: float | None


@dataclass
class SlurmJobs:
    """Jobs slurmctld holds: running ones, and finished ones for ``MinJobAge`` seconds (slurm.conf(5); 300 by
    default). Read at most once per tick with ``scontrol --json show job``, and only when a gate drain names an XID.

    The records are read by :func:`gb300.slurm.client.parse_jobs`.
    """

    run: Runner
    _jobs: list[SlurmJob] | None = None

    def _load(self) -> list[SlurmJob]:
        if self._jobs is None:
            try:
                self._jobs = parse_jobs(self.run(["scontrol", "--json", "show", "job"]))
            except (SlurmError, ValueError):
                self._jobs = []  # no job context: the evidence is judged as the node's own
        return self._jobs

    def last_on(self, host: str, now: float, horizon_s: float) -> JobContext | None:
        """The job running on ``host``, else the one that ended there last, if that was at most ``horizon_s`` ago."""
        best: JobContext | None = None
        for job in self._load():
            end = job.end
            if host not in job.hosts or (job.start is not None and job.start > now):
                continue
            if job.running:
                return JobContext(job.job_id, None)
            if end is not None and now - end <= horizon_s and (best is None or (best.ended or 0) < end):
                best = JobContext(job.job_id, end)
        return best


def gate_events(
    host: str,
    reason: str,
    now: float,
    *,
    job: JobContext | None = None,
    teardown: tuple[frozenset[int], float] = (frozenset(), 0.0),
) -> list[Event]:
    """The events a health gate drain reason (``gb300: <check>: <value>[; ...]``) stands for.

    An XID event carries ``job`` (the node's last job, :class:`SlurmJobs`): the loop waits for the job's other nodes
    before judging it. A teardown code (``teardown``: codes and window, ``evidence.xid.teardownBenign``) whose job
    ended at most the window before now is marked ``job-teardown``, the same rule the gate applies on the node.
    """
    text = reason.removeprefix(HEALTH_PREFIX).strip().removeprefix("boot check:").strip()
    result = parse_gate_result(f"fail: {text}")
    codes_benign, window = teardown
    events: list[Event] = []
    for check, message in result.failures:
        if check == "xid":
            codes = _XID.findall(message) or ["0"]
            for code in dict.fromkeys(codes):
                ended = job is not None and job.ended is not None and now - job.ended <= window
                number = xid_code(code)  # None for a code no catalog has (5,000 digits never reach int())
                context = "job-teardown" if ended and number in codes_benign else None
                shown = code if number is not None else code[:8] + "..."
                events.append(Event(now, host, "xid", shown, context=context, job=job.job if job else None))
            continue
        kind, code = gate_checks.evidence_of(check)
        events.append(Event(now, host, kind, code, check if kind == gate_checks.CHECK_FAILED else None))
    return events


@dataclass
class SlurmFeed:
    """Node evidence from Slurm's records: new gate drain reasons and nodes turning unreachable, each once."""

    view: SlurmView
    seen: dict[str, str] = field(default_factory=dict)  # node -> the last gate reason or "down" it reported
    skip: Callable[[str], bool] = lambda _host: False
    jobs: SlurmJobs | None = None
    teardown: tuple[frozenset[int], float] = (frozenset(), 0.0)  # evidence.xid.teardownBenign: codes, window
    on_bad: Callable[[str, str], None] = lambda _host, _why: None

    def poll(self, now: float) -> list[Event]:
        """Events of every record; a record that cannot be read is skipped and reported (``on_bad``), never the
        tick: one node's malformed reason must not stop the loop for the fleet."""
        events: list[Event] = []
        for host in sorted(self.view.records()):
            try:
                events.extend(self._poll_one(host, now))
            except Exception as exc:  # noqa: BLE001 - any malformed record: skipped, logged, the tick goes on
                self.on_bad(host, f"{type(exc).__name__}: {exc}")
        return events

    def _poll_one(self, host: str, now: float) -> list[Event]:  # noqa: PLR0911 - one return per kind of record
        if self.skip(host):
            return []
        reason = self.view.reason(host)
        down = bool(self.view.states(host) & DOWN_STATES)
        action = requested_action(reason) if not reason.startswith(PREFIX) else None
        if action is not None:
            if self.seen.get(host) == reason:
                return []
            self.seen[host] = reason
            return [Event(now, host, "request", action)]
        if reason.startswith(HEALTH_PREFIX):
            if self.seen.get(host) == reason:
                return []
            self.seen[host] = reason
            job = None
            if self.jobs is not None and _XID.search(reason) and "xid:" in reason:
                job = self.jobs.last_on(host, now, self.teardown[1])
            return gate_events(host, reason, now, job=job, teardown=self.teardown)
        if down and not (reason and not reason.startswith(PREFIX)):
            if self.seen.get(host) == "down":
                return []
            self.seen[host] = "down"
            return [Event(now, host, "unreachable")]
        self.seen.pop(host, None)
        return []


@dataclass
class SlurmProbe:
    """The gate's verdict on a node and the physical host it runs on, as its Slurm record shows them (gb300-heal-publish
    writes both into the node's comment)."""

    view: SlurmView

    def gate_result(self, host: str) -> str | None:
        self.view.forget()  # a recheck wants the controller's view now, not the tick's first read
        if host not in self.view.records() or self.view.states(host) & DOWN_STATES:
            return None
        reason = self.view.reason(host)
        if reason.startswith(HEALTH_PREFIX):
            return HEALTH_PREFIX + " " + reason.removeprefix(HEALTH_PREFIX).strip().removeprefix("boot check:").strip()
        comment = self.view.comment(host).split(HOST_MARK, 1)[0]
        if comment.startswith(GATE_COMMENT):
            return comment.removeprefix(GATE_COMMENT).strip()
        return "pass"

    def physical_host(self, host: str) -> str | None:
        self.view.forget()  # read just before a redeploy: the host the VM is on now
        comment = self.view.comment(host)
        if not comment.startswith(GATE_COMMENT) or HOST_MARK not in comment:
            return None
        return checked_host(comment.split(HOST_MARK, 1)[1].strip())


@dataclass
class SlurmTopology:
    """Fabric identities from the nodes' ``Extra=gb300-nvlink:<ClusterUUID>:<CliqueId>``; the loop's topology is
    written to a file for people to read: ``gb300-topology-refresh`` stays the one writer of topology.conf."""

    view: SlurmView

    def fabric_lines(self) -> str:
        lines = []
        for host, record in sorted(self.view.records().items()):
            parts = (record.extra.split() or [""])[0].split(":")
            if parts[0] == "gb300-nvlink" and len(parts) == 3:
                lines.append(f"{host} {parts[1]} {parts[2]}\n")
        return "".join(lines)

    def write(self, rendered: str) -> None:
        target = node_path(node_paths.HEAL_TOPOLOGY_VIEW)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(rendered, encoding="utf-8")


@dataclass
class SrunNccl:
    """The rack acceptance run: ``srun`` of all_reduce_perf in a transient systemd unit, its output on the head.

    Slurm starts no job on a drained node, so the run happens inside a maintenance reservation of the hosts
    (root only, so no user job lands there meanwhile), with the loop's own drains lifted for it and put back,
    with the same reason, when the run ends; a host someone else drained meanwhile keeps that drain.
    """

    run: Runner
    settings: Mapping[str, Any]
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def submit(self, hosts: Sequence[str]) -> str:
        handle = f"gb300-heal-nccl-{int(time.time())}-{len(self.runs) + 1}"
        nodes = compress(hosts)
        minutes = max(1, int(float(self.settings["timeoutSeconds"]) // 60))
        self.run(
            [
                "scontrol", "create", "reservation", f"reservationname={handle}", "starttime=now",
                f"duration={minutes}", "users=root", "flags=maint,ignore_jobs", f"nodes={nodes}",
            ]
        )  # fmt: skip
        records = parse_nodes(self.run(["scontrol", "--json", "show", "node", nodes]))
        lifted = {name: node.drain_reason for name, node in records.items() if node.drain_reason.startswith(PREFIX)}
        if lifted:
            self.run(["scontrol", "update", f"nodename={compress(list(lifted))}", "state=resume"])
        output = node_path(node_paths.HEAL_NCCL_DIR) / f"{handle}.out"
        output.parent.mkdir(parents=True, exist_ok=True)
        size = str(self.settings["bytes"])
        env = ",".join(["ALL", *(f"{k}={v}" for k, v in sorted(self.settings["env"].items()))])
        srun = [
            "srun", f"--reservation={handle}", f"--nodelist={nodes}", f"--nodes={len(hosts)}", "--exclusive",
            "--ntasks-per-node=4", "--cpus-per-task=24", "--gpus-per-node=4", "--cpu-bind=none", "--mpi=pmix",
            f"--time={minutes}", f"--export={env}", f"{self.settings['ncclTests']}/all_reduce_perf",
            "-b", size, "-e", size, "-f", "2", "-g", "1", "-n", "20", "-w", "5",
        ]  # fmt: skip
        self.run(
            [
                "systemd-run", f"--unit={handle}", "--collect", "--quiet",
                f"--property=StandardOutput=file:{output}", "--property=StandardError=inherit", *srun,
            ]
        )  # fmt: skip
        self.runs[handle] = {"hosts": list(hosts), "lifted": lifted, "output": str(output)}
        return handle

    def collect(self, handle: str) -> str | None:
        job = self.runs.get(handle)
        if job is None:
            return ""  # forgotten (state from before this handle): an empty output fails the revalidation
        try:
            active = self.run(["systemctl", "is-active", f"{handle}.service"]).strip()
        except SlurmError:  # is-active exits 3 for an inactive or unknown unit
            active = "inactive"
        if active in ("active", "activating"):
            return None
        self._finish(handle, job)
        try:
            return Path(job["output"]).read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""

    def _finish(self, handle: str, job: Mapping[str, Any]) -> None:
        lifted: dict[str, str] = dict(job["lifted"])
        if lifted:
            records = parse_nodes(self.run(["scontrol", "--json", "show", "node", compress(list(lifted))]))
            for host, record in records.items():
                # Not drained now (on 24.11 the lifted reason is still on the record after the resume): drain again.
                if host in lifted and not record.drain_reason:
                    self.run(["scontrol", "update", f"nodename={host}", "state=drain", f"reason={lifted[host]}"])
        with contextlib.suppress(SlurmError):  # an expired reservation is already gone
            self.run(["scontrol", "delete", f"reservationname={handle}"])
        self.runs.pop(handle, None)


__all__ = [
    "GATE_COMMENT",
    "HOST_MARK",
    "JobContext",
    "SlurmFeed",
    "SlurmJobs",
    "SlurmProbe",
    "SlurmTopology",
    "SlurmView",
    "SrunNccl",
    "gate_events",
]
