"""The last step of ``gb300 migrate-racks``'s commands.sh: read ``pulumi preview --json`` and stop on a rack that
would be replaced or deleted.

After ``pulumi import``, every rack shows an *update*, and that is expected: azure-native's import ``Read``
returns every value Azure filled in (defaults the program never sets) as an input, and the engine keeps the import
file's inputs only for top-level keys the Read did not return (pulumi/pulumi ``pkg/resource/deploy/step.go``
``mergeSuppliedProperties``, called by ``ImportStep.Apply``), so the state's nested inputs differ from the
program's. The first ``pulumi up`` sends the program's scale set model to Azure; the racks' upgrade policy is
``Manual``, so a changed model reaches a rack's VMs only when they are reimaged (``gb300 rollout``). A *replace* or
a *delete* of a rack deletes its VMs, so this refuses to go on, says that the state has already moved and how to
put it back.

The JSON is pulumi/pulumi ``pkg/display/json.go`` ``PreviewDigest``: ``steps``, each a ``PreviewStep`` with
``op`` (``pkg/resource/deploy/step.go``: ``same``, ``create``, ``update``, ``delete``, ``replace``,
``create-replacement``, ``delete-replaced``, ...), ``urn`` and ``newState``/``oldState`` (with ``type``).

commands.sh runs this file as a script (``<gb300's python> check_preview.py PREVIEW ROLLBACK TYPE...``): it is
copied next to it for review, and run by the interpreter that ran ``gb300 migrate-racks``, so that it reads the
preview with gb300's strict reader of files from elsewhere (:mod:`gb300.io.reader`: size cap, no duplicate keys,
bounded nesting; docs/security.md).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# The ops that delete the Azure resource behind a state entry (pkg/resource/deploy/step.go).
DESTRUCTIVE = frozenset({"replace", "create-replacement", "delete-replaced", "delete"})


def _type(step: Mapping[str, Any]) -> str:
    for key in ("newState", "oldState"):
        state = step.get(key)
        if isinstance(state, Mapping) and state.get("type"):
            return str(state["type"])
    urn = str(step.get("urn", ""))
    return urn.split("::")[-2].rsplit("$", 1)[-1] if urn.count("::") >= 3 else ""


def _name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def check(preview: Mapping[str, Any], rack_types: Sequence[str], rollback: str) -> tuple[bool, list[str]]:
    """Whether the migration may go on, and the lines to print: a count per op, then (on a refusal) one line
    naming each rack that would be replaced or deleted, what has moved and how to roll back."""
    steps = [s for s in preview.get("steps") or [] if isinstance(s, Mapping)]
    ops = Counter(str(s.get("op", "")) for s in steps)
    racks: dict[str, set[str]] = {}
    for step in steps:
        op = str(step.get("op", ""))
        if op in DESTRUCTIVE and _type(step) in rack_types:
            racks.setdefault(_name(str(step.get("urn", ""))), set()).add(op)
    summary = ", ".join(f"{n} {op}" for op, n in sorted(ops.items())) or "no steps"
    if not racks:
        return True, [
            f"preview: {summary}. Updates of the racks are expected after an import (azure-native's Read returns "
            "Azure's defaults as inputs); no rack is replaced or deleted, so the next 'pulumi up' only writes the "
            "program's inputs into the state"
        ]
    shown = ", ".join(f"{name} ({'/'.join(sorted(o))})" for name, o in sorted(racks.items())[:5])
    more = f" and {len(racks) - 5} more" if len(racks) > 5 else ""
    return False, [
        f"migrate-racks: refusing to go on: the preview would replace or delete {len(racks)} rack(s): {shown}{more}. "
        "The state has already moved (racks imported, legacy entries deleted from the state; Azure is unchanged). "
        f"Do not run 'pulumi up'; roll back with 'pulumi stack import --file {rollback}' and see docs/fabric.md"
    ]


def main(argv: Sequence[str]) -> int:
    """``check_preview.py PREVIEW ROLLBACK TYPE...``: exit 0 to go on, 1 to stop, 2 on a preview it cannot read."""
    if len(argv) < 3:
        print("usage: check_preview.py PREVIEW_JSON ROLLBACK_STATE RACK_TYPE...", file=sys.stderr)
        return 2
    from gb300.errors import ConfigError  # noqa: PLC0415 - run as a script by gb300's interpreter
    from gb300.io import reader  # noqa: PLC0415

    try:
        preview = reader.load_json(Path(argv[0]), reader.PREVIEW)
    except ConfigError as exc:
        print(
            f"migrate-racks: cannot read the preview ({exc}); the state has already moved: roll back "
            f"with 'pulumi stack import --file {argv[1]}'",
            file=sys.stderr,
        )
        return 2
    if not isinstance(preview, Mapping):
        print(f"migrate-racks: {argv[0]} is not a 'pulumi preview --json' document", file=sys.stderr)
        return 2
    ok, lines = check(preview, tuple(argv[2:]), argv[1])
    for line in lines:
        print(line, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
