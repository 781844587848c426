"""The ``gb300`` command line. User mistakes exit 2 with one line per problem, never a traceback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gb300.commands import COMMANDS
from gb300.errors import ConfigError, Gb300Error

EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every subcommand (the GitOps tests check workflows against it)."""
    parser = argparse.ArgumentParser(
        prog="gb300",
        description="Turn one Pulumi stack file into an Azure ND GB300 v6 (NVL72) training cluster.",
        epilog="Deploy for real with the Pulumi CLI: pulumi preview / pulumi up (see README.md).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = next(c for c in COMMANDS if args.command == c.NAME)
    try:
        code: int = handler.run(args)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_USAGE
    except Gb300Error as exc:
        print(f"gb300 {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return code


if __name__ == "__main__":
    sys.exit(main())
