"""gb300 heal: the self-healing loop's offline tools (docs/self-healing.md).

gb300 heal simulate SCENARIO.yaml [--json REPORT] runs the remediation loop, the same code the head runs,
against a simulated fleet (fake Slurm, Azure through azure-mgmt-compute over a fake HTTP transport, the gate's
result format, nccl-tests fixtures) on a simulated clock, and prints what it did: first what happened and why (a
halt and the rail's reason, what became of the cases, Azure's throttling, refusals and failed operations), then per
node the loop acted on its actions, its case's states with their times and Azure's answers to its calls, then the
Guest Health Reports filed (node, host, category), then drains, false drains, repairs, the median time to repair
and the topology's final blocks. --json writes the full report; --decisions the decision records
as JSON lines (what the head sends to Azure Monitor).

gb300 heal role --subscription ID --resource-group RG [...] [--guest-health-report] prints the custom role
definitions an operator creates once (az role definition create --role-definition @FILE): exactly the Azure
actions the loop calls.

Exit 0 when the simulation ran (whatever it found), 2 for an unreadable or invalid scenario (one line per
problem, naming its key path).
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path
from typing import Any

from gb300.errors import UsageError
from gb300.io import writer

NAME = "heal"


def add_parser(subparsers: Any) -> None:
    """Register ``heal`` and its subcommands on the CLI's subparsers."""
    parser = subparsers.add_parser(
        NAME,
        help="self-healing: simulate the remediation loop on a scenario, print its Azure role",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="heal_command", metavar="SUBCOMMAND", required=True)
    simulate = sub.add_parser("simulate", help="run the remediation loop against a simulated fleet")
    simulate.add_argument(
        "scenario", metavar="SCENARIO.yaml", help="the scenario (docs/self-healing.md#simulating-a-scenario)"
    )
    simulate.add_argument("--json", metavar="REPORT", help="write the full report as JSON to REPORT")
    simulate.add_argument("--decisions", metavar="FILE", help="write every decision record as a JSON line to FILE")
    simulate.add_argument(
        "--poll",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="the loop's tick while it has work, 10 to 3600 (default 60)",
    )
    role = sub.add_parser("role", help="print the custom role definitions the loop's identity needs")
    role.add_argument(
        "--subscription",
        required=True,
        metavar="ID",
        help="the subscription id (a GUID) the roles are scoped to: az account show --query id -o tsv",
    )
    role.add_argument("--resource-group", required=True, action="append", metavar="RG", help="a GPU resource group")
    role.add_argument("--guest-health-report", action="store_true", help="add the Guest Health Report role")


def _subscription(value: str) -> str:
    """An Azure subscription id: a GUID, else a :class:`UsageError` (exit 2, one line)."""
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise UsageError(
            f"--subscription must be a subscription id, a GUID such as 00000000-0000-0000-0000-000000000000 "
            f"(got {value!r}); az account show --query id -o tsv prints yours"
        ) from None


def run(args: argparse.Namespace) -> int:
    if args.heal_command == "role":
        from gb300.heal.azure_calls import role_definitions  # noqa: PLC0415 - the SDK loads only when needed

        roles = role_definitions(
            _subscription(args.subscription), args.resource_group, guest_health_report=args.guest_health_report
        )
        print(json.dumps(roles, indent=2))
        return 0
    return _simulate(args)


def _simulate(args: argparse.Namespace) -> int:
    from gb300.heal import scenario as scenario_file  # noqa: PLC0415
    from gb300.heal import sim  # noqa: PLC0415

    path = Path(args.scenario)
    scenario, settings = scenario_file.load(path)
    scenario_file.bound(scenario, args.poll, where=path.name)
    print(
        f"gb300 heal simulate: {path.name}: {scenario.racks} rack(s), {scenario.duration:.0f} simulated seconds",
        file=sys.stderr,
    )
    from gb300.heal import summary  # noqa: PLC0415

    result = sim.run(scenario, settings, poll_s=args.poll)
    report = result.report()
    for line in summary.lines(report):
        print(line)
    mttr = report["mttr_seconds"]
    print(
        f"drains {report['drains']}, false drains {report['false_drains']}, repaired {report['repaired']}, "
        f"median time to repair {'-' if mttr is None else f'{mttr:.0f}s'}, halted {str(report['halted']).lower()}"
    )
    partial = [b for b in report["blocks"] if b["count"] < sim.RACK_SIZE]
    print(
        f"blocks {len(report['blocks'])} ({len(partial)} partial: "
        + (", ".join(f"{b['name']} {b['count']}" for b in partial) or "none")
        + ")"
    )
    print(f"simulated in {report['wall_seconds']:.2f}s", file=sys.stderr)
    for flag, target, text in (
        ("--json", args.json, json.dumps(report, indent=2) + "\n"),
        ("--decisions", args.decisions, "".join(json.dumps(r, sort_keys=True) + "\n" for r in result.records)),
    ):
        if target:
            writer.replace(Path(target), text, mode=0o644, label=flag)
    return 0
