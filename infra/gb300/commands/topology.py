"""``gb300 topology``: print Slurm's topology.conf (topology/block) for nodes' NVLink fabric identities.

Example::

    gb300 topology --nodes fabric.txt > /etc/slurm/topology.conf

Each line of FILE is ``<hostname> <ClusterUUID> <CliqueId>`` (collect them on the nodes with
``nvidia-smi -q | grep -E 'ClusterUUID|CliqueId'``). Excluded nodes and their reasons go to stderr.
Exit 0 when the file was written (even with exclusions), 2 for unreadable or invalid input.
"""

from __future__ import annotations

import argparse
from typing import Any

from gb300.slurm import topology

HELP = "print topology.conf (topology/block) for nodes' ClusterUUID/CliqueId"


def add_parser(subparsers: Any) -> None:
    """Register ``topology`` on the CLI's subparsers (``argparse._SubParsersAction``)."""
    parser = subparsers.add_parser(
        "topology",
        help=HELP,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    topology.add_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Write topology.conf to stdout, exclusions and problems to stderr; the exit status."""
    return topology.main(args)
