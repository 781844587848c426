"""The double's own record of what exists in its Azure, the faults it is told to inject, and the calls it served.

Everything lives as JSON in one directory named by ``GB300_AZURE_DOUBLE_DIR`` (:data:`DIR_ENV`), so a test stages
what a real subscription would hold before or between engine runs, and reads back what the engine did:

* ``resources.json``: ``{"<ARM id>": {"type": <token>, "urn": ..., "inputs": {...}, "outputs": {...}}}``. Change a
  recorded output to stage drift (``pulumi refresh`` reads it back), delete an entry to stage a deletion outside
  Pulumi, add one to stage a resource that exists before ``pulumi import``.
* ``faults.json``: a list of :class:`Fault` objects (as JSON); each answers the next ``times`` matching calls the way
  ARM does, then is spent.
* ``calls.jsonl``: one line per call served (method, type, URN, id, and what a fault did to it).

The engine may start several plugin processes at once (one per provider); every read-modify-write holds an
exclusive ``flock`` on ``lock``, so they see one record. A process keeps the record it last read or wrote and parses
the file again only when its text differs (another process wrote it): the 64-rack reference stack's record is
megabytes, and parsing it on every call of an ``up`` cost seconds. The files are written one resource to a line
with the C JSON encoder (``indent`` would take Python's own encoder, fifty times slower: most of a 64-rack ``up``).
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DIR_ENV = "GB300_AZURE_DOUBLE_DIR"
RESOURCES = "resources.json"
FAULTS = "faults.json"
CALLS = "calls.jsonl"


@dataclass(frozen=True)
class Fault:
    """A call ARM answers with an error.

    ``kind``: ``conflict`` (409: another operation holds the resource; azure-core never retries it), ``throttled``
    (429 with ``Retry-After: retry_after`` seconds), or ``lro-failed`` (the PUT is accepted and its long-running
    operation ends with ``provisioningState: Failed`` and ``code``). ``method`` is the gRPC method (``Create``,
    ``Update``, ``Delete``, ``Read``); ``match`` a substring of the URN that picks the resource ("" for any).
    """

    method: str
    kind: str
    match: str = ""
    times: int = 1
    code: str = ""
    message: str = ""
    retry_after: float = 1.0
    extra: dict[str, Any] = field(default_factory=dict)


def directory() -> Path:
    """The double's directory, from :data:`DIR_ENV` (made when missing)."""
    value = os.environ.get(DIR_ENV)
    if not value:
        raise RuntimeError(f"{DIR_ENV} is not set: the azure-native double keeps its record there")
    path = Path(value)
    path.mkdir(parents=True, exist_ok=True)
    return path


class Ledger:
    """The record, the faults and the call log of one double directory."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else directory()
        self.root.mkdir(parents=True, exist_ok=True)
        self._cache: dict[str, tuple[str, Any]] = {}

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with (self.root / "lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _read(self, name: str, empty: Any) -> Any:
        """The file's content, parsed again only when it changed since this process last read or wrote it (callers
        hold the lock and must not change what they get without writing it back)."""
        path = self.root / name
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return empty
        cached = self._cache.get(name)
        if cached is not None and cached[0] == text:
            return cached[1]
        value = json.loads(text)
        self._cache[name] = (text, value)
        return value

    def _write(self, name: str, value: Any) -> None:
        path = self.root / name
        tmp = path.with_suffix(".tmp")
        text = _dumps(value)
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        self._cache[name] = (text, value)

    # --- what exists ---

    def resources(self) -> dict[str, dict[str, Any]]:
        """Every recorded resource by ARM id (a copy: change it through :meth:`put`)."""
        with self._locked():
            found: dict[str, dict[str, Any]] = copy.deepcopy(self._read(RESOURCES, {}))
            return found

    def get(self, arm_id: str) -> dict[str, Any] | None:
        """The recorded resource with this id (ARM ids compare without case), or None."""
        wanted = arm_id.lower()
        with self._locked():
            found = next((v for k, v in self._read(RESOURCES, {}).items() if k.lower() == wanted), None)
            return copy.deepcopy(found)

    def put(self, arm_id: str, entry: dict[str, Any]) -> None:
        """Record (or replace) a resource."""
        with self._locked():
            found = self._read(RESOURCES, {})
            found = {k: v for k, v in found.items() if k.lower() != arm_id.lower()}
            found[arm_id] = copy.deepcopy(entry)
            self._write(RESOURCES, found)

    def remove(self, arm_id: str) -> bool:
        """Forget a resource; whether it was recorded."""
        with self._locked():
            found = self._read(RESOURCES, {})
            kept = {k: v for k, v in found.items() if k.lower() != arm_id.lower()}
            self._write(RESOURCES, kept)
            return len(kept) != len(found)

    def find(self, urn_suffix: str) -> tuple[str, dict[str, Any]]:
        """The one recorded resource whose URN ends with ``urn_suffix`` (``::dev-rg``), for tests staging changes."""
        hits = [(k, v) for k, v in self.resources().items() if str(v.get("urn", "")).endswith(urn_suffix)]
        if len(hits) != 1:
            raise KeyError(f"{len(hits)} recorded resources end with {urn_suffix!r}")
        return hits[0]

    # --- faults ---

    def add_fault(self, fault: Fault) -> None:
        """Queue a fault."""
        with self._locked():
            faults = self._read(FAULTS, [])
            faults.append(asdict(fault))
            self._write(FAULTS, faults)

    def take_fault(self, method: str, urn: str) -> Fault | None:
        """The first queued fault for this call, spending one of its ``times``; None when none matches."""
        with self._locked():
            faults = self._read(FAULTS, [])
            for i, raw in enumerate(faults):
                if raw["method"] == method and raw.get("match", "") in urn:
                    fault = Fault(**raw)
                    left = [*faults[:i], *faults[i + 1 :]]
                    if fault.times > 1:
                        left.insert(i, {**raw, "times": fault.times - 1})
                    self._write(FAULTS, left)
                    return fault
            return None

    # --- calls ---

    def log(self, **entry: Any) -> None:
        """Append one served call to the call log."""
        with self._locked(), (self.root / CALLS).open("a", encoding="utf-8") as out:
            out.write(json.dumps(entry, sort_keys=True) + "\n")

    def calls(self) -> list[dict[str, Any]]:
        """Every call served so far, in order."""
        path = self.root / CALLS
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _dumps(value: Any) -> str:
    """JSON with one entry of a top-level map or list to a line (readable, and the C encoder's speed)."""
    if isinstance(value, dict) and value:
        lines = (f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(value.items()))
        return "{\n" + ",\n".join(lines) + "\n}\n"
    if isinstance(value, list) and value:
        return "[\n" + ",\n".join(json.dumps(v, sort_keys=True) for v in value) + "\n]\n"
    return json.dumps(value) + "\n"
