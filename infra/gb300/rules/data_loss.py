"""``storage-data-loss``: a plan that would replace or delete stateful storage is an error unless allowed.

Azure Managed Lustre cannot change size or SKU, and a storage account cannot change name, region or kind: a
new value means Pulumi replaces the resource, and the files go with the old one. Rules see only what the
program declares, so this check also needs what is deployed: the stack's state as ``pulumi stack export``
writes it (``gb300 plan --state FILE``; see :mod:`gb300.plan.state`). It compares, for each stateful type of
``data/storage.yaml``, the inputs that force replacement, and reports:

* a changed replace-triggering input (``storageCapacityTiB: 128 -> 256``; a Lustre filesystem's tie to Blob,
  ``hsm``, added, changed or removed): ERROR;
* a deployed stateful resource the plan no longer declares, or declares under a new URN: ERROR; an alias is
  suggested only when the plan declares the same Azure resource (the same ``identifiedBy`` names: resource group,
  parent and own name) under another URN, never for a different resource of the type;
* the same, when ``gb300:storage.allowReplace`` names the store: WARNING (the plan still says what is lost).

Under ``pulumi up`` the same resources are ``protect``-ed with ``replace_on_changes`` set, so the engine stops
before deleting them even when this check was skipped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gb300.azure.inventory import without_subscription
from gb300.facts import storage_facts
from gb300.findings import Level, Report
from gb300.resources import DeployedResource, Resource
from gb300.rules.base import RuleContext, state_rule


def normalised(value: Any) -> Any:
    """``value`` as the state comparison compares it: strings trimmed, lowercased and without the subscription id,
    whole floats as ints, the same inside mappings and lists (the plan's state changes, :mod:`gb300.plan.glance`,
    compare with it too)."""
    if isinstance(value, str):
        return without_subscription(value.strip().lower())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: normalised(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalised(v) for v in value]
    return value


def _show_tie(value: Any) -> str:
    """A Lustre filesystem's blob integration (``hsm``) as a reader knows it: the container and the import prefix."""
    settings = value.get("settings") if isinstance(value, Mapping) else None
    if not isinstance(settings, Mapping):
        return "not tied to Blob"
    container = str(settings.get("container", "?")).rsplit("/", 1)[-1]
    return f"tied to container {container!r} (import {settings.get('importPrefix', '/')!r})"


def _keep_the_tie(deployed: Any) -> str:
    """How to keep a deployed filesystem's tie to Blob (or its absence): the keys that say so in the stack."""
    keep = (
        "set gb300:storage.lustre.blobIntegration.enabled: true with the deployed container and prefixes"
        if deployed
        else "remove gb300:storage.lustre.blobIntegration.enabled: true (no tie is the default)"
    )
    return (
        f" The tie to Blob is set only when a filesystem is created: to keep the deployed one as it is, {keep}; "
        "or migrate (docs/storage.md#tying-a-deployed-filesystem-to-blob)."
    )


def _show(value: Any, prop: str = "") -> str:
    if prop == "hsm":
        return _show_tie(value)
    if isinstance(value, Mapping) and set(value) == {"name"}:
        return repr(value["name"])
    if isinstance(value, str) and value.startswith("/subscriptions/"):
        return value.rsplit("/", 1)[-1]
    return repr(value)


def _identity(inputs: Mapping[str, Any], keys: Sequence[str]) -> tuple[Any, ...] | None:
    """The Azure identity of a resource: its ``keys`` inputs, normalized; None when one is unknown."""
    values = tuple(normalised(inputs.get(k)) for k in keys)
    return values if keys and all(isinstance(v, str) and v for v in values) else None


def _moved(old: DeployedResource, planned: Sequence[Resource], keys: Sequence[str]) -> str:
    """An alias hint when the plan declares the same Azure resource as ``old`` under another URN, else nothing."""
    mine = _identity(old.inputs, keys)
    if mine is None:
        return ""
    same = [r.urn for r in planned if r.type == old.type and _identity(r.inputs, keys) == mine]
    if not same:
        return ""
    return (
        f" (the plan declares the same Azure resource, {'/'.join(str(v) for v in mine)}, under another URN, "
        f"{same[0]}: give it the alias {old.urn} instead, and Pulumi keeps it)"
    )


def _state(resources: Sequence[Resource], ctx: RuleContext) -> tuple[object, ...]:
    """The check's arguments: the plan, the deployed state and the consent, gb300:storage.allowReplace."""
    return (resources, ctx.deployed or (), ctx.config.storage.allow_replace if ctx.config else ())


def _losses(
    planned: Sequence[Resource], deployed: Sequence[DeployedResource]
) -> Iterator[tuple[DeployedResource, Mapping[str, Any], Resource | None, list[str]]]:
    """Each deployed stateful resource the plan deletes (``new`` None) or replaces (``changes`` names why)."""
    stateful = storage_facts.stateful()
    by_urn = {r.urn: r for r in planned}
    for old in deployed:
        spec = stateful.get(old.type)
        if spec is None:
            continue
        new = by_urn.get(old.urn)
        changes = (
            []
            if new is None
            else [
                f"{prop}: {_show(old.inputs.get(prop), prop)} -> {_show(new.inputs.get(prop), prop)}"
                for prop in spec["replaceOn"]
                if normalised(old.inputs.get(prop)) != normalised(new.inputs.get(prop))
            ]
        )
        if new is None or changes:
            yield old, spec, new, changes


def lost(planned: Sequence[Resource], deployed: Sequence[DeployedResource]) -> list[tuple[str, str]]:
    """(what, name) of every stateful store whose data the plan loses, consented to or not: the plan's
    ``summary.destroys.dataAtRisk`` (:func:`gb300.rules.destroy.summary`)."""
    return [(str(spec["what"]), old.name) for old, spec, _new, _changes in _losses(planned, deployed)]


@state_rule("storage-data-loss", _state)
def data_loss(
    planned: Sequence[Resource], deployed: Sequence[DeployedResource], allow_replace: Sequence[str]
) -> Iterator[Report]:
    """Findings for every deployed stateful resource the plan would replace or delete."""
    for old, spec, new, changes in _losses(planned, deployed):
        key = str(spec["key"])
        allowed = key in allow_replace
        level = Level.WARNING if allowed else Level.ERROR
        advice = (
            f"allowed by gb300:storage.allowReplace ({key}): copy what you need off it first."
            if allowed
            else f"Revert the change, or copy the data off and add '{key}' to gb300:storage.allowReplace."
        )
        if new is None:
            moved = _moved(old, planned, spec.get("identifiedBy") or [])
            yield Report(
                level,
                old.urn,
                f"the plan would delete {spec['what']} ({old.name}){moved}; its data would be lost. {advice}",
            )
            continue
        if changes:
            migrate = _keep_the_tie(old.inputs.get("hsm")) if any(c.startswith("hsm:") for c in changes) else ""
            yield Report(
                level,
                old.urn,
                f"{'; '.join(changes)} replaces {spec['what']} ({old.name}): Azure cannot change these in place, "
                f"so the data would be lost. {advice}{migrate}",
            )


RULE_ID = data_loss.id
