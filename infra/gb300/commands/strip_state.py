"""``gb300 strip-state``: a copy of ``pulumi stack export`` with every secret taken out, for pull requests."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gb300.ops import state_strip

NAME = "strip-state"


def add_parser(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="write a copy of a 'pulumi stack export' with every secret taken out (for pull request plans)",
        description=(
            "Read the export ('pulumi stack export --file STATE') and write a copy to --out in which every Pulumi "
            "secret value (ciphertext, or plaintext after --show-secrets) is replaced by a marker, the secrets "
            "provider and its encrypted key are gone, and generated keys and passwords are blanked whatever their "
            "provider marked. The copy is checked again before it is written. 'gb300 plan --state' reads it like the "
            "export: the deploy and drift jobs publish it so that pull requests plan against the deployed state "
            "without the Pulumi access token (docs/gitops.md). Exit 0: written; 2: not an export, or a file that "
            "cannot be read or written."
        ),
    )
    p.add_argument("state", metavar="STATE", type=Path, help="the export ('pulumi stack export --file STATE')")
    p.add_argument("--out", metavar="FILE", type=Path, required=True, help="write the stripped copy here")


def run(args: argparse.Namespace) -> int:
    count = state_strip.strip_file(args.state, args.out)
    print(f"gb300 strip-state: wrote {args.out} ({count} secret value(s) taken out)")
    return 0
