"""What the remediation loop talks to, each a narrow text or HTTP channel (docs/self-healing.md#where-it-runs).

The loop sees the world only through these: Slurm commands (:class:`HealSlurm`, ``scontrol``/``squeue`` text),
Azure over HTTP (:class:`gb300.heal.azure_calls.AzureRepairs`), the node's gate result and KVP pool
(:class:`NodeProbe`), nccl-tests output (:class:`NcclRunner`), node events (:class:`EventFeed`), fabric identity
lines and topology.conf (:class:`TopologyPort`), and decision records (:data:`Sink`). A simulator implements the
same channels; nothing in them carries what is really wrong with a node.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from gb300.heal.evidence import Event, printable
from gb300.node import paths as node_paths
from gb300.slurm.client import Slurm
from gb300.slurm.hostlist import compress

Sink = Callable[[Mapping[str, Any]], None]
"""Receives one decision record (:func:`decision_record`)."""

DECISION_LOG = Path(node_paths.HEAL_DECISION_LOG)
"""Where the head's loop appends its records: the existing data collection rule ships ``/var/log/gb300/health/*.log``
to the ``Gb300Health_CL`` table (data/monitoring.yaml), so no new Azure Monitor plumbing is needed."""


class HealSlurm(Slurm):
    """:class:`gb300.slurm.client.Slurm` plus what the loop adds: requeue jobs, one node's drain reason, and a hook
    run once before the first write (drain, resume, requeue) it sends: :func:`gb300.heal.state.run_tick` saves the
    state there, so a head that dies after a drain restarts with the case that drain belongs to."""

    before_write: Callable[[], None] | None = None

    def _writing(self) -> None:
        hook, self.before_write = self.before_write, None
        if hook is not None:
            hook()

    def drain(self, hosts: Sequence[str], reason: str) -> None:
        self._writing()
        super().drain(hosts, reason)

    def resume(self, hosts: Sequence[str]) -> None:
        self._writing()
        super().resume(hosts)

    def requeue(self, job_ids: Sequence[str]) -> None:
        if job_ids:
            self._writing()
            self._call(["scontrol", "requeue", ",".join(job_ids)])

    def reason(self, host: str) -> str:
        """The reason of the node's drain; "" when it is not drained, whatever reason a resume left on it."""
        node = self.nodes([host]).get(host)
        return node.drain_reason if node else ""


class NodeProbe(Protocol):
    """The node's own view: its gate result (``boot.result`` format) and the physical host it runs on, as its Hyper-V
    KVP pool 3 names it (``PhysicalHostNameFullyQualified`` or ``PhysicalHostName``), or None when unknown."""

    def gate_result(self, host: str) -> str | None: ...

    def physical_host(self, host: str) -> str | None: ...


class NcclRunner(Protocol):
    """Starts the rack acceptance run (nccl-tests all_reduce_perf) on hosts and hands back its output when done."""

    def submit(self, hosts: Sequence[str]) -> str: ...

    def collect(self, handle: str) -> str | None: ...


class EventFeed(Protocol):
    """Node and Azure reports that arrived up to ``now``, each once."""

    def poll(self, now: float) -> list[Event]: ...


class TopologyPort(Protocol):
    """``<hostname> <ClusterUUID> <CliqueId>`` lines of the nodes, and where topology.conf is written."""

    def fabric_lines(self) -> str: ...

    def write(self, rendered: str) -> None: ...


def decision_record(
    *,
    now: float,
    cluster: str,
    decision: str,
    reason: str,
    node: str | None = None,
    rack: str | None = None,
    step: str | None = None,
    evidence: Sequence[Event] = (),
    halted: bool = False,
    hosts: Sequence[str] = (),
) -> dict[str, Any]:
    """One decision as it reaches Azure Monitor (one JSON line; docs/self-healing.md#decision-records)."""
    return {
        "TimeGenerated": datetime.fromtimestamp(now, UTC).isoformat().replace("+00:00", "Z"),
        "Cluster": cluster,
        "Source": "gb300-heal",
        "Decision": decision,
        "Node": printable(node or (compress(hosts) if hosts else ""), 200),
        "Rack": rack or "",
        "Step": step or "",
        "Reason": printable(reason),
        "Evidence": [printable(e.describe(), 200) for e in evidence[:50]],
        "Halted": halted,
    }


def file_sink(path: Path = DECISION_LOG) -> Sink:
    """Append each record as one JSON line (the head's Azure Monitor Agent collects the file)."""

    def write(record: Mapping[str, Any]) -> None:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")

    return write
