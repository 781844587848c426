"""``gb300-heal``: the remediation loop on the Slurm head (``gb300:remediation.enabled``; docs/self-healing.md).

``gb300-heal tick`` runs one tick of the real :class:`~gb300.heal.loop.Remediator` against the head's own
channels, from ``gb300-heal.timer`` (a oneshot every ``pollSeconds``); ``gb300-heal status`` says what the loop is
doing and why it halted; ``gb300-heal resume`` lets a halted loop go on. Each tick is a fresh process: it takes
the lock, reads the state (:mod:`gb300.heal.state`), ticks once, and writes the state back atomically.

The channels (:mod:`gb300.heal.ports`), on the head:

* Slurm: ``scontrol --json show node`` (every node's state, reason, boot time and ``Extra``), ``squeue``,
  ``scontrol update``/``requeue``/``create reservation``/``delete reservation`` (:class:`SlurmView`);
* node evidence (:class:`SlurmFeed`): the health gate's drain reasons (``gb300: <check>: <value>; ...``), each
  failed check an event of the kind the loop judges, and nodes Slurm sees DOWN or NOT_RESPONDING (``unreachable``);
  an XID event carries the job that ran on the node last (:class:`SlurmJobs`, ``scontrol --json show job``), so the
  same-job rule can tell one crashed job on many nodes from many sick nodes;
* the gate's verdict for a recheck (:class:`SlurmProbe`): down is no answer, a ``gb300:`` reason is a failure,
  a node comment ``gb300-gate: <result>`` (published by ``gb300-heal-publish`` on GPU nodes) is the gate's last
  result, otherwise a pass;
* Azure: azure-mgmt-compute with ``ManagedIdentityCredential`` of the remediation identity, whose client id is the
  head's tag :data:`gb300.tags.HEAL_CLIENT_ID` read from IMDS; subscription and resource group are the head's
  own (IMDS);
* the rack NCCL run (:class:`SrunNccl`): ``srun`` of nccl-tests in a transient unit, inside a maintenance
  reservation of the rack's hosts;
* decision records: JSON lines in ``/var/log/gb300/health/remediation.log`` (shipped to ``Gb300Health_CL``).

Only the standard library, gb300's light modules and the Azure SDK are imported: the head's venv holds exactly
the packages of ``data/heal-python.yaml``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gb300 import tags as gb300_tags
from gb300.heal import policy as heal_policy
from gb300.heal import state as heal_state
from gb300.heal.azure_calls import AzureRepairs, RackRef
from gb300.heal.evidence import Event, checked_host, parse_gate_result, xid_code
from gb300.heal.loop import PREFIX, Remediator, requested_action
from gb300.heal.ports import HealSlurm, Sink, decision_record, file_sink
from gb300.node import paths as node_paths
from gb300.slurm.client import HEALTH_PREFIX, Runner, SlurmError, run_local
from gb300.slurm.hostlist import compress, expand

CONFIG = node_paths.HEAL_CONFIG
STATE = node_paths.HEAL_STATE
LOCK = node_paths.HEAL_LOCK
DECISIONS = node_paths.HEAL_DECISION_LOG
VIEW = node_paths.HEAL_TOPOLOGY_VIEW
NCCL_DIR = node_paths.HEAL_NCCL_DIR
CLIENT_ID_TAG = gb300_tags.HEAL_CLIENT_ID
GATE_COMMENT = "gb300-gate:"
# gb300-heal-publish appends the node's physical host (Hyper-V KVP pool 3) to its gate comment after this mark, so
# the head can name the old host in a Guest Health Report before a redeploy moves the VM.
HOST_MARK = " | gb300-host:"
"""Prefix of the node comment ``gb300-heal-publish`` writes on GPU nodes: the gate's last result."""
_DOWN = frozenset({"DOWN", "NOT_RESPONDING", "NO_RESPOND", "POWERED_DOWN", "FAIL", "UNKNOWN"})
_XID = re.compile(r"\b(\d+)@")
# The health gate's checks (data/health.yaml defaults.checks) as evidence kinds the loop judges
# (gb300.heal.evidence); a check not named here is ``check-failed`` with its name (hard checks act at once).
CHECK_KINDS: Mapping[str, tuple[str, str | None]] = {
    "gpus": ("gpu-missing", None),
    "row-remap-failure": ("ecc", "uncorrectable"),
    "ecc-dbe": ("ecc", "uncorrectable"),
    "retired-pages-pending": ("ecc", "row-remap-pending"),
    "ib": ("ib-link-down", None),
    "fabric-health": ("nvlink-down", None),
    "nvlink-ber": ("nvlink-down", None),
    "clock-events": ("thermal-throttle", None),
    "gpu-temperature": ("thermal-throttle", None),
}


def root() -> str:
    """``GB300_ROOT``: the prefix of every path (empty on a node; a scratch directory in tests)."""
    return os.environ.get("GB300_ROOT", "")


def _path(node_path: str) -> Path:
    return Path(root() + node_path)


# ---------------------------------------------------------------------------------------------------------
# Slurm: one read of every node per tick


@dataclass
class SlurmView:
    """Every node's Slurm record, read once per tick with ``scontrol --json show node``."""

    slurm: HealSlurm
    run: Runner
    _records: dict[str, dict[str, Any]] | None = None

    def records(self) -> dict[str, dict[str, Any]]:
        if self._records is None:
            doc = json.loads(self.run(["scontrol", "--json", "show", "node"]) or "{}")
            self._records = {str(r.get("name") or r.get("hostname")): r for r in doc.get("nodes") or []}
        return self._records

    def forget(self) -> None:
        self._records = None

    def states(self, host: str) -> frozenset[str]:
        raw = self.records().get(host, {})
        words: list[str] = []
        for key in ("state", "state_flags"):
            value = raw.get(key)
            items = value if isinstance(value, list) else str(value or "").replace("+", " ").split()
            words.extend(str(v).upper() for v in items)
        return frozenset(words)

    def reason(self, host: str) -> str:
        return str(self.records().get(host, {}).get("reason") or "")

    def comment(self, host: str) -> str:
        return str(self.records().get(host, {}).get("comment") or "")


@dataclass(frozen=True)
class JobContext:
    """The job that ran on a node last, as slurmctld still holds it: its id, and when it ended (None: running)."""

    job: str
    ended: float | None


def _time(value: Any) -> float | None:
    """A Slurm JSON time (``{"set", "infinite", "number"}`` since 23.11, a bare number before); None when unset."""
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    number = float(value or 0)
    return number or None


@dataclass
class SlurmJobs:
    """Jobs slurmctld holds: running ones, and finished ones for ``MinJobAge`` seconds (slurm.conf(5); 300 by
    default). Read at most once per tick with ``scontrol --json show job``, and only when a gate drain names an XID.

    Each record's ``job_id``, ``nodes`` (a hostlist), ``job_state`` (a list), ``start_time`` and ``end_time``
    (``{"set", "infinite", "number"}``) are read; a running job's ``end_time`` is its time limit, so ``job_state``
    decides whether it ended.
    """

    run: Runner
    _jobs: list[tuple[str, frozenset[str], float | None, float | None, bool]] | None = None

    def _load(self) -> list[tuple[str, frozenset[str], float | None, float | None, bool]]:
        if self._jobs is None:
            try:
                doc = json.loads(self.run(["scontrol", "--json", "show", "job"]) or "{}")
            except (SlurmError, ValueError):
                doc = {}  # no job context: the evidence is judged as the node's own
            jobs = []
            for raw in doc.get("jobs") or []:
                nodes = str(raw.get("nodes") or "")
                if not nodes or raw.get("job_id") is None:
                    continue
                states = raw.get("job_state")
                words = {str(w).upper() for w in (states if isinstance(states, list) else [states or ""])}
                running = bool(words & {"RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING"})
                hosts = frozenset(expand(nodes))
                jobs.append(
                    (str(raw["job_id"]), hosts, _time(raw.get("start_time")), _time(raw.get("end_time")), running)
                )
            self._jobs = jobs
        return self._jobs

    def last_on(self, host: str, now: float, horizon_s: float) -> JobContext | None:
        """The job running on ``host``, else the one that ended there last, if that was at most ``horizon_s`` ago."""
        best: JobContext | None = None
        for job, hosts, start, end, running in self._load():
            if host not in hosts or (start is not None and start > now):
                continue
            if running:
                return JobContext(job, None)
            if end is not None and now - end <= horizon_s and (best is None or (best.ended or 0) < end):
                best = JobContext(job, end)
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
        kind, code = CHECK_KINDS.get(check, ("check-failed", None))
        events.append(Event(now, host, kind, code, check if kind == "check-failed" else None))
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
        down = bool(self.view.states(host) & _DOWN)
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
        if host not in self.view.records() or self.view.states(host) & _DOWN:
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
            extra = str(record.get("extra") or "")
            parts = (extra.split() or [""])[0].split(":")
            if parts[0] == "gb300-nvlink" and len(parts) == 3:
                lines.append(f"{host} {parts[1]} {parts[2]}\n")
        return "".join(lines)

    def write(self, rendered: str) -> None:
        target = _path(VIEW)
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
        lifted = {}
        doc = json.loads(self.run(["scontrol", "--json", "show", "node", nodes]) or "{}")
        for record in doc.get("nodes") or []:
            reason = str(record.get("reason") or "")
            if reason.startswith(PREFIX):
                lifted[str(record.get("name"))] = reason
        if lifted:
            self.run(["scontrol", "update", f"nodename={compress(list(lifted))}", "state=resume"])
        output = _path(NCCL_DIR) / f"{handle}.out"
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
            doc = json.loads(self.run(["scontrol", "--json", "show", "node", compress(list(lifted))]) or "{}")
            for record in doc.get("nodes") or []:
                host = str(record.get("name"))
                if host in lifted and not record.get("reason"):
                    self.run(["scontrol", "update", f"nodename={host}", "state=drain", f"reason={lifted[host]}"])
        with contextlib.suppress(SlurmError):  # an expired reservation is already gone
            self.run(["scontrol", "delete", f"reservationname={handle}"])
        self.runs.pop(handle, None)


# ---------------------------------------------------------------------------------------------------------
# Azure


def _imds(path: str) -> Any:
    """A JSON answer of the instance metadata service (``AZURE_POD_IDENTITY_AUTHORITY_HOST`` moves it, as it
    moves azure-identity's managed identity requests)."""
    base = os.environ.get("AZURE_POD_IDENTITY_AUTHORITY_HOST", "http://169.254.169.254").rstrip("/")
    request = urllib.request.Request(f"{base}{path}", headers={"Metadata": "true"})  # noqa: S310 - IMDS over http
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as response:
        return json.loads(response.read().decode())


def compute_clients(arm: str) -> tuple[Callable[[str], Any], str, str]:
    """``subscription -> ComputeManagementClient`` signed in as the remediation identity, and the head's own
    subscription and resource group (the racks' resource group)."""
    from azure.identity import ManagedIdentityCredential  # noqa: PLC0415 - only the tick talks to Azure
    from azure.mgmt.compute import ComputeManagementClient  # noqa: PLC0415

    compute = _imds("/metadata/instance/compute?api-version=2021-02-01")
    tags = {t["name"]: t["value"] for t in compute.get("tagsList") or []}
    client_id = tags.get(CLIENT_ID_TAG, "")
    if not re.fullmatch(r"[0-9a-fA-F-]{36}", client_id):
        raise SystemExit(f"gb300-heal: the head's tag {CLIENT_ID_TAG} must be a GUID (got {client_id!r})")
    credential = ManagedIdentityCredential(client_id=client_id)
    clients: dict[str, Any] = {}

    def client_for(subscription: str) -> Any:
        if subscription not in clients:
            # retry_total=0: the loop retries a refused call itself on a later tick (gb300.heal.loop.LATER), so a
            # tick never sleeps out ARM's Retry-After while holding the lock.
            clients[subscription] = ComputeManagementClient(
                credential, subscription, base_url=arm, credential_scopes=[f"{arm}/.default"], retry_total=0
            )
        return clients[subscription]

    return client_for, str(compute["subscriptionId"]), str(compute["resourceGroupName"])


# ---------------------------------------------------------------------------------------------------------
# The tick, status and resume


@contextmanager
def locked() -> Iterator[None]:
    """One tick, status change or resume at a time (``flock`` on the lock file)."""
    path = _path(LOCK)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_config() -> dict[str, Any]:
    config: dict[str, Any] = json.loads(_path(CONFIG).read_text(encoding="utf-8"))
    return config


def _sink(config: Mapping[str, Any], halts: list[Mapping[str, Any]]) -> Sink:
    write = file_sink(_path(DECISIONS))

    def sink(record: Mapping[str, Any]) -> None:
        if record["Decision"] == "halt":
            halts.append(dict(record))
        write(record)

    _path(DECISIONS).parent.mkdir(parents=True, exist_ok=True)
    return sink


def tick(
    now: float | None = None,
    *,
    run: Runner = run_local,
    clients: Callable[[str], tuple[Callable[[str], Any], str, str]] = compute_clients,
) -> dict[str, Any]:
    """One tick of the loop on the head: read the state, tick, write the state. Returns the new state."""
    now = time.time() if now is None else now
    config = read_config()
    policy = heal_policy.from_json(config["policy"])
    with locked():
        saved = heal_state.load(_path(STATE))
        client_for, subscription, group = clients(str(config["armEndpoint"]))
        racks = [RackRef(name, subscription, group) for name in config["racks"]]
        slurm = HealSlurm(run=run)
        view = SlurmView(slurm, run)
        halts: list[Mapping[str, Any]] = []
        feed = SlurmFeed(
            view,
            dict(saved.get("feed", {})),
            jobs=SlurmJobs(run),
            teardown=(policy.teardown_xids, policy.teardown_window_s),
        )
        nccl = SrunNccl(run, config["revalidate"], dict(saved.get("nccl", {})))
        loop = Remediator(
            policy=policy,
            racks=racks,
            azure=AzureRepairs(client_for, policy.ghr_api_version),
            slurm=slurm,
            probe=SlurmProbe(view),
            nccl=nccl,
            feed=feed,
            topology_port=SlurmTopology(view),
            sink=_sink(config, halts),
            cluster=str(config["cluster"]),
            nccl_env={str(k): str(v) for k, v in config["ncclEnv"].items()},
            block_size=int(config["blockSize"]),
            poll_s=float(config["pollSeconds"]),
        )
        listed_at = heal_state.open_loop(loop, saved, racks, now, float(config["relistSeconds"]))
        feed.skip = lambda host: host in loop.cases and loop.cases[host].state != "queued"
        feed.on_bad = lambda host, why: loop.record_bad(now, host, why)

        def snapshot() -> dict[str, Any]:
            extra = {
                "feed": feed.seen,
                "nccl": nccl.runs,
                "haltRecord": halts[-1] if halts else saved.get("haltRecord"),
                "resumed": saved.get("resumed"),
                "tickedAt": now,
            }
            return heal_state.dump(loop, listed_at=listed_at, extra=extra)

        # Intent before action: the loop saves the state (with the call it is about to make) before each Azure call.
        loop.persist = lambda: heal_state.save(_path(STATE), snapshot())
        loop.tick(now)
        doc = snapshot()
        heal_state.save(_path(STATE), doc)
        return doc


def status_lines(doc: Mapping[str, Any]) -> list[str]:
    """What ``gb300-heal status`` prints."""
    if "tickedAt" not in doc:
        return ["gb300-heal: no tick has run yet (gb300-heal.timer starts the loop a few minutes after boot)"]
    lines = [f"last tick: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(float(doc['tickedAt'])))}"]
    if doc.get("halted"):
        record = doc.get("haltRecord") or {}
        lines.append(f"HALTED since {record.get('TimeGenerated', '?')}: {record.get('Reason', 'no record')}")
        lines.append("repairs are stopped; find the cause, then run: gb300-heal resume --reason '<what you found>'")
    else:
        lines.append("running")
        if doc.get("resumed"):
            resumed = doc["resumed"]
            lines.append(f"resumed at {resumed.get('at')} by {resumed.get('by')}: {resumed.get('reason')}")
    cases = doc.get("cases", [])
    lines.append(f"nodes under repair: {len(cases)}")
    for case in cases:
        actions = ", ".join(case.get("actions", [])) or "-"
        lines.append(f"  {case['node']}: {case['state']} (actions: {actions}) - {case['reason']}")
    escalated = [c for c in doc.get("closed", []) if c.get("state") == "escalated"]
    if escalated:
        lines.append(f"escalated (drained, waiting for a person): {compress([c['node'] for c in escalated])}")
    return lines


def resume(reason: str, by: str, now: float | None = None) -> dict[str, Any]:
    """Let a halted loop go on: clear the halt and the fault window that caused it, and record who and why."""
    now = time.time() if now is None else now
    config = read_config()
    with locked():
        doc = heal_state.load(_path(STATE))
        if not doc.get("halted"):
            raise SystemExit("gb300-heal: the loop is not halted; nothing to resume")
        heal_state.mark_resumed(doc, now=now, by=by, reason=reason)
        heal_state.save(_path(STATE), doc)
        _sink(config, [])(
            decision_record(now=now, cluster=str(config["cluster"]), decision="resume", reason=f"{by}: {reason}")
        )
        return doc


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gb300-heal",
        description="The remediation loop on the Slurm head (docs/self-healing.md). The timer runs `tick`; "
        "people run `status` and `resume`.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("tick", help="run one tick of the loop (gb300-heal.timer does, every pollSeconds)")
    status = commands.add_parser("status", help="what the loop is doing, and why it halted")
    status.add_argument("--json", action="store_true", help="print the saved state as JSON")
    again = commands.add_parser("resume", help="let a halted loop repair again")
    again.add_argument("--reason", required=True, help="what the person found (goes to the decision record)")
    args = parser.parse_args(argv)
    if args.command == "tick":
        tick()
        return 0
    if args.command == "status":
        doc = heal_state.load(_path(STATE))
        print(json.dumps(doc, indent=1, sort_keys=True) if args.json else "\n".join(status_lines(doc)))
        return 0
    who = os.environ.get("SUDO_USER") or os.environ.get("USER") or str(os.getuid())
    doc = resume(args.reason, who)
    print("\n".join(status_lines(doc)))
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = [
    "JobContext",
    "SlurmFeed",
    "SlurmJobs",
    "SlurmProbe",
    "SlurmTopology",
    "SlurmView",
    "SrunNccl",
    "gate_events",
    "main",
    "tick",
]
