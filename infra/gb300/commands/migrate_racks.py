"""``gb300 migrate-racks``: write the Pulumi commands that move gb300 0.1's racks onto the compute package."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gb300 import config, floors
from gb300.commands.plan import add_stack_arguments, resolve_stack
from gb300.ops import migrate_racks
from gb300.plan.state import parse_state, read_state

NAME = "migrate-racks"


def add_parser(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="write the import file and Pulumi commands that move gb300 0.1's dynamic racks onto the compute package",
        description=(
            "Read the deployed state (--state, from 'pulumi stack export'), find every rack gb300 0.1 declared as a "
            "Python dynamic resource, match each to the scale set the stack now declares by its Azure name, and "
            "write DIR/import.json (for 'pulumi import --file'), DIR/commands.sh and DIR/check_preview.py: keep the "
            "state (DIR/rollback.json), import each scale set under its new rack component, delete the legacy "
            "entries from the state only, then 'pulumi preview --json': every rack shows an update (expected after "
            "an import); a rack that would be replaced or deleted stops the script with one line and the rollback "
            "command. Nothing here calls Azure, and no step deletes a VM; a Pulumi CLI on PATH is only asked its "
            "version (it must be at or above the floor in data/floors.yaml). Exit 0: files written; 2: nothing to "
            "migrate, a state of another stack, an interconnect block, a rack the stack no longer declares, or a "
            "Pulumi CLI below its floor. See docs/fabric.md."
        ),
    )
    add_stack_arguments(
        p,
        verb="migrate",
        state="the deployed stack's state ('pulumi stack export --file FILE'), taken before the migration",
        state_required=True,
    )
    p.add_argument("--out", metavar="DIR", type=Path, required=True, help="write import.json and commands.sh here")


def run(args: argparse.Namespace) -> int:
    """Plan the stack, pair its racks with the state's legacy ones and write the two files."""
    name, path = resolve_stack(args)
    raw = config.load_stack_file(path)
    doc = read_state(args.state)
    deployed = parse_state(doc, where=f"state file {args.state}")
    where = f"--state {args.state}"
    migrate_racks.check_state(deployed, name, where)  # refuse before the plan runs
    cli_line = floors.cli_check()  # a CLI below its floor refuses here, before any file is written
    config.parse(raw)
    from gb300.plan.runner import plan_subscription, register  # noqa: PLC0415 - the Pulumi mocks load only for this

    # planned in the deployed subscription: the racks' custom data names its payload account
    planned = register(name, raw, subscription=plan_subscription(path, deployed))
    migration = migrate_racks.plan_migration(deployed, doc, planned, name, where)
    written = migrate_racks.write(migration, args.out)
    print(f"gb300 migrate-racks: {len(migration.moves)} rack(s) of stack {name}")
    for file in written:
        print(f"  wrote {file}")
    print(f"  {cli_line}")
    if migration.dependents:
        print(f"  {len(migration.dependents)} state entries depend on legacy racks: commands.sh unlinks them first")
    print(
        f"Review them, run 'bash {written[1]}' (its preview shows every rack as an update, which is expected; it "
        "stops on a rack that would be replaced or deleted), then 'gb300 plan --state' on a fresh "
        "'pulumi stack export' must show no destroys-deployed error"
    )
    return 0
