"""The ``gb300`` command line. User mistakes exit 2 with one line per problem, never a traceback.

Exit codes, the same for every command (docs/cli.md, generated from this module by ``gb300 docs``):

* 0: done; for ``gb300 plan``, no finding at or above ``gb300:policy.failOn``;
* 1: ``gb300 plan`` found at least one finding at or above ``failOn`` (the plan itself worked);
* 2: the input is wrong: usage, a stack file, a state or quota file, an output path, no Azure credential. One line
  per problem;
* 3: gb300 itself failed (a bug, or a malformed data file it ships, :class:`~gb300.errors.DataError`): one line
  naming the exception. ``GB300_TRACEBACK=1`` shows the traceback;
* 130: interrupted (Ctrl-C);
* 141: the reader of standard output went away (``gb300 schema | head``): nothing more is written, no message,
  the status a shell reports for a command SIGPIPE stopped (``yes | head``). Python ignores SIGPIPE and raises
  BrokenPipeError instead; the handling follows docs.python.org, library/signal.html, "Note on SIGPIPE".
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import traceback
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from gb300 import floors
from gb300.commands import COMMANDS, docs
from gb300.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    TRACEBACK_ENV,
    ConfigError,
    DataError,
    Gb300Error,
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every subcommand (the GitOps tests check workflows against it)."""
    parser = argparse.ArgumentParser(
        prog="gb300",
        description="Turn one Pulumi stack file into an Azure ND GB300 v6 (NVL72) training cluster.",
        epilog="Deploy for real with the Pulumi CLI: pulumi preview / pulumi up (see README.md and docs/).",
    )
    parser.add_argument("--version", action="version", version=f"gb300 {_version()}", help="print gb300's version")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    # `gb300 docs` describes this parser; it reads it from its arguments, since it cannot import this module.
    parser.set_defaults(**{docs.ROOT_PARSER: parser})
    return parser


def _version() -> str:
    """The installed distribution's version (pyproject.toml ``version``)."""
    try:
        return metadata.version("gb300")
    except metadata.PackageNotFoundError:  # run from a checkout without an install
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = next(c for c in COMMANDS if args.command == c.NAME)
    try:
        floors.require_packages()  # data/floors.yaml: a package below its floor is one line, exit 2
        code: int = handler.run(args)
        sys.stdout.flush()  # a reader gone away shows here, not in the interpreter's flush at exit
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_USAGE
    except DataError as exc:  # a file shipped with gb300 is wrong: a bug, not the user's input
        print(
            f"gb300 {args.command}: internal error: {exc}. This is a bug in gb300: please report it with the "
            "command line",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    except Gb300Error as exc:
        print(f"gb300 {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"gb300 {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a bug in gb300, not a finding (exit 1) nor a user's mistake (exit 2)
        return _unexpected(args.command, exc)
    return code


def _unexpected(command: str, exc: Exception) -> int:
    """Exit 141 without a word when stdout's reader went away; else one line naming the exception and where it was
    raised (the traceback with GB300_TRACEBACK=1), exit 3."""
    if isinstance(exc, BrokenPipeError) and _stdout_gone():
        # Later writes (the interpreter flushes stdout at exit) go nowhere rather than fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE
    if os.environ.get(TRACEBACK_ENV):
        raise exc
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    print(
        f"gb300 {command}: internal error ({type(exc).__name__}: {_one_line(exc)}){where}. This is a bug in "
        f"gb300: please report it with the command line ({TRACEBACK_ENV}=1 prints the traceback)",
        file=sys.stderr,
    )
    return EXIT_INTERNAL


def _stdout_gone() -> bool:
    """Whether standard output is a pipe nobody reads any more (poll reports POLLERR on a pipe's write end once
    its last reader closed): the BrokenPipeError was ours to expect, not a socket's failure inside a command."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by an object without a descriptor (a test's capture)
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _one_line(exc: BaseException, limit: int = 200) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


if __name__ == "__main__":
    sys.exit(main())
