"""``gb300 rollout``: bring the racks that Azure reports on an old model to the latest one, a batch at a time,
behind the health gate."""

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
from gb300.azure import credential as azure_credential
from gb300.azure import instances
from gb300.commands.plan import add_stack_arguments, resolve_stack
from gb300.errors import UsageError
from gb300.ops import rollout
from gb300.plan.state import load_state, state_stacks
from gb300.slurm import client as slurm_client

NAME = "rollout"
DESCRIPTION = (
    "The step after 'pulumi up': run 'pulumi stack export --stack S --file state.json', then 'gb300 rollout "
    "--stack S --state state.json --azure live --dry-run' to see the racks, then the same without --dry-run "
    "and --azure. It asks Azure which VMs of each deployed rack scale set run an old model "
    "(latestModelApplied false: --azure live, or a saved 'az vmss list-instances -o json' for --dry-run) and "
    "rolls those racks in pool and rack order, --concurrency racks at a time. For each batch: drain the "
    "racks' nodes in Slurm, wait for their jobs (--job-timeout), bring the old VMs to the scale set's latest "
    "model (manual upgrade) and reimage the racks through the Azure SDK (signed in as the azure-native "
    "provider: see Azure sign-in), wait until every node registers again and passes gb300-health-check "
    "(--health-timeout), resume the nodes. The first rack that fails stops the rollout and stays drained. "
    "The deployed state (--state) gives the racks' addresses; a scale set whose "
    f"{gb300_tags.CUSTOM_DATA_HASH} tag there is not the stack's has not had 'pulumi up' yet and is refused. "
    "Exit 0: all done, nothing to do, or --dry-run; 1: a rack failed (named, with the step and reason); 2: "
    "wrong input, or no Azure answer to say what the racks run. See docs/rollout.md."
)
"""``gb300 rollout --help``'s description (docs/cli.md)."""


def add_parser(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="update and reimage the racks Azure reports on an old model, rack by rack, behind the Slurm health gate",
        description=DESCRIPTION,
    )
    add_stack_arguments(
        p,
        verb="roll out",
        state="the deployed stack's state ('pulumi stack export > FILE'), taken after 'pulumi up'",
        state_required=True,
    )
    p.add_argument(
        "--azure",
        metavar="live|FILE|DIR",
        help="which VMs run an old model: 'live' asks Azure (the default without --dry-run; a rollout that changes "
        f"Azure always reads it live); FILE or DIR (every *.json in it), only with --dry-run: the JSON of "
        f"'{instances.SAVE_HINT}' for each rack",
    )
    p.add_argument(
        "--rack",
        metavar="NAME",
        action="append",
        default=[],
        help="also roll this rack scale set whatever Azure reports (repeatable): a rack whose reimage failed after "
        "its update reports the latest model while it runs the old one",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the racks in order, grouped in batches; change nothing"
    )
    p.add_argument("--concurrency", type=int, default=1, metavar="N", help="racks per batch (default 1)")
    _add_slurm_arguments(p)


def _add_slurm_arguments(p: argparse.ArgumentParser) -> None:
    """How the rollout reaches Slurm, and how long it waits for jobs and for the health gate."""
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


def _source(args: argparse.Namespace) -> str:
    """``live`` or a saved answer's path; refuses a missing answer and a saved one outside --dry-run."""
    source = (args.azure or "").strip()
    if not source:
        if args.dry_run:
            raise UsageError(
                "--dry-run: which racks run an old node configuration is Azure's to say, and the state "
                "cannot tell ('pulumi up' has already written the new hash there): pass --azure live, or --azure FILE "
                f"saved with `{instances.SAVE_HINT}`"
            )
        return instances.LIVE
    if source.lower() == instances.LIVE:
        return instances.LIVE
    if not args.dry_run:
        raise UsageError(
            f"--azure {source}: a saved answer is only for --dry-run; a rollout that reimages reads Azure live "
            "(drop --azure, or pass --azure live)"
        )
    if not Path(source).exists():
        raise UsageError(f"--azure {source} does not exist; save it with `{instances.SAVE_HINT}`")
    return source


def _deployed_racks(args: argparse.Namespace) -> tuple[str, list[rollout.Rack]]:
    """The state's node scale sets, once the stack, the state and ``--rack`` agree and ``pulumi up`` has run."""
    name, path = resolve_stack(args)
    raw = config.load_stack_file(path)
    deployed = load_state(args.state)
    config.parse(raw)
    stacks = state_stacks(deployed)
    if stacks and name not in stacks:
        raise UsageError(
            f"--state {args.state} is the state of stack {', '.join(stacks)}, not {name}: nothing would compare "
            f"(name the stack file Pulumi.{stacks[0]}.yaml or use --stack {stacks[0]})"
        )
    deployed_racks = rollout.deployed_scale_sets(deployed)
    if not deployed_racks:
        raise UsageError(f"--state {args.state}: no deployed node scale set (tag {gb300_tags.CUSTOM_DATA_HASH})")
    unknown = sorted({r.lower() for r in args.rack} - {r.name.lower() for r in deployed_racks})
    if unknown:
        raise UsageError(f"--rack {', '.join(unknown)}: not a deployed rack scale set in {args.state}")
    from gb300.plan.runner import plan_subscription, register  # noqa: PLC0415 - the Pulumi mocks load only for this

    # planned in the deployed subscription: the custom data (and its hash tag) names its payload account
    pending = rollout.not_applied(register(name, raw, subscription=plan_subscription(path, deployed)), deployed)
    if pending:
        raise UsageError(
            f"--state {args.state}: {len(pending)} deployed scale set(s) ({', '.join(pending[:3])}"
            f"{', ...' if len(pending) > 3 else ''}) do not have the stack's custom data in their model yet: run "
            "'pulumi up' first, then export the state again"
        )
    missing = [r.name for r in deployed_racks if not (r.subscription_id and r.resource_group)]
    if missing:
        raise UsageError(f"--state {args.state}: no subscriptionId/resourceGroupName for {', '.join(missing[:3])}")
    azure_credential.check_stack_subscription(path, [r.subscription_id for r in deployed_racks])
    return name, deployed_racks


def run(
    args: argparse.Namespace,
    *,
    client_for: Callable[[str], Any] | None = None,
    slurm_run: slurm_client.Runner = slurm_client.run_local,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], float] = time.time,
) -> int:
    """Plan (and with no --dry-run, run) the rollout; the keywords are the seams tests fill with fakes."""
    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1 (got {args.concurrency})")
    for flag in ("job_timeout", "health_timeout", "poll"):
        if getattr(args, flag) <= 0:
            raise UsageError(f"--{flag.replace('_', '-')} must be more than 0 (got {getattr(args, flag)})")
    source = _source(args)
    # a saved answer is read (by the strict reader) before anything else: a bad file is exit 2 at once
    saved = instances.read_saved(Path(source)) if source != instances.LIVE else None
    name, deployed_racks = _deployed_racks(args)
    if source == instances.LIVE:
        print(azure_credential.state_subscriptions_line(NAME, [r.subscription_id for r in deployed_racks]))
        client_for = client_for or rollout.azure_client_factory()
        print(f"gb300 rollout: asking Azure about {len(deployed_racks)} rack scale set(s)...", file=sys.stderr)
        answer = instances.fetch_live(
            [(r.subscription_id, r.resource_group, r.name) for r in deployed_racks], client_for
        )
    else:
        assert saved is not None  # noqa: S101 - read above for every source but live
        answer = saved
    racks = rollout.racks_to_roll(deployed_racks, answer, args.rack)
    if args.dry_run or not racks:
        for line in rollout.dry_run_lines(racks, args.concurrency, name):
            print(line)
        if not racks:
            print(rollout.nothing_line(deployed_racks, answer.source))
        return 0
    plan = rollout.Rollout(
        azure=rollout.Azure(client_for or rollout.azure_client_factory()),
        slurm=slurm_client.Slurm(shlex.split(args.slurm_via), run=slurm_run),
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
