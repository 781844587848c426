"""What ``gb300 heal simulate`` tells an operator (docs/self-healing.md#simulating-a-scenario): first what happened
and why (a halt and its reason, Azure's throttling, refusals and failed operations), then per node the Azure calls
and their answers and the case's states with their times, then the Guest Health Reports (node, host, category).

Read from the decision records and the simulated Azure's log of calls, so what is shown is what the head would
have sent to Azure Monitor and what ARM answered; nothing here is read from the scenario's truth.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from gb300.heal.case import LATER
from gb300.heal.fake_arm import CODES
from gb300.slurm.hostlist import compress

STATES = {
    "suspect": "queued",
    "drain": "draining",
    "reboot": "reboot",
    "reimage": "reimage",
    "replace": "replace",
    "revalidate": "revalidating",
    "bisect": "bisecting",
    "capacity": "waiting for capacity",
    "azure-failed": "operation failed",
    "returned": "returned",
    "escalated": "escalated",
    "held": "held",
    "dismissed": "dismissed",
}
"""Decisions that move a case, and the state each shows in the summary."""


def seconds(stamp: str) -> float:
    """A record's ``TimeGenerated`` as simulated seconds (the simulation's clock starts at the epoch)."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def clock(at: float) -> str:
    """Simulated seconds as ``[<days>d ]HH:MM``."""
    days, rest = divmod(int(at), 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}"
    return f"{days}d {text}" if days else text


def states(records: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Per node, its cases' states with their times (``00:10 queued``), consecutive repeats folded."""
    out: dict[str, list[str]] = {}
    for record in records:
        state = STATES.get(str(record["Decision"]))
        node = str(record["Node"])
        if state is None or not node or "," in node or "[" in node:
            continue
        seen = out.setdefault(node, [])
        entry = f"{clock(seconds(str(record['TimeGenerated'])))} {state}"
        if not seen or seen[-1].split(" ", 1)[1] != state:
            seen.append(entry)
    return out


def azure(log: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Per node, each repair call and report and Azure's answer (``02:00 redeploy 409 AllocationFailed``)."""
    out: dict[str, list[str]] = {}
    for entry in log:
        if not entry.get("node"):
            continue
        code = f" {entry['code']}" if entry.get("code") else ""
        out.setdefault(str(entry["node"]), []).append(
            f"{clock(float(entry['at']))} {entry['call']} {entry['answer']}{code}"
        )
    return out


def reports(bodies: Iterable[Mapping[str, Any]], node_of: Mapping[str, str]) -> list[dict[str, str]]:
    """The Guest Health Reports filed, as ``{node, host, category}`` (``node_of``: the VM's ARM id to its node)."""
    out = []
    for body in bodies:
        props = body.get("properties") or {}
        resource = str(props.get("impactedResourceId") or "")
        host = str((props.get("additionalProperties") or {}).get("PhysicalHostName") or "")
        out.append(
            {"node": node_of.get(resource, resource), "host": host, "category": str(props.get("impactCategory"))}
        )
    return out


def headline(records: Sequence[Mapping[str, Any]], log: Sequence[Mapping[str, Any]], halted: bool) -> list[str]:
    """What happened and why, in three lines: the halt (with the rail's reason) or not; what became of the cases;
    what Azure answered."""
    halts = [str(r["Reason"]) for r in records if r["Decision"] == "halt"]
    if halted:
        first = f"halted: {halts[-1]}" if halts else "halted"
    elif halts:
        first = f"running: halted {len(halts)} time(s), resumed by a person (last: {halts[-1]})"
    else:
        first = "running: never halted"
    ends = {d: sum(1 for r in records if r["Decision"] == d) for d in ("returned", "escalated", "held", "dismissed")}
    incidents = len({r["Rack"] for r in records if r["Decision"] == "rack-incident"})
    cases = (
        f"cases: {ends['returned']} returned to service, {ends['escalated']} escalated to a person, {ends['held']} held"
        f", {ends['dismissed']} dismissed; {incidents} rack incident(s)"
    )
    calls = [e for e in log if e["call"] != "report"]
    later = [e for e in calls if _generic(e) and (e["answer"] in LATER or e["answer"] >= 500)]
    refused = [e for e in calls if isinstance(e["answer"], int) and e["answer"] >= 400 and e not in later]
    failed = [e for e in calls if e["answer"] == "failed"]
    told = sum(1 for r in records if r["Decision"] == "capacity")
    azure_line = (
        f"azure: {len(calls) - len(failed)} repair call(s), throttled or busy {len(later)} time(s), refused "
        f"{len(refused)}{_codes(refused)}, {len(failed)} accepted operation(s) failed later{_codes(failed)}, "
        f"{told} capacity alert(s) to a person"
    )
    return [first, cases, azure_line]


def _generic(entry: Mapping[str, Any]) -> bool:
    """Whether an answer carries only its status's generic code (``TooManyRequests``...), not a reason of its own."""
    answer = entry["answer"]
    return isinstance(answer, int) and entry.get("code") in (None, CODES.get(answer))


def _codes(entries: Sequence[Mapping[str, Any]]) -> str:
    """`` (AllocationFailed x10, SkuNotAvailable x1)``: the ARM codes of ``entries`` with their counts."""
    counts = Counter(str(e["code"]) for e in entries if e.get("code"))
    return f" ({', '.join(f'{c} x{n}' for c, n in counts.most_common())})" if counts else ""


def lines(report: Mapping[str, Any]) -> list[str]:
    """The human summary of a report (:meth:`gb300.heal.sim.Result.report`)."""
    out = list(report["summary"])
    acted = [n for n in report["nodes"] if n["actions"] or n["azure"]]
    waiting: dict[str, list[str]] = {}
    for node in report["nodes"]:
        if node not in acted and node["case"]:
            waiting.setdefault(str(node["case"]), []).append(str(node["node"]))
    quiet = len(report["nodes"]) - len(acted) - sum(len(v) for v in waiting.values())
    out.append(
        f"nodes the loop acted on: {len(acted)}" + (f" ({quiet} more reported, left in service)" if quiet else "")
    )
    for node in acted:
        truth = node["truth"] or "none given"
        out.append(f"  {node['node']}: {node['final_state']}, case {node['case'] or '-'} (truth: {truth})")
        out.append(f"    actions: {' -> '.join(node['actions']) or 'none'}")
        if node["states"]:
            out.append(f"    states: {', '.join(node['states'])}")
        if node["azure"]:
            out.append(f"    azure: {', '.join(node['azure'])}")
    out += [f"cases with no action, {state} ({len(hosts)}): {compress(hosts)}" for state, hosts in waiting.items()]
    out.append(f"guest health reports: {len(report['reports'])}")
    out += [f"  {r['node']} host {r['host'] or '-'} {r['category']}" for r in report["reports"]]
    return out


__all__ = ["STATES", "azure", "clock", "headline", "lines", "reports", "seconds", "states"]
