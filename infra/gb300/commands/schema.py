"""``gb300 schema``: print the JSON Schema of a stack file, for editors."""

from __future__ import annotations

import argparse
import json
from typing import Any

from gb300 import config

NAME = "schema"


def add_parser(subparsers: Any) -> None:
    subparsers.add_parser(
        NAME,
        help="print the JSON Schema of a stack file",
        description=(
            "Print a JSON Schema (draft 2020-12) of stacks/Pulumi.<stack>.yaml. Point your editor's YAML "
            "language server at it to validate and complete stack files."
        ),
    )


def run(args: argparse.Namespace) -> int:
    del args
    print(json.dumps(config.json_schema(), indent=2))
    return 0
