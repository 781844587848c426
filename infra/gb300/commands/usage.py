"""``gb300 usage``: GPU-hours per Slurm account and user in a period, priced with the stack's prices where known."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from gb300 import config
from gb300.config import stacks
from gb300.errors import UsageError
from gb300.io import writer
from gb300.ops import sacct_stream, usage

NAME = "usage"
SACCT = ("sacct", "--json", "--allusers", "--duplicates")
"""What ``gb300 usage`` runs without ``--sacct``: every user's jobs, each run of a requeued job (``--duplicates``)."""


def add_parser(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="GPU-hours per Slurm account and user in a period, with their cost where the price is known",
        description=(
            "Print the GPU-hours each Slurm account, and each user within it, used in a period: for every job, the "
            "GPUs it was allocated (sacct's tres.allocated gres/gpu) times the hours it ran inside the period "
            "(a job still running counts to the period's end or now). With --stack, each GPU-hour is priced at its "
            "partition's GPU pool VM price over the size's GPUs (data/prices.yaml, or --prices; gb300:cost's "
            "currency, discount and terms); a partition or size without a price is named under 'price unknown' and "
            "its cost is never 0. Jobs come from 'sacct --json' run here (on the head or a login node: "
            f"'{' '.join(SACCT)} --starttime ... --endtime ...') or from a saved file (--sacct FILE, '-' for "
            "stdin), read one job at a time. Bad records (a truncated or hostile file, a job that ends before it "
            "starts, an unreadable GPU count) are counted and named. Exit 0: printed; 2: a bad period, a stack "
            "that does not load, or sacct output that cannot be read at all (docs/usage.md)."
        ),
    )
    p.add_argument("--since", metavar="TIME", required=True, help="period start, ISO 8601 (UTC unless it says)")
    p.add_argument("--until", metavar="TIME", help="period end, ISO 8601 (UTC unless it says); default: now")
    p.add_argument(
        "--sacct",
        metavar="FILE",
        help="saved 'sacct --json' output ('-': standard input); default: run sacct on this machine",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--stack", metavar="NAME", help="price with the stack NAME (Pulumi.NAME.yaml of the project)")
    src.add_argument("--stack-file", metavar="PATH", type=Path, help="price with this stack file")
    p.add_argument(
        "--prices", metavar="FILE|live", help="a price table overlaying data/prices.yaml, or 'live' (docs/cost.md)"
    )
    p.add_argument("--json", metavar="FILE", type=Path, help="also write the report as JSON here ('-': stdout only)")


def _utc(value: str, flag: str) -> float:
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UsageError(f"{flag} {value!r}: must be an ISO 8601 time (2026-11-01T00:00:00Z)") from None
    return (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)).timestamp()


def _period(args: argparse.Namespace, now: float) -> tuple[float, float]:
    since = _utc(args.since, "--since")
    until = now if args.until is None else _utc(args.until, "--until")
    if until <= since:
        raise UsageError(f"--until {args.until or 'now'} must come after --since {args.since}")
    return since, until


def _sacct_argv(period: tuple[float, float]) -> list[str]:
    """sacct's command line for the period (sacct reads times in this machine's local time zone)."""
    local = [datetime.fromtimestamp(t).strftime("%Y-%m-%dT%H:%M:%S") for t in period]
    return [*SACCT, f"--starttime={local[0]}", f"--endtime={local[1]}"]


@contextmanager
def _jobs_stream(args: argparse.Namespace, period: tuple[float, float]) -> Iterator[IO[str]]:
    """The text of sacct --json: the saved file, standard input, or sacct run here (its exit status checked)."""
    if args.sacct == "-":
        yield sys.stdin
        return
    if args.sacct is not None:
        try:
            handle = Path(args.sacct).open(encoding="utf-8", errors="replace")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise UsageError(f"--sacct {args.sacct}: cannot be read ({exc.strerror or exc})") from None
        with handle:
            yield handle
        return
    if shutil.which("sacct") is None:
        raise UsageError(
            "no sacct on this machine: run gb300 usage on the head or a login node, or save the jobs there "
            f"('{' '.join(SACCT)} --starttime ... --endtime ... > sacct.json') and pass --sacct sacct.json"
        )
    argv = _sacct_argv(period)
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, encoding="utf-8", errors="replace") as proc:
        stdout: IO[str] = proc.stdout  # type: ignore[assignment]  # stdout=PIPE: never None
        yield stdout
        stdout.read()  # drain what a failed read left, so sacct is not stopped by a full pipe
    if proc.returncode != 0:
        raise UsageError(f"{' '.join(argv)} exited {proc.returncode} (its message is above)")


def _pricing(args: argparse.Namespace) -> usage.Pricing:
    if args.stack is None and args.stack_file is None:
        return usage.Pricing("USD")
    _, path = stacks.resolve(args.stack, args.stack_file)
    cfg = config.parse(config.load_stack_file(path))
    return usage.stack_pricing(cfg, args.prices)


def run(args: argparse.Namespace) -> int:
    now = time.time()
    period = _period(args, now)
    pricing = _pricing(args)
    report = usage.Usage(period, pricing, now)
    read = sacct_stream.Read()
    with _jobs_stream(args, period) as handle:
        for job in sacct_stream.jobs_in(handle, read):
            usage.add_job(report, job)
    if not read.found:
        where = "standard input" if args.sacct == "-" else args.sacct or "sacct's output"
        raise UsageError(f"--sacct {where}: {'; '.join(read.problems)}")
    doc = usage.summary(report, read.problems, read.jobs)
    if args.json is not None and str(args.json) == "-":
        json.dump(doc, sys.stdout, indent=2)
        print()
        return 0
    print("\n".join(usage.text(doc, _iso(period[0]), _iso(period[1]))))
    if args.json is not None:
        writer.replace(args.json, json.dumps(doc, indent=2) + "\n", mode=0o644, label="--json")
    return 0


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
