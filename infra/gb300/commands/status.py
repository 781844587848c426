"""``gb300 status``: each deployed rack with its ready, failed (step and reason), booting and missing nodes."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from gb300 import tags as gb300_tags
from gb300.azure import credential as azure_credential
from gb300.commands.plan import add_state_argument
from gb300.errors import UsageError
from gb300.ops import fleet_status, rollout
from gb300.plan.state import load_state

NAME = "status"


def add_parser(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="list each deployed rack with ready, failed (step and reason), booting and missing nodes (live)",
        description=(
            "Read the deployed rack scale sets from --state ('pulumi stack export'), then ask Azure (azure-mgmt-"
            "compute, signed in as the azure-native provider: see Azure sign-in) for each rack's VMs and their "
            "instance view, and read each running "
            "node's bootstrap status (/var/lib/gb300/status) with Run Command. Prints one row per rack and one "
            "line per node that is not ready. Exit 0 when every node is ready, 1 when one is not, 2 for wrong "
            "input. See docs/rollout.md."
        ),
    )
    add_state_argument(p, required=True, text="'pulumi stack export > FILE' (or 'gb300 strip-state' of it)")
    p.add_argument("--rack", metavar="NAME", action="append", help="only this rack scale set (repeatable)")
    p.add_argument("--workers", type=int, default=16, metavar="N", help="Run Commands at once per rack (default 16)")


def run(args: argparse.Namespace, *, client_for: Callable[[str], Any] | None = None) -> int:
    """Print the fleet's status; ``client_for`` is the seam tests fill with a client over a fake transport."""
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1 (got {args.workers})")
    racks = fleet_status.deployed_racks(load_state(args.state))
    if args.rack:
        unknown = sorted(set(args.rack) - {r.name for r in racks})
        if unknown:
            raise UsageError(f"--rack {', '.join(unknown)}: not a deployed rack in {args.state}")
        racks = [r for r in racks if r.name in args.rack]
    if not racks:
        raise UsageError(f"--state {args.state}: no deployed rack scale set (tag {gb300_tags.RACK})")
    print(azure_credential.state_subscriptions_line(NAME, [r.subscription_id for r in racks]))
    reader = fleet_status.FleetStatus(client_for or rollout.azure_client_factory(), workers=args.workers)
    out, ready = fleet_status.lines((rack, reader.rack(rack)) for rack in racks)
    for line in out:
        print(line)
    return 0 if ready else 1
