"""Which Slurm node records belong to replaced instances, read from the controller's own view.

A replaced VM of a rack comes back as a new instance with a new computer name, so a new Slurm node record; the old
record stays (``DOWN``, not responding) until someone deletes it. gb300 tells such records apart without asking
Azure, from two facts:

* Every GPU node publishes its NVLink domain in its record (``Extra=gb300-nvlink:<ClusterUUID>:<CliqueId>``,
  ``gb300-fabric-publish``). One NVLink domain is one NVL72 rack, which holds at most ``block size`` VMs
  (18 for ND GB300 v6: ``vmsPerNvlinkDomain`` in ``data/skus.yaml``).
* A record whose slurmd responds belongs to a running VM.

So when a domain has more records than the rack can hold VMs, ``surplus = records - block size`` of them belong
to VMs that no longer exist, and all of those are among the records that do not respond. When no more records
fail to respond than the surplus, every one of them is a replaced instance's: delete them. When more fail to
respond (another VM of the rack is rebooting at the same time), which ones are gone cannot be told: delete
nothing now and decide on a later run. A node that merely reboots keeps its name, so it never adds a record:
a rack of 18 never has a surplus, whatever its nodes' states. Records without an NVLink identity are left
alone, and so are records with a job (``ALLOCATED``, ``MIXED``, ``COMPLETING``): slurmctld refuses to delete
those (SchedMD/slurm ``src/slurmctld/node_mgr.c``, ``_delete_node_ptr``).

Stdlib only: the controller runs it as ``python3 -m gb300.slurm.stale`` from a shipped copy, with the output of
``scontrol show node -o`` on stdin; it prints the names to delete on stdout and one line per decision on stderr.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from gb300.slurm.hostlist import compress, natural_key

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_EXTRA = re.compile(r"^gb300-nvlink:([0-9a-fA-F-]+):([0-9]+)\Z")
_BUSY = {"ALLOCATED", "MIXED", "COMPLETING"}


@dataclass(frozen=True)
class Record:
    """One node record as ``scontrol show node -o`` prints it: name, NVLink domain, state words."""

    name: str
    domain: tuple[str, str] | None
    state: frozenset[str]

    @property
    def responding(self) -> bool:
        return "NOT_RESPONDING" not in self.state


def parse_records(text: str) -> list[Record]:
    """The records in ``scontrol show node -o`` output (one line per node, ``Key=Value`` words)."""
    records = []
    for line in text.splitlines():
        fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
        name = fields.get("NodeName", "")
        if not _NAME.match(name):
            continue
        match = _EXTRA.match(fields.get("Extra", ""))
        domain = (match.group(1).lower(), match.group(2)) if match else None
        records.append(Record(name, domain, frozenset(fields.get("State", "").upper().split("+"))))
    return records


@dataclass(frozen=True)
class Decision:
    """What to do with one NVLink domain's records: the names to delete and why, in one line."""

    domain: tuple[str, str]
    delete: tuple[str, ...]
    reason: str


def decide(records: Iterable[Record], block_size: int) -> list[Decision]:
    """One decision per NVLink domain that has more records than ``block_size`` (the others need none)."""
    by_domain: dict[tuple[str, str], list[Record]] = {}
    for record in records:
        if record.domain is not None:
            by_domain.setdefault(record.domain, []).append(record)
    decisions = []
    for domain, members in sorted(by_domain.items()):
        surplus = len(members) - block_size
        if surplus <= 0:
            continue
        silent = sorted((r for r in members if not r.responding), key=lambda r: natural_key(r.name))
        names = compress([r.name for r in silent]) if silent else "none"
        where = f"NVLink domain {domain[0]}:{domain[1]}: {len(members)} records for {block_size} VMs"
        if not silent or len(silent) > surplus:
            reason = (
                f"{where}; not responding: {names} ({len(silent)}), more than the {surplus} replaced: "
                "kept until the others respond again"
                if silent
                else f"{where}; every record responds: kept"
            )
            decisions.append(Decision(domain, (), reason))
            continue
        free = tuple(r.name for r in silent if not (r.state & _BUSY))
        busy = [r.name for r in silent if r.state & _BUSY]
        reason = f"{where}; replaced instances (not responding): {names}"
        if busy:
            reason += f"; {compress(busy)} still has a job, deleted on a later run"
        decisions.append(Decision(domain, free, reason))
    return decisions


def main(argv: list[str] | None = None) -> int:
    """Print the records to delete (one name a line) and every decision on stderr; 2 for a bad block size."""
    parser = argparse.ArgumentParser(prog="gb300-stale-records", description=__doc__)
    parser.add_argument("--block-size", type=int, required=True, help="VMs per NVLink domain (18)")
    args = parser.parse_args(argv)
    if args.block_size < 1:
        print(f"--block-size: must be at least 1 (got {args.block_size})", file=sys.stderr)
        return 2
    for decision in decide(parse_records(sys.stdin.read()), args.block_size):
        print(decision.reason, file=sys.stderr)
        for name in decision.delete:
            print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
