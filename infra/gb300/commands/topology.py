"""``gb300 topology``: print Slurm's topology.conf (topology/block) for nodes' NVLink fabric identities.

Example::

    gb300 topology --nodes fabric.txt > /etc/slurm/topology.conf

Each line of FILE is ``<hostname> <ClusterUUID> <CliqueId>`` (collect them on the nodes with
``nvidia-smi -q | grep -E 'ClusterUUID|CliqueId'``). Excluded nodes and their reasons go to stderr.
Exit 0 when the file was written (even with exclusions), 2 for unreadable or invalid input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gb300.errors import ConfigError
from gb300.facts import catalog
from gb300.io import reader
from gb300.slurm import topology

NAME = "topology"


def add_parser(subparsers: Any) -> None:
    """Register ``topology`` on the CLI's subparsers (``argparse._SubParsersAction``)."""
    parser = subparsers.add_parser(
        NAME,
        help="print topology.conf (topology/block) for nodes' ClusterUUID/CliqueId",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    topology.add_arguments(parser)
    parser.add_argument(
        "--vm-size",
        metavar="SIZE",
        help="take the block size from the catalog's VMs per NVLink domain of SIZE (overrides --block-size)",
    )


def run(args: argparse.Namespace) -> int:
    """Write topology.conf to stdout, exclusions and problems to stderr; the exit status."""
    if getattr(args, "vm_size", None):
        try:
            sku = catalog.load().sku(args.vm_size)
        except KeyError:
            print(f"--vm-size: not in the SKU catalog (got {args.vm_size!r})", file=sys.stderr)
            return 2
        args.block_size = sku.vms_per_nvlink_domain
    if getattr(args, "nodes", None):
        # gb300.slurm.topology also runs alone on the controller (standard library only); through the CLI, the
        # file is first held to the strict reader's limits (size, UTF-8, no NUL): a bad file is exit 2 on one line
        try:
            reader.read_text(Path(args.nodes), reader.NODES)
        except ConfigError as exc:
            print(f"--nodes {exc}", file=sys.stderr)
            return 2
    if getattr(args, "fabric_dir", None):
        problems = fabric_dir_problems(Path(args.fabric_dir))
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            return 2
    return topology.main(args)


def fabric_dir_problems(directory: Path) -> list[str]:
    """One line per fabric file of ``directory`` the strict reader refuses: a symbolic link or other non-regular
    file, more than :data:`~gb300.io.reader.FABRIC`'s cap, not UTF-8, not JSON (a key given twice, too deep)."""
    problems = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else ():
        if path.is_symlink() or not path.is_file():
            problems.append(f"--fabric-dir {path}: is not a regular file (a symbolic link or special file); copy it in")
            continue
        try:
            reader.load_json(path, reader.FABRIC)
        except ConfigError as exc:
            problems.append(f"--fabric-dir {exc}")
    return problems
