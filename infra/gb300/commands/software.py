"""``gb300 software lock``: pin what nodes download (sha256 of files, fingerprints of apt signing keys, the
manifest digests of container images, resolved from their tags through the registry's API).

Nodes refuse any file or repository key that infra/gb300/data/checksums.yaml does not pin, so a new version (in
versions.yaml or a stack's ``gb300:software``) needs its checksums before it can install on plain Ubuntu; a
container image without its digest there is pulled by its tag, and ``gb300 plan`` warns (software-checksums).
Run this on a machine with Internet access and gpg, review the diff of checksums.yaml, and commit it::

    gb300 software lock                  # pin every gap of the defaults and of every stack in stacks/
    gb300 software lock --stack prod     # only the defaults and stack "prod"
    gb300 software lock --check          # no network: list the gaps, exit 1 when there are any

Exit status: 0 when nothing is left unpinned, 1 when something could not be pinned (or, with --check,
when something is unpinned), 2 for a bad stack or data file.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gb300 import config, paths
from gb300.config import stacks
from gb300.errors import BootstrapError, UsageError
from gb300.facts import software
from gb300.facts.software import SoftwareSet, apply_software_overrides, load_software
from gb300.ops.software_lock import gaps, image_gaps, lock, write_checksums

NAME = "software"


def add_parser(subparsers: Any) -> None:
    """Register ``software`` and its ``lock`` action on the CLI's subparsers."""
    parser = subparsers.add_parser(
        NAME,
        help="pin node downloads in checksums.yaml (gb300 software lock)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    lock_parser = actions.add_parser(
        "lock",
        help="download unpinned files and keys and pin them in checksums.yaml",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    lock_parser.add_argument(
        "--stack",
        action="append",
        metavar="NAME",
        help="also cover this stack's gb300:software overrides (repeatable; default: every stack in stacks/)",
    )
    lock_parser.add_argument("--check", action="store_true", help="no network: list what is unpinned, exit 1 if any")
    lock_parser.add_argument(
        "--timeout", type=float, default=60.0, metavar="SECONDS", help="per-download timeout (default 60)"
    )


def _stack_names(requested: list[str] | None) -> list[str]:
    if requested:
        return requested
    return stacks.stack_names()


def software_sets(names: list[str]) -> list[SoftwareSet]:
    """The defaults, and each stack's resolved software (its ``gb300:software`` over the defaults)."""
    sets = [load_software()]
    for name in names:
        stack_path = stacks.stack_file(name)
        if not stack_path.exists():
            raise UsageError(f"--stack {name}: no stack file {stack_path.relative_to(paths.REPO_ROOT)}")
        raw = config.load_stack_file(stack_path)
        sets.append(apply_software_overrides(raw.get("software")))
    return sets


def container_images() -> dict[str, str]:
    """The container images nodes pull (service -> registry/repository:tag), pinned by digest in checksums.yaml."""
    return software.container_images()


def run(args: argparse.Namespace) -> int:
    """Report or fill the gaps in checksums.yaml; the exit status."""
    try:
        todo = gaps(software_sets(_stack_names(args.stack))) + image_gaps(container_images())
    except BootstrapError as exc:
        raise UsageError(str(exc)) from exc
    target = software.CHECKSUMS_FILE
    where = target.relative_to(paths.REPO_ROOT) if target.is_relative_to(paths.REPO_ROOT) else target
    if not todo:
        print(f"every download is pinned in {where}")
        return 0
    if args.check:
        for gap in todo:
            need = {"file": "sha256", "key": "key fingerprint", "image": "digest", "commit": "commit id"}[gap.kind]
            print(f"{gap.owner}: no {need} for {gap.url}")
        print(
            f"{len(todo)} unpinned in {where}; run `gb300 software lock` where the Internet is reachable",
            file=sys.stderr,
        )
        return 1
    images: dict[str, dict[str, Any]] = {}
    commits: dict[str, dict[str, Any]] = {}
    files, keys, result = lock(
        todo,
        timeout=args.timeout,
        progress=lambda line: print(line, file=sys.stderr),
        images=images,
        commits=commits,
    )
    if files or keys or images or commits:
        write_checksums(files, keys, new_images=images, new_commits=commits)
    for line in result.pinned:
        print(f"pinned {line}")
    for line in result.failed:
        print(f"FAILED {line}", file=sys.stderr)
    print(f"{len(result.pinned)} pinned, {len(result.failed)} failed; review `git diff {where}`", file=sys.stderr)
    return 1 if result.failed else 0
