"""``gb300-heal``: the remediation loop on the Slurm head (``gb300:remediation.enabled``; docs/self-healing.md).

``gb300-heal tick`` runs one tick of the real :class:`~gb300.heal.loop.Remediator` against the head's own
channels, from ``gb300-heal.timer`` (a oneshot every ``pollSeconds``); ``gb300-heal status`` says what the loop is
doing and why it halted; ``gb300-heal resume`` lets a halted loop go on. Each tick is a fresh process: it takes
the lock, reads the state (:mod:`gb300.heal.state`), ticks once, and writes the state back atomically.

This module is the command line; the channels (:mod:`gb300.heal.ports`) on the head are its adapters:

* Slurm (:mod:`gb300.heal.head_slurm`): every node's record, node evidence from the gate's drain reasons, the
  gate's verdict for a recheck, fabric identities, and the rack NCCL run;
* the host (:mod:`gb300.heal.head_host`): the lock, the config, the state file, the decision log (JSON lines
  shipped to ``Gb300Health_CL``), and Azure: azure-mgmt-compute with ``ManagedIdentityCredential`` of the
  remediation identity, whose client id is the head's tag :data:`gb300.tags.HEAL_CLIENT_ID` read from IMDS;
  subscription and resource group are the head's own (IMDS).

The tick itself (open the loop from the saved state, tick, save) is :func:`gb300.heal.state.run_tick`, the same
function ``gb300 heal simulate`` runs every step.

Only the standard library, gb300's light modules and the Azure SDK are imported: the head's venv holds exactly
the packages of ``data/heal-python.yaml``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gb300.heal import head_host
from gb300.heal import policy as heal_policy
from gb300.heal import state as heal_state
from gb300.heal.azure_calls import AzureRepairs, RackRef
from gb300.heal.head_slurm import SlurmFeed, SlurmJobs, SlurmProbe, SlurmTopology, SlurmView, SrunNccl
from gb300.heal.loop import Remediator
from gb300.heal.ports import HealSlurm, decision_record
from gb300.slurm.client import Runner, run_local
from gb300.slurm.hostlist import compress


def tick(
    now: float | None = None, *, run: Runner = run_local, clients: head_host.Clients = head_host.compute_clients
) -> dict[str, Any]:
    """One tick of the loop on the head: read the state, tick, write the state. Returns the new state."""
    now = time.time() if now is None else now
    config = head_host.read_config()
    policy = heal_policy.from_json(config["policy"])
    with head_host.locked():
        store = head_host.state_store()
        saved = store.load()
        client_for, subscription, group = clients(str(config["armEndpoint"]))
        racks = [RackRef(name, subscription, group) for name in config["racks"]]
        slurm = HealSlurm(run=run)
        reread = config["slurmReread"]
        view = SlurmView(slurm, run, reread=(int(reread["attempts"]), float(reread["waitSeconds"])))
        teardown = (policy.teardown_xids, policy.teardown_window_s)
        feed = SlurmFeed(view, dict(saved.get("feed", {})), jobs=SlurmJobs(run), teardown=teardown)
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
            sink=head_host.decision_sink(),
            cluster=str(config["cluster"]),
            nccl_env={str(k): str(v) for k, v in config["ncclEnv"].items()},
            block_size=int(config["blockSize"]),
            poll_s=float(config["pollSeconds"]),
        )
        feed.skip = lambda host: host in loop.cases and loop.cases[host].state != "queued"
        feed.on_bad = lambda host, why: loop.record_bad(now, host, why)
        relist_s = float(config["relistSeconds"])
        return heal_state.run_tick(
            loop, store, saved, racks, now=now, relist_s=relist_s, extra=lambda: {"feed": feed.seen, "nccl": nccl.runs}
        )


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
    config = head_host.read_config()
    with head_host.locked():
        store = head_host.state_store()
        doc = store.load()
        if not doc.get("halted"):
            raise SystemExit("gb300-heal: the loop is not halted; nothing to resume")
        heal_state.mark_resumed(doc, now=now, by=by, reason=reason)
        store.save(doc)
        head_host.decision_sink()(
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
        doc = head_host.state_store().load()
        print(json.dumps(doc, indent=1, sort_keys=True) if args.json else "\n".join(status_lines(doc)))
        return 0
    who = os.environ.get("SUDO_USER") or os.environ.get("USER") or str(os.getuid())
    doc = resume(args.reason, who)
    print("\n".join(status_lines(doc)))
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["main", "resume", "status_lines", "tick"]
