"""``gb300 plan``: run the program offline on the Pulumi SDK's mocks and report what it would build."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from gb300 import config, cost, rules
from gb300.azure import quota
from gb300.config import stacks
from gb300.errors import UsageError
from gb300.io import writer
from gb300.plan import run_plan
from gb300.plan.render import suppressed_lines, text
from gb300.plan.state import load_state, state_stacks
from gb300.rules import identity

NAME = "plan"


def add_parser(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="preview a stack offline (no Azure account, no Pulumi CLI)",
        description=(
            "Run the real Pulumi program from infra/ on the Pulumi SDK's mock monitor, record every resource "
            "it registers, run the policy rules over them and print a summary. Exit 0 when no finding is at "
            "or above gb300:policy.failOn (default: error), 1 when one is, 2 for invalid config, input files or "
            "usage, 3 for an internal error (a bug)."
        ),
    )
    add_stack_arguments(
        p,
        verb="plan",
        state=(
            "the deployed stack's state ('pulumi stack export > FILE', or 'gb300 strip-state' of it): also report "
            "what the change adds, changes and destroys: racks, the head VM and its disk, interconnect groups or "
            "subnets in use that it would delete or replace (destroys-deployed), Lustre and the storage account "
            "(storage-data-loss), and the racks whose bootstrap changed (custom-data-changed)"
        ),
    )
    p.add_argument("--json", metavar="FILE", type=Path, help="also write the plan (resources, findings, summary) here")
    p.add_argument("--quiet", action="store_true", help="print only findings and the verdict")
    p.add_argument(
        "--quota",
        metavar="FILE|live",
        help="check vCPU quota: 'live' asks Azure (signed in as the azure-native provider: see Azure sign-in), also "
        "whether each image version exists, Lustre's subnet size and, with gb300:network.existingVnetId, that the "
        "carved space fits the VNet; FILE is the JSON "
        "of `az vm list-usage --location REGION -o json` (default: gb300:policy.quota; unset: not checked)",
    )
    p.add_argument(
        "--prices",
        metavar="FILE|live",
        help="where the plan's cost comes from: 'live' asks Azure's Retail Prices API (public, no sign-in) for the "
        "stack's region and gb300:cost.currency; FILE is a price table shaped like infra/gb300/data/prices.yaml "
        "whose meters (one or many: your negotiated GB300 rate) overlay the shipped table; default: the shipped "
        "table, where unlisted prices are unknown and the total says what it excludes (docs/cost.md)",
    )


def add_stack_arguments(
    p: argparse.ArgumentParser, *, verb: str, state: str | None = None, state_required: bool = False
) -> None:
    """``--stack NAME`` / ``--stack-file PATH`` (one required) and, with ``state`` (its help), ``--state FILE``: the
    arguments of every command that reads a stack file (plan, rollout, migrate-racks)."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--stack",
        metavar="NAME",
        help=f"{verb} the stack NAME of the Pulumi project in the current directory (or the closest one above it): "
        "Pulumi.NAME.yaml in its stackConfigDir, as the Pulumi CLI finds it",
    )
    src.add_argument("--stack-file", metavar="PATH", type=Path, help=f"{verb} this stack file")
    if state is not None:
        add_state_argument(p, required=state_required, text=state)


def add_state_argument(p: argparse.ArgumentParser, *, required: bool, text: str) -> None:
    """``--state FILE`` with ``text`` as its help: a ``pulumi stack export`` document (secrets stripped or not)."""
    p.add_argument("--state", metavar="FILE", type=Path, required=required, help=text)


def resolve_stack(args: argparse.Namespace, cwd: Path | None = None) -> tuple[str, Path]:
    """The stack's name and file: ``--stack-file``, or ``--stack`` resolved in the project around ``cwd``
    (:func:`gb300.config.stacks.resolve`)."""
    return stacks.resolve(args.stack, args.stack_file, cwd)


def _check_output(path: Path) -> None:
    """Refuse a ``--json`` path that cannot be written, before the plan runs rather than after."""
    if path.is_dir():
        raise UsageError(f"--json {path} is a directory; give a file name such as {path / 'plan.json'}")
    if not path.parent.is_dir():
        raise UsageError(f"--json {path}: the directory {path.parent} does not exist")
    if path.exists() and not path.is_file():
        raise UsageError(f"--json {path} is not a regular file")


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    # Streamed: at 1,388 racks the document is about 100 MB of text, which need not exist as one string. Replaced
    # atomically in its own directory (gb300.io.writer): a symlink there is replaced, never written through.
    with writer.replacing(path, mode=0o644, label="--json") as fh:
        json.dump(doc, fh, indent=1, sort_keys=False)
        fh.write("\n")


def run(args: argparse.Namespace) -> int:
    name, path = resolve_stack(args)
    if args.json is not None:
        _check_output(args.json)
    raw = config.load_stack_file(path)
    # Every input file is read before the plan starts: a wrong path or shape is exit 2 at once, on one line.
    if args.quota and args.quota.strip().lower() != quota.LIVE:
        quota.read_usage_file(Path(args.quota))
    if args.prices and args.prices.strip().lower() != cost.LIVE:
        cost.file_book(Path(args.prices), "USD")  # a missing or malformed price file is exit 2 before the plan runs
    deployed = load_state(args.state) if args.state is not None else None
    if deployed:
        stacks = state_stacks(deployed)
        if stacks and name not in stacks:  # every URN would differ: one clean refusal, not a finding per resource
            raise UsageError(
                f"--state {args.state} is the state of stack {', '.join(stacks)}, not {name}: nothing would compare. "
                f"Export this stack's state (`pulumi stack export --stack {name} > state.json`), or plan the stack "
                f"the state belongs to (`gb300 plan --stack {stacks[0]} --state {args.state}`)"
            )
    started = time.perf_counter()
    print(f"gb300 plan: validating and registering resources of stack {name}...", file=sys.stderr)
    result = run_plan(
        name,
        raw,
        quota=args.quota,
        deployed=deployed,
        prices=args.prices,
        stack_file=path,
        siblings=identity.siblings(path),
    )
    elapsed = time.perf_counter() - started
    print(
        f"gb300 plan: {len(result.resources):,} resources registered and checked in {elapsed:.1f}s",
        file=sys.stderr,
    )
    if args.json is not None:
        _write_json(args.json, result.as_json())
        print(f"gb300 plan: wrote {args.json}", file=sys.stderr)
    if not args.quiet:
        print(text(result, stack_file=str(path)))
    else:  # --quiet: the findings alone, then the suppressions (never silent) and the verdict
        for f in result.findings:
            print(f"{f.level.label:<7} {f.rule}: {f.message}\n        at {f.resource}")
        for line in suppressed_lines(result):
            print(line)
    failing = rules.failing(result.findings, result.config.policy)
    if failing:
        print(f"plan fails: {len(failing)} finding(s) at or above '{result.config.policy.fail_on}'")
        return 1
    note = (
        f"; {len(result.suppressed)} rule(s) suppressed by gb300:policy.suppress (listed above)"
        if result.suppressed
        else ""
    )
    print(f"plan passes{note}")
    return 0
