"""The loop's memory between ticks on the head: one JSON file, written atomically (docs/self-healing.md#on-the-head).

The head runs :class:`~gb300.heal.loop.Remediator` once per timer tick in a fresh process, so everything the loop
knows lives here between ticks: the nodes under repair and where each is on the ladder, the evidence the judge
holds (history, what waits for a recheck, rack incidents), the fault times the halt rail counts, whether the loop
is halted and why, and the racks' VMs as Azure last listed them. :func:`save` writes a temporary file beside the
target, flushes it to disk and renames it over the old one, so a crash mid-write leaves the previous state.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gb300.errors import DataError
from gb300.heal.azure_calls import Instance, RackRef
from gb300.heal.loop import Remediator
from gb300.heal.rails import resumed

VERSION = 1


def dump(loop: Remediator, *, listed_at: float, extra: Mapping[str, Any]) -> dict[str, Any]:
    """Everything :func:`restore` needs, as JSON; ``extra`` holds the service's own fields (halt record...). The
    ladder, the rails and the judge each write their own part."""
    horizon = max([r.window_s for r in loop.policy.corroborate.values()] + [loop.policy.halt_window_s])
    return {
        "version": VERSION,
        "listedAt": listed_at,
        "relist": loop.unknown_hosts,
        "racksListed": listing_doc(loop.instances.values()),
        **loop.rail.to_doc(horizon),
        **loop.cases_doc(),
        "judge": loop.judge.to_doc(horizon),
        **extra,
    }


def listing_doc(instances: Iterable[Instance]) -> list[dict[str, Any]]:
    """The racks' VMs, one entry per rack and scale set: the ARM id's prefix once, then each VM as ``[host,
    instanceId, vmId]`` (a fourth element: an ARM id that is not the prefix and the instance id). Read and written
    every tick, so a listing of 1,152 VMs is a third of the size written VM by VM."""
    groups: dict[tuple[str, str], list[list[str]]] = {}
    for i in instances:
        prefix, _, tail = i.resource_id.rpartition("/")
        vm = [i.host, i.instance_id, i.vm_id] + ([] if tail == i.instance_id else [i.resource_id])
        groups.setdefault((i.rack.name, prefix), []).append(vm)
    return [{"rack": rack, "prefix": prefix, "vms": vms} for (rack, prefix), vms in groups.items()]


def instances_of(doc: Mapping[str, Any], racks: Sequence[RackRef]) -> dict[str, Instance]:
    """The racks' VMs as the state recorded them (only racks still in ``racks``); a state written VM by VM
    (``instances``, before :func:`listing_doc`) is read too."""
    by_name = {r.name: r for r in racks}
    out = {
        str(i["host"]): Instance(
            str(i["host"]), by_name[str(i["rack"])], str(i["instanceId"]), str(i["resourceId"]), str(i.get("vmId", ""))
        )
        for i in doc.get("instances", [])
        if str(i["rack"]) in by_name
    }
    for group in doc.get("racksListed", []):
        rack, prefix = by_name.get(str(group["rack"])), str(group["prefix"])
        if rack is None:
            continue
        for host, instance_id, vm_id, *resource in group["vms"]:
            out[host] = Instance(host, rack, instance_id, resource[0] if resource else f"{prefix}/{instance_id}", vm_id)
    return out


def restore(loop: Remediator, doc: Mapping[str, Any], racks: Sequence[RackRef]) -> None:
    """Put a saved state back into a started loop (its instances set, by :meth:`Remediator.start` or
    :meth:`Remediator.adopt`): the rails, the ladder's cases and the judge each restore their own part."""
    if doc.get("version") != VERSION:
        raise DataError(f"remediation state: version {doc.get('version')!r} is not {VERSION}")
    loop.rail.restore(doc)
    loop.restore_cases(doc, racks)
    loop.judge.restore(doc.get("judge", {}))


def open_loop(
    loop: Remediator, saved: Mapping[str, Any], racks: Sequence[RackRef], now: float, relist_s: float
) -> float:
    """A fresh loop as the saved state left it: the racks' VMs from the saved listing while it is younger than
    ``relist_s`` or while no case is open (else the racks of the open cases listed again, every rack when a node
    the listing lacks reported; kept when Azure refuses the list), then the saved
    cases, evidence and rails. Returns when the racks were listed. The head and ``gb300 heal simulate`` both open
    every tick this way."""
    listed_at = float(saved.get("listedAt", 0.0))
    known = instances_of(saved, racks)
    complete = {i.rack.name for i in known.values()} == {r.name for r in racks}
    # Listed again only when the listing is older than relist_s and a repair may need Azure's current view (a case
    # is open), or a node the listing lacks reported (``relist``): a quiet fleet costs no list calls.
    fresh = now - listed_at < relist_s or not saved.get("cases")
    # A stale listing with repairs under way: only the racks of the open cases are listed again (a repair needs
    # Azure's current view of its own rack; 64 racks listed every relist_s for one open case is not needed).
    busy = {str(c.get("rack", "")) for c in saved.get("cases", [])}
    try:
        if known and complete and fresh and not saved.get("relist"):
            loop.adopt(known)
        elif known and complete and not saved.get("relist"):
            loop.relist(known, [r for r in racks if r.name in busy], now)
            listed_at = now
        else:
            loop.start(now)
            listed_at = now
    except Exception:
        if not known:
            raise
        loop.adopt(known)  # Azure refused the list (throttled...): the last listing still holds
    if "cases" in saved:
        restore(loop, saved, racks)
    return listed_at


def mark_resumed(doc: dict[str, Any], *, now: float, by: str, reason: str) -> None:
    """A person resumed the halted loop: the halt and its windows are cleared (:func:`gb300.heal.rails.resumed`),
    and the next tick judges the queued cases again on the evidence current then (:meth:`Remediator._rejudge`)."""
    resumed(doc)
    doc["resumed"] = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)), "by": by, "reason": reason}


def encode(doc: Mapping[str, Any]) -> str:
    """The state file's text: compact, so the json module's C encoder writes it (``indent`` falls back to the pure
    Python one, which took most of a simulated 64-rack day); ``gb300-heal status --json`` prints it indented."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n"


def decode(text: str, where: object = "remediation state") -> dict[str, Any]:
    """A state file's text read back; anything but a JSON object is refused."""
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise DataError(f"{where}: not a JSON object")
    return doc


def load(path: Path) -> dict[str, Any]:
    """The saved state, or an empty one when there is none yet."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {"version": VERSION}
    return decode(text, path)


def save(path: Path, doc: Mapping[str, Any]) -> None:
    """Write ``doc`` to ``path`` atomically: a temporary file in the same directory, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        handle.write(encode(doc))
        handle.flush()
        os.fsync(handle.fileno())
    temporary.chmod(0o600)
    temporary.replace(path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


class Store(Protocol):
    """Where the state lives between ticks."""

    def load(self) -> dict[str, Any]: ...

    def save(self, doc: Mapping[str, Any]) -> None: ...


@dataclass
class FileStore:
    """The head's state file (:func:`load`, :func:`save`)."""

    path: Path

    def load(self) -> dict[str, Any]:
        return load(self.path)

    def save(self, doc: Mapping[str, Any]) -> None:
        save(self.path, doc)


@dataclass
class MemoryStore:
    """The state file's text kept in memory (``gb300 heal simulate``): encoded and decoded as on the head, so every
    tick restores from what the head's file would hold; only the disk (atomic rename, fsync) is left out."""

    text: str | None = None

    def load(self) -> dict[str, Any]:
        return {"version": VERSION} if self.text is None else decode(self.text)

    def save(self, doc: Mapping[str, Any]) -> None:
        self.text = encode(doc)


def run_tick(
    loop: Remediator,
    store: Store,
    saved: Mapping[str, Any],
    racks: Sequence[RackRef],
    *,
    now: float,
    relist_s: float,
    extra: Callable[[], Mapping[str, Any]] = dict,
    opened: Callable[[Remediator], None] | None = None,
) -> dict[str, Any]:
    """One tick as ``gb300-heal tick`` runs it on the head and ``gb300 heal simulate`` runs it each step: a fresh
    ``loop`` opened from ``saved`` (:func:`open_loop`, then ``opened``), the state saved before each Azure call
    (intent before action), before the tick's first Slurm write and after the tick, with the last halt record, the
    last resume and ``extra()`` (the head's feed and NCCL runs). Returns the state saved."""
    listed_at = open_loop(loop, saved, racks, now, relist_s)
    if opened is not None:
        opened(loop)
    halts: list[Mapping[str, Any]] = []
    sink = loop.sink

    def recording(record: Mapping[str, Any]) -> None:
        if record["Decision"] == "halt":
            halts.append(dict(record))
        sink(record)

    def snapshot() -> dict[str, Any]:
        kept = {"haltRecord": halts[-1] if halts else saved.get("haltRecord"), "resumed": saved.get("resumed")}
        return dump(loop, listed_at=listed_at, extra={**kept, **extra(), "tickedAt": now})

    loop.sink = recording
    loop.persist = lambda: store.save(snapshot())
    loop.slurm.before_write = loop.persist  # the tick's first Slurm write: what it belongs to is saved first
    loop.tick(now)
    doc = snapshot()
    store.save(doc)
    return doc
