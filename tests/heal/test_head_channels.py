"""The head's channels on their own: what a gate drain reason stands for, and the rack run's drains and
reservation (gb300.heal.head)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from gb300.facts import slurm_releases
from gb300.heal.head_slurm import JobContext, SlurmFeed, SlurmJobs, SlurmProbe, SlurmView, SrunNccl, gate_events
from gb300.heal.loop import PREFIX
from gb300.heal.ports import HealSlurm
from gb300.slurm.client import SlurmError, run_local

TESTED = ("24.11", "26.05")
"""The releases the real-Slurm tests run (tests/slurm/real): the in-memory controller answers as each does."""


@pytest.mark.parametrize(
    ("reason", "events"),
    [
        ("gb300: xid: XID in kernel log: 79@0000:01:00.0 (reboot or report the node)", [("xid", "79", None)]),
        (
            "gb300: xid: XID in kernel log: 48@0000:01:00.0 119@0000:02:00.0 48@0000:03:00.0",
            [("xid", "48", None), ("xid", "119", None)],
        ),
        ("gb300: gpus: 3 GPUs visible, expected 4", [("gpu-missing", None, None)]),
        ("gb300: row-remap-failure: DCGM_FI_DEV_ROW_REMAP_FAILURE=1 on GPU 2", [("ecc", "uncorrectable", None)]),
        ("gb300: fabric-health: GPU 3 Summary=Unhealthy", [("nvlink-down", None, None)]),
        ("gb300: ib-link-downed: mlx5_ib2 link_downed +3 in 10800s", [("check-failed", None, "ib-link-downed")]),
        (
            "gb300: mounts: /mnt/data not mounted (failed 3 runs in a row)",
            [("check-failed", None, "mounts")],
        ),
        (
            "gb300: boot check: gpus: 3 GPUs visible, expected 4; ib: mlx5_ib1 Down",
            [("gpu-missing", None, None), ("ib-link-down", None, None)],
        ),
    ],
)
def test_a_gate_reason_becomes_the_evidence_the_loop_judges(
    reason: str, events: list[tuple[str, str | None, str | None]]
) -> None:
    """Each failed check of a gate drain reason is one event of the kind the loop's rules judge."""
    got = gate_events("n1", reason, 100.0)
    assert [(e.kind, e.code, e.check) for e in got] == events
    assert {e.node for e in got} == {"n1"}


class Controller:
    """An in-memory slurmctld for the channels: node records, reservations, the command lines seen.

    It answers a resume as ``release`` does (data/slurm_releases.yaml): the old reason stays where that release
    keeps it, and the next ``blip_reads`` reads of the node show NOT_RESPONDING with boot time 0 (the node
    registering again). It counts reads where the real one counts about a second (tests/slurm/real measures it).
    """

    def __init__(self, nodes: dict[str, dict[str, Any]], release: str = "26.05", blip_reads: int = 0) -> None:
        self.nodes = nodes
        self.reservations: set[str] = set()
        self.calls: list[list[str]] = []
        self.keep_reason = slurm_releases.shows("reasonKeptAfterResume", release)
        self.blip_reads = blip_reads
        self._blip: dict[str, int] = {}

    def __call__(self, argv: Sequence[str]) -> str:
        args = list(argv)
        self.calls.append(args)
        if args[:3] == ["scontrol", "--json", "show"]:
            names = args[4].split(",") if len(args) > 4 else sorted(self.nodes)
            return json.dumps({"nodes": [self._record(n) for n in names if n in self.nodes]})
        if args[:2] == ["scontrol", "update"]:
            opts = dict(a.split("=", 1) for a in args[2:])
            for name in opts["nodename"].split(","):  # the test's names need no hostlist brackets
                node = self.nodes[name]
                node["state"] = [w for w in node["state"] if w != "DRAIN"]
                if opts.get("state") == "drain":
                    node["state"].append("DRAIN")
                    node["reason"] = opts["reason"]
                elif opts.get("state") == "resume":
                    self._blip[name] = self.blip_reads
                    node["reason"] = node.get("reason", "") if self.keep_reason else ""
            return ""
        if args[:3] == ["scontrol", "create", "reservation"]:
            self.reservations.add(args[3].split("=", 1)[1])
            return ""
        if args[:2] == ["scontrol", "delete"]:
            self.reservations.discard(args[2].split("=", 1)[1])
            return ""
        if args[0] == "systemd-run":
            return ""
        if args[:2] == ["systemctl", "is-active"]:
            raise SlurmError("inactive")
        raise AssertionError(args)

    def _record(self, name: str) -> dict[str, Any]:
        record = {"name": name, "boot_time": 1000, **self.nodes[name]}
        if self._blip.get(name, 0) > 0:
            self._blip[name] -= 1
            record.update(state=[*record["state"], "NOT_RESPONDING"], boot_time=0)
        return record


def test_the_rack_run_lifts_only_the_loops_drains_and_puts_them_back(tmp_path: Any, monkeypatch: Any) -> None:
    """For the NCCL run the loop's own drain is lifted inside a root-only maintenance reservation; afterwards it
    is put back with its reason, while a node someone else drained during the run keeps that drain, and the
    reservation is deleted."""
    monkeypatch.setenv("GB300_ROOT", str(tmp_path))
    ours = f"{PREFIX} XID 79"
    slurm = Controller(
        {
            "a": {"state": ["IDLE", "DRAIN"], "reason": ours},
            "b": {"state": ["IDLE", "DRAIN"], "reason": ours},
            "c": {"state": ["IDLE"], "reason": ""},
        }
    )
    runner = SrunNccl(slurm, {"timeoutSeconds": 1800, "bytes": 1024, "ncclTests": "/opt/nccl-tests/build", "env": {}})
    handle = runner.submit(["a", "b", "c"])
    assert slurm.reservations == {handle}
    assert [slurm.nodes[n]["reason"] for n in "abc"] == ["", "", ""]
    slurm.nodes["b"].update(state=["IDLE", "DRAIN"], reason="gb300-maintenance: Freeze 1234")  # meanwhile
    (tmp_path / "var/lib/gb300/heal/nccl" / f"{handle}.out").write_text("# nccl-tests output\n")
    assert runner.collect(handle) == "# nccl-tests output\n"
    assert slurm.nodes["a"]["reason"] == ours
    assert slurm.nodes["b"]["reason"] == "gb300-maintenance: Freeze 1234"
    assert slurm.nodes["c"]["reason"] == ""
    assert slurm.reservations == set()


@pytest.mark.parametrize("release", TESTED)
def test_the_rack_run_drains_its_nodes_again_whatever_reason_the_resume_left(
    release: str, tmp_path: Any, monkeypatch: Any
) -> None:
    """After the NCCL run the lifted node is drained again even where Slurm kept its old reason through the resume
    (24.11): a reason on a node that is not drained is no drain."""
    monkeypatch.setenv("GB300_ROOT", str(tmp_path))
    ours = f"{PREFIX} XID 79"
    slurm = Controller({"a": {"state": ["IDLE", "DRAIN"], "reason": ours}}, release)
    runner = SrunNccl(slurm, {"timeoutSeconds": 1800, "bytes": 1024, "ncclTests": "/opt/nccl-tests/build", "env": {}})
    handle = runner.submit(["a"])
    assert "DRAIN" not in slurm.nodes["a"]["state"]
    (tmp_path / "var/lib/gb300/heal/nccl" / f"{handle}.out").write_text("# nccl-tests output\n")
    assert runner.collect(handle) is not None
    assert slurm.nodes["a"] == {"state": ["IDLE", "DRAIN"], "reason": ours}


@pytest.mark.parametrize("release", TESTED)
def test_a_resumed_node_is_not_read_as_failing_its_gate_or_drained_by_someone(release: str) -> None:
    """A node resumed after a gate drain, and one resumed after a person's drain, read as in service: no gate
    evidence, a passing gate verdict, no drain reason for the loop, whatever reason the release left on them."""
    slurm = Controller(
        {
            "g": {"state": ["IDLE", "DRAIN"], "reason": "gb300: gpus: 3 GPUs visible, expected 4"},
            "p": {"state": ["IDLE", "DRAIN"], "reason": "maintenance by alice"},
        },
        release,
    )
    HealSlurm(run=slurm).resume(["g", "p"])
    view = SlurmView(HealSlurm(run=slurm), slurm)
    assert SlurmFeed(view).poll(1.0) == []
    assert SlurmProbe(view).gate_result("g") == "pass"
    assert HealSlurm(run=slurm).reason("p") == ""
    kept = slurm_releases.shows("reasonKeptAfterResume", release)
    assert bool(slurm.nodes["g"]["reason"]) == kept  # what the release really leaves on the record


@pytest.mark.parametrize("release", TESTED)
def test_a_node_read_just_after_its_resume_is_not_reported_unreachable(release: str) -> None:
    """A node read while it registers again after a resume (NOT_RESPONDING, boot time 0, about a second) is read
    again before the feed decides: no unreachable event; one that stays so after the bounded re-reads is reported."""
    slurm = Controller({"a": {"state": ["IDLE", "DRAIN"], "reason": "gb300: gpus: 3 GPUs visible"}}, release, 1)
    HealSlurm(run=slurm).resume(["a"])
    waited: list[float] = []
    view = SlurmView(HealSlurm(run=slurm), slurm, reread=(3, 1.0), sleep=waited.append)
    assert SlurmFeed(view).poll(1.0) == []
    assert waited == [1.0]

    stuck = Controller({"a": {"state": ["IDLE", "DRAIN"], "reason": ""}}, release, 10)
    HealSlurm(run=stuck).resume(["a"])
    view = SlurmView(HealSlurm(run=stuck), stuck, reread=(3, 1.0), sleep=lambda _s: None)
    assert [(e.node, e.kind) for e in SlurmFeed(view).poll(1.0)] == [("a", "unreachable")]


def test_the_feed_reports_a_gate_reason_once_and_leaves_other_owners_alone() -> None:
    """A gate reason is reported once, again only when it changes; a down node drained by Scheduled Events is not
    reported unreachable; a down node nobody drained is, once."""
    slurm = Controller(
        {
            "a": {"state": ["IDLE", "DRAIN"], "reason": "gb300: gpus: 3 GPUs visible, expected 4"},
            "b": {"state": ["DOWN", "DRAIN"], "reason": "gb300-maintenance: Reboot 1"},
            "c": {"state": ["DOWN", "NOT_RESPONDING"], "reason": ""},
        }
    )
    view = SlurmView(HealSlurm(run=slurm), slurm)
    feed = SlurmFeed(view)
    assert sorted((e.node, e.kind) for e in feed.poll(1.0)) == [("a", "gpu-missing"), ("c", "unreachable")]
    view.forget()
    assert feed.poll(2.0) == []
    slurm.nodes["a"]["reason"] = "gb300: gpus: 2 GPUs visible, expected 4"
    view.forget()
    assert [(e.node, e.kind) for e in feed.poll(3.0)] == [("a", "gpu-missing")]


def _job(job_id: int, nodes: str, state: str, start: float, end: float | None) -> dict[str, Any]:
    """One record of `scontrol --json show job` as Slurm's data_parser writes it (times as set/infinite/number)."""
    return {
        "job_id": job_id,
        "nodes": nodes,
        "job_state": [state],
        "start_time": {"set": True, "infinite": False, "number": int(start)},
        "end_time": {"set": end is not None, "infinite": False, "number": int(end or 0)},
    }


@pytest.mark.parametrize(
    ("jobs", "host", "expected"),
    [
        ([_job(1, "n[01-04]", "COMPLETED", 0, 900), _job(2, "n[03-05]", "FAILED", 100, 950)], "n03", ("2", 950.0)),
        ([_job(1, "n[01-04]", "FAILED", 0, 950), _job(2, "n[03-05]", "RUNNING", 960, 5000)], "n03", ("2", None)),
        ([_job(1, "n[01-04]", "COMPLETED", 0, 100)], "n03", None),  # ended longer ago than the horizon
        ([_job(1, "n[01-04]", "RUNNING", 2000, 9000)], "n03", None),  # starts after the evidence
        ([_job(1, "n[01-02]", "RUNNING", 0, 9000)], "n03", None),  # another node's job
    ],
    ids=["last-ended", "running-first", "too-old", "not-started", "elsewhere"],
)
def test_the_job_context_is_the_nodes_running_or_last_ended_job(
    jobs: list[dict[str, Any]], host: str, expected: tuple[str, float | None] | None
) -> None:
    """The job attached to a node's evidence is the one running there, else the one that ended there last within
    the horizon (the teardown window); jobs of other nodes, or not started yet, are not."""
    calls: list[list[str]] = []

    def run(argv: Sequence[str]) -> str:
        calls.append(list(argv))
        return json.dumps({"jobs": jobs})

    found = SlurmJobs(run).last_on(host, 1000.0, 300.0)
    assert (None if found is None else (found.job, found.ended)) == expected
    assert calls == [["scontrol", "--json", "show", "job"]]


def test_a_gate_xid_carries_its_job_and_a_teardown_code_after_the_end_is_marked() -> None:
    """An XID event carries the node's job; XID 45 within the teardown window after that job's end is marked
    job-teardown, XID 79 is not, and neither is XID 45 while the job still runs."""
    reason = "gb300: xid: XID in kernel log: 45@0000:01:00.0 79@0000:02:00.0"
    teardown = (frozenset({45}), 300.0)
    ended = gate_events("n1", reason, 1000.0, job=JobContext("7", 950.0), teardown=teardown)
    assert [(e.code, e.job, e.context) for e in ended] == [("45", "7", "job-teardown"), ("79", "7", None)]
    running = gate_events("n1", reason, 1000.0, job=JobContext("7", None), teardown=teardown)
    assert [(e.code, e.context) for e in running] == [("45", None), ("79", None)]


def test_no_job_list_means_no_job_context() -> None:
    """When `scontrol --json show job` fails, the evidence is judged as the node's own (no job attached)."""

    def run(argv: Sequence[str]) -> str:
        raise SlurmError("slurm_load_jobs error: Unable to contact slurm controller")

    assert SlurmJobs(run).last_on("n1", 1000.0, 300.0) is None


def test_a_comment_cut_inside_a_utf8_character_does_not_break_the_read() -> None:
    """scontrol prints a node comment cut inside a UTF-8 character (a node wrote its comment to the byte limit):
    the read gives the rest of the output, the broken character replaced, instead of failing every tick."""
    out = run_local(["printf", '{"nodes": [{"name": "n1", "comment": "gb300-gate: pass \\342\\202"}]}'])
    assert json.loads(out)["nodes"][0]["name"] == "n1"
    assert "\ufffd" in out


def test_an_unreadable_record_is_skipped_and_reported() -> None:
    """A record the feed cannot read (here a state that is not text) is skipped and reported; the others are read."""
    doc = {
        "nodes": [
            {"name": "n1", "state": [{"bad": 1}], "reason": "gb300: gpus: 3 GPUs visible"},
            {"name": "n2", "state": ["IDLE", "DRAIN"], "reason": "gb300: gpus: 3 GPUs visible"},
        ]
    }
    view = SlurmView(HealSlurm(run=lambda argv: json.dumps(doc)), lambda argv: json.dumps(doc))
    bad: list[tuple[str, str]] = []
    feed = SlurmFeed(view, on_bad=lambda host, why: bad.append((host, why)))
    feed.view.states = lambda host: (_ for _ in ()).throw(ValueError("unreadable")) if host == "n1" else frozenset()  # type: ignore[method-assign]
    events = feed.poll(100.0)
    assert [e.node for e in events] == ["n2"]
    assert [h for h, _ in bad] == ["n1"]


def test_a_persons_action_in_the_reason_is_a_request() -> None:
    """`scontrol update ... reason="Action:Replace"` by a person (as HyperPod reads it) is one request event for
    the loop, once; the loop's own reasons and the gate's are not requests."""
    doc = {
        "nodes": [
            {"name": "n1", "state": ["IDLE", "DRAIN"], "reason": "Action:Replace bad HBM suspected"},
            {"name": "n2", "state": ["IDLE", "DRAIN"], "reason": "Action:Reboot"},
            {"name": "n3", "state": ["IDLE", "DRAIN"], "reason": "gb300-heal: Action:Replace asked"},
        ]
    }
    view = SlurmView(HealSlurm(run=lambda argv: json.dumps(doc)), lambda argv: json.dumps(doc))
    feed = SlurmFeed(view)
    events = feed.poll(100.0)
    assert [(e.node, e.kind, e.code) for e in events] == [("n1", "request", "replace"), ("n2", "request", "reboot")]
    assert feed.poll(160.0) == []
