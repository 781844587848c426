"""The deployed state the plan compares against: ``pulumi stack export`` output, read offline.

Why a state file and not a key in the stack: the state is what Pulumi itself will diff against, so it cannot
drift from reality the way a hand-maintained "deployed capacity" key can; ``pulumi stack export`` needs only
read access to the backend and no Azure credentials. CI runs
``pulumi stack export --stack <stack> > state.json && gb300 plan --stack <stack> --state state.json``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gb300.errors import UsageError
from gb300.io import reader
from gb300.resources import DeployedResource

_VERSIONS = (1, 2, 3)  # checkpoint versions `pulumi stack export` has written; 3 since Pulumi 1.x


def parse_state(doc: Any, *, where: str = "state") -> list[DeployedResource]:  # noqa: PLR0912 - one check per shape
    """Deployed resources of a ``pulumi stack export`` document (checkpoint version 3).

    A document of another shape is a :class:`UsageError` naming what is wrong, never an empty state: an
    empty state would let the data-loss check pass without comparing anything.
    """
    if not isinstance(doc, dict):
        raise UsageError(f"{where} is not a 'pulumi stack export' document: it is a JSON {_kind(doc)}, not an object")
    version = doc.get("version")
    if "version" in doc and (isinstance(version, bool) or version not in _VERSIONS):
        raise UsageError(f"{where}: 'version' must be one of {list(_VERSIONS)} (got {version!r})")
    deployment = doc.get("deployment")
    if deployment is None:
        if "version" in doc:
            return []  # a stack that was never deployed exports no deployment: nothing to lose yet
        raise UsageError(f"{where} is not a 'pulumi stack export' document: it has no 'deployment' object")
    if not isinstance(deployment, dict):
        raise UsageError(f"{where}: 'deployment' must be an object (got a JSON {_kind(deployment)})")
    resources = deployment.get("resources")
    if resources is None:
        return []
    if not isinstance(resources, list):
        raise UsageError(f"{where}: 'deployment.resources' must be a list (got a JSON {_kind(resources)})")
    out: list[DeployedResource] = []
    for i, raw in enumerate(resources):
        at = f"{where}: deployment.resources[{i}]"
        if not isinstance(raw, dict):
            raise UsageError(f"{at} must be an object (got a JSON {_kind(raw)})")
        for key in ("urn", "type"):
            if not isinstance(raw.get(key), str) or not raw[key]:
                raise UsageError(f"{at}.{key} must be a non-empty string (got {_short(raw.get(key))})")
        if not raw["urn"].startswith("urn:pulumi:"):
            raise UsageError(f"{at}.urn must be a Pulumi URN 'urn:pulumi:...' (got {_short(raw['urn'])})")
        inputs = raw.get("inputs")
        if inputs is not None and not isinstance(inputs, dict):
            raise UsageError(f"{at}.inputs must be an object (got a JSON {_kind(inputs)})")
        if raw.get("delete") or raw.get("pendingReplacement"):
            continue  # already being deleted: not data the next update would newly lose
        urn = str(raw["urn"])
        out.append(
            DeployedResource(
                urn=urn,
                type=str(raw["type"]),
                name=urn.rsplit("::", 1)[-1],
                id=raw.get("id") if isinstance(raw.get("id"), str) else None,
                inputs=inputs or {},
            )
        )
    return out


def _kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_state(path: Path) -> Any:
    """The JSON document of a ``pulumi stack export`` file, read by the strict reader (:mod:`gb300.io.reader`): a
    missing, oversized or malformed file is one line naming it (exit 2)."""
    return reader.load_json(path, reader.STATE)


def load_state(path: Path) -> list[DeployedResource]:
    """Read a ``pulumi stack export`` file into its resources (:func:`read_state`, :func:`parse_state`)."""
    return parse_state(read_state(path), where=f"state file {path}")


def state_stacks(deployed: Sequence[DeployedResource]) -> list[str]:
    """The stacks a state's URNs name (``urn:pulumi:<stack>::<project>::...``)."""
    return sorted({d.urn.split(":", 3)[2].split("::", 1)[0] for d in deployed if d.urn.count(":") >= 3})


def added(planned: Sequence[Any], deployed: Sequence[DeployedResource]) -> dict[str, int]:
    """What the plan adds to the deployed state: resources under a URN the state does not hold, and their VMs
    (``summary.adds`` of ``gb300 plan --state``, shown in the pull request comment beside ``summary.destroys``)."""
    from gb300.azure.machines import machines  # noqa: PLC0415 - the plan's layer, loaded with it

    known = {d.urn for d in deployed}
    new = [r for r in planned if r.urn not in known]
    return {"resources": len(new), "vms": sum(m.count for m in machines(new))}


def deployed_subscription(deployed: Sequence[DeployedResource]) -> str | None:
    """The subscription the state's Azure resources live in: the one their ids name most often
    (``/subscriptions/<id>/...``), None when no id names one (a state never deployed, or not gb300's)."""
    found = Counter(
        parts[1].lower()
        for d in deployed
        if d.id and (parts := d.id.strip("/").split("/")) and len(parts) > 1 and parts[0].lower() == "subscriptions"
    )
    return found.most_common(1)[0][0] if found else None
