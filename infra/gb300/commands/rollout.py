"""``gb300 rollout``: reimage the racks whose bootstrap changed, a batch at a time, behind the health gate."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gb300 import config
from gb300 import tags as gb300_tags
from gb300.commands.plan import _stack
from gb300.errors import UsageError
from gb300.ops import rollout
from gb300.plan.state import load_state, state_stacks

NAME = "rollout"


def add_parser(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="reimage the racks whose custom data changed, rack by rack, behind the Slurm health gate",
        description=(
            "Compare the stack with the deployed state (--state, from 'pulumi stack export') and reimage every "
            f"deployed rack scale set whose {gb300_tags.CUSTOM_DATA_HASH} tag differs from the stack's, in pool and "
            "rack order, --concurrency racks at a time. For each batch: drain the racks' nodes in Slurm, wait "
            "for their jobs (--job-timeout), reimage the scale sets through the Azure SDK (signed in as the "
            "azure-native provider: see Azure sign-in), wait until every node registers again and passes "
            "gb300-health-check (--health-timeout), resume the nodes. The first rack "
            "that fails stops the rollout and stays drained. Run it after 'pulumi up' has applied the new "
            "custom data. Exit 0: all done (or --dry-run); 1: a rack failed (named, with the step and reason); "
            "2: wrong input. See docs/rollout.md."
        ),
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--stack", metavar="NAME", help="the stack stacks/Pulumi.NAME.yaml")
    src.add_argument("--stack-file", metavar="PATH", type=Path, help="this stack file")
    p.add_argument(
        "--state",
        metavar="FILE",
        type=Path,
        required=True,
        help="the deployed stack's state ('pulumi stack export > FILE'), taken after 'pulumi up'",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the racks in order, grouped in batches; change nothing"
    )
    p.add_argument("--concurrency", type=int, default=1, metavar="N", help="racks per batch (default 1)")
    p.add_argument(
        "--slurm-via",
        metavar="CMD",
        default="",
        help="prefix for scontrol/squeue, e.g. 'ssh -o BatchMode=yes azureuser@ref-head sudo' (default: run them "
        "here, on the head)",
    )
    p.add_argument(
        "--job-timeout", type=float, default=3600, metavar="S", help="seconds to wait for a rack's jobs (default 3600)"
    )
    p.add_argument(
        "--health-timeout",
        type=float,
        default=3600,
        metavar="S",
        help="seconds to wait for a reimaged rack to pass the health gate (default 3600)",
    )
    p.add_argument("--poll", type=float, default=30, metavar="S", help="seconds between checks (default 30)")


def run(
    args: argparse.Namespace,
    *,
    client_for: Callable[[str], Any] | None = None,
    slurm_run: rollout.Runner = rollout.run_local,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], float] = time.time,
) -> int:
    """Plan (and with no --dry-run, run) the rollout; the keywords are the seams tests fill with fakes."""
    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1 (got {args.concurrency})")
    for flag in ("job_timeout", "health_timeout", "poll"):
        if getattr(args, flag) <= 0:
            raise UsageError(f"--{flag.replace('_', '-')} must be more than 0 (got {getattr(args, flag)})")
    name, path = _stack(args)
    raw = config.load_stack_file(path)
    deployed = load_state(args.state)
    config.parse(raw)
    from gb300.plan.runner import register  # noqa: PLC0415 - the Pulumi mocks load only for this

    stacks = state_stacks(deployed)
    if stacks and name not in stacks:
        raise UsageError(
            f"--state {args.state} is the state of stack {', '.join(stacks)}, not {name}: nothing would compare "
            f"(name the stack file Pulumi.{stacks[0]}.yaml or use --stack {stacks[0]})"
        )
    resources = register(name, raw)
    racks = rollout.racks_to_roll(resources, deployed)
    if args.dry_run or not racks:
        for line in rollout.dry_run_lines(racks, args.concurrency, name):
            print(line)
        return 0
    missing = [r.name for r in racks if not (r.subscription_id and r.resource_group)]
    if missing:
        raise UsageError(f"--state {args.state}: no subscriptionId/resourceGroupName for {', '.join(missing[:3])}")
    plan = rollout.Rollout(
        azure=rollout.Azure(client_for or rollout.azure_client_factory()),
        slurm=rollout.Slurm(shlex.split(args.slurm_via), run=slurm_run),
        job_timeout_s=args.job_timeout,
        health_timeout_s=args.health_timeout,
        poll_s=args.poll,
        sleep=sleep,
        now=now,
    )
    print(f"gb300 rollout: {len(racks)} rack(s), concurrency {args.concurrency}", file=sys.stderr)
    report = plan.run(racks, args.concurrency)
    for line in rollout.report_lines(report):
        print(line)
    return 0 if report.ok else 1
