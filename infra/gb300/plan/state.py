"""The deployed state the plan compares against: ``pulumi stack export`` output, read offline.

Why a state file and not a key in the stack: the state is what Pulumi itself will diff against, so it cannot
drift from reality the way a hand-maintained "deployed capacity" key can; ``pulumi stack export`` needs only
read access to the backend and no Azure credentials. CI runs
``pulumi stack export --stack <stack> > state.json && gb300 plan --stack <stack> --state state.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gb300.errors import UsageError
from gb300.rules.data_loss import DeployedResource


def parse_state(doc: Any, *, where: str = "state") -> list[DeployedResource]:
    """Deployed resources of a ``pulumi stack export`` document (checkpoint version 3)."""
    deployment = doc.get("deployment") if isinstance(doc, dict) else None
    if isinstance(doc, dict) and "version" in doc and deployment is None:
        return []  # a stack that was never deployed exports no deployment: nothing to lose yet
    if not isinstance(deployment, dict):
        raise UsageError(f"{where} is not a 'pulumi stack export' document: it has no 'deployment' object")
    out: list[DeployedResource] = []
    for raw in deployment.get("resources") or []:
        if not isinstance(raw, dict) or "urn" not in raw or "type" not in raw:
            continue
        if raw.get("delete") or raw.get("pendingReplacement"):
            continue  # already being deleted: not data the next update would newly lose
        urn = str(raw["urn"])
        out.append(
            DeployedResource(
                urn=urn,
                type=str(raw["type"]),
                name=urn.rsplit("::", 1)[-1],
                id=raw.get("id"),
                inputs=raw.get("inputs") or {},
            )
        )
    return out


def load_state(path: Path) -> list[DeployedResource]:
    """Read a ``pulumi stack export`` file; a missing or malformed file is a usage error naming it."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"state file {path} cannot be read ({exc.strerror})") from None
    except ValueError:
        raise UsageError(f"state file {path} is not JSON; write it with 'pulumi stack export > {path.name}'") from None
    return parse_state(doc, where=f"state file {path}")
