"""``destroys-deployed``: a plan that would delete or replace machines or data of the deployed stack is an error.

Like ``storage-data-loss`` it needs what is deployed (``gb300 plan --state FILE``, :mod:`gb300.plan.state`),
so it runs in ``gb300 plan --state`` only. It compares every deployed resource of a watched kind with what
the program declares now:

* scale sets (azure-native's compute 2026-03-01 package), interconnect groups, VMs and
  managed disks (the head's state disk): deleted (no longer declared, or declared under another URN, as when a
  pool is renamed or shrunk) or replaced (an input Azure cannot change in place changed);
* racks still in the state as the Python dynamic resources of gb300 0.1 (``gb300Kind`` ``rack-scale-set``,
  ``pool-scale-set``, ``interconnect-block``): the plan declares them under new URNs, so until
  ``gb300 migrate-racks`` has moved every one of them (docs/fabric.md, "Migrating racks from gb300 0.1"), each
  is a deletion: a half-done migration is refused;
* subnets: given another address prefix or replaced (Azure cannot re-address a subnet that holds NICs, a
  Lustre filesystem or private endpoints; a subnet must never move), or deleted while VMs are in it.

Each is an ERROR naming the resource and the VMs it takes with it. ``gb300:allowDestroy`` entries
(``{resource: <name or glob>, reason: <why>}``) turn the findings of the resources they name into WARNINGs; an
entry that names nothing the plan destroys is itself a WARNING, so a consent does not outlive its change.
Lustre, the storage account and blob containers are ``storage-data-loss``'s (``gb300:storage.allowReplace``).
docs/day2.md has the walkthroughs.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gb300 import tags as gb300_tags
from gb300.azure.inventory import LEGACY_KINDS, LEGACY_SCALE_SETS, legacy_kind, mapping, whole, without_subscription
from gb300.components import compute_package
from gb300.config import AllowDestroy
from gb300.findings import Level, Report
from gb300.resources import DeployedResource, Resource
from gb300.rules.base import RuleContext, count, state_rule
from gb300.rules.data_loss import lost

VM = "azure-native:compute:VirtualMachine"
SUBNET = "azure-native:network:Subnet"
NIC = "azure-native:network:NetworkInterface"
GROUP = "azure-native:network:InterconnectGroup"
DISK = "azure-native:compute:Disk"
SCALE_SET = compute_package.SCALE_SET_TOKEN
# Typed azure-native resources: what they are called in messages and the inputs whose change replaces them
# (a new name, resource group, location or parent is a new resource in ARM; a VM's zone is fixed at creation).
TYPED: dict[str, tuple[str, tuple[str, ...]]] = {
    VM: ("VM", ("vmName", "resourceGroupName", "location", "zones")),
    GROUP: ("interconnect group", ("interconnectGroupName", "resourceGroupName", "location")),
    SUBNET: ("subnet", ("subnetName", "virtualNetworkName", "resourceGroupName")),
    DISK: ("managed disk", ("diskName", "resourceGroupName", "location", "zones", "creationData")),
    # and each registration's own replaceOnChanges (compute_package.SCALE_SET_REPLACE_ON_CHANGES)
    SCALE_SET: ("scale set", ("vmScaleSetName", "resourceGroupName", "location")),
}
LEGACY_WHAT = {kind: f"{what} (a gb300 0.1 dynamic resource)" for kind, what in LEGACY_KINDS.items()}


@dataclass(frozen=True)
class Destroyed:
    """One deployed resource the plan deletes, replaces or moves, with the VMs that go with it."""

    old: DeployedResource
    what: str
    action: str  # "delete", "replace" or "move"
    detail: str
    vms: int


def _kind(resource: DeployedResource | Resource) -> str | None:
    legacy = legacy_kind(resource)
    if legacy is not None:
        return legacy
    return resource.type if resource.type in TYPED else None


def _what(kind: str, resource: DeployedResource) -> str:
    if kind in LEGACY_WHAT:
        return LEGACY_WHAT[kind]
    if kind == SCALE_SET and gb300_tags.rack_of(mapping(resource.inputs.get("tags"))):
        return "rack scale set"
    return TYPED[kind][0]


def _capacity(resource: DeployedResource) -> int:
    return whole(mapping(resource.inputs.get("sku")).get("capacity")) or 0


def _at(data: Any, path: str) -> Any:
    for step in path.split("."):
        if not isinstance(data, Mapping):
            return None
        data = data.get(step)
    return data


def _norm(value: Any) -> Any:
    if isinstance(value, str):
        return without_subscription(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: _norm(v) for k, v in value.items() if k != "__provider"}
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    return value


def _replaces(kind: str, old: DeployedResource, new: Resource) -> list[str]:
    """The inputs whose change makes the engine replace ``old`` with ``new``."""
    paths = [*TYPED[kind][1], *getattr(new, "replace_on_changes", ())]
    return [p for p in dict.fromkeys(paths) if _norm(_at(old.inputs, p)) != _norm(_at(new.inputs, p))]


def _vms_in(deployed: Sequence[DeployedResource], needle: str) -> int:
    """VMs of deployed scale sets and NICs whose inputs mention ``needle`` (a subnet path, a group id)."""
    needle = needle.lower()
    total = 0
    for d in deployed:
        kind = _kind(d)
        if kind == SCALE_SET or kind in LEGACY_SCALE_SETS:
            profile = d.inputs.get("virtualMachineProfile", d.inputs.get("properties"))
            if needle in json.dumps(profile, default=str).lower():
                total += _capacity(d)
        elif d.type == NIC and needle in json.dumps(d.inputs.get("ipConfigurations"), default=str).lower():
            total += 1
    return total


def _vms(kind: str, old: DeployedResource, deployed: Sequence[DeployedResource]) -> int:
    if kind == SCALE_SET or kind in LEGACY_SCALE_SETS:
        return _capacity(old)
    if kind == VM:
        return 1
    if kind == GROUP and old.id:
        return _vms_in(deployed, old.id)
    if kind == SUBNET:
        subnet = old.inputs.get("subnetName") or old.name
        return _vms_in(deployed, f'/subnets/{subnet}"')
    return 0


def destroyed(planned: Sequence[Resource], deployed: Sequence[DeployedResource]) -> list[Destroyed]:
    """Every deployed resource of a watched kind that the plan deletes, replaces or (a subnet) moves."""
    by_urn = {r.urn: r for r in planned}
    out = []
    for old in deployed:
        kind = _kind(old)
        if kind is None:
            continue
        new = by_urn.get(old.urn)
        vms = _vms(kind, old, deployed)
        if new is None or _kind(new) != kind:
            if kind == SUBNET and not vms:
                continue  # an empty subnet (Bastion's, turned off) takes nothing with it
            detail = (
                "still in the state as a gb300 0.1 dynamic resource: run `gb300 migrate-racks` and the commands it "
                "writes before `pulumi up` (docs/fabric.md, Migrating racks from gb300 0.1)"
                if kind in LEGACY_KINDS
                else "the plan no longer declares it"
            )
            out.append(Destroyed(old, _what(kind, old), "delete", detail, vms))
            continue
        replaces = _replaces(kind, old, new)
        if replaces:
            out.append(Destroyed(old, _what(kind, old), "replace", f"{', '.join(replaces)} changed", vms))
            continue
        if kind == SUBNET:
            before, after = old.inputs.get("addressPrefix"), new.inputs.get("addressPrefix")
            if before != after:
                out.append(Destroyed(old, "subnet", "move", f"addressPrefix {before} -> {after}", vms))
    return out


def _azure_name(old: DeployedResource) -> str:
    for key in (
        "resourceName",
        "vmScaleSetName",
        "interconnectBlockName",
        "vmName",
        "interconnectGroupName",
        "diskName",
        "subnetName",
    ):
        value = old.inputs.get(key)
        if isinstance(value, str) and value:
            return value
    return old.name


def _consent(entry: AllowDestroy, item: Destroyed) -> bool:
    names = {item.old.name, _azure_name(item.old)}
    return any(fnmatch.fnmatchcase(name, entry.resource) for name in names)


_VERB = {"delete": "deletes", "replace": "replaces (deletes, then creates again)", "move": "moves"}
_LOSS = {
    "subnet": "Azure cannot re-address a subnet in use",
    "managed disk": "what it holds (the head's Slurm state and accounting database) is lost",
}


def _state(resources: Sequence[Resource], ctx: RuleContext) -> tuple[object, ...]:
    """The check's arguments: the plan, the deployed state and the consent, gb300:allowDestroy."""
    return (resources, ctx.deployed or (), ctx.config.allow_destroy if ctx.config else ())


@state_rule("destroys-deployed", _state)
def findings(
    planned: Sequence[Resource], deployed: Sequence[DeployedResource], allow: Sequence[AllowDestroy]
) -> Iterator[Report]:
    """One finding per destroyed resource (ERROR, or WARNING with consent), one WARNING per unused consent."""
    items = destroyed(planned, deployed)
    for item in items:
        consent = next((e for e in allow if _consent(e, item)), None)
        name = _azure_name(item.old)
        affected = f"{count(item.vms, 'VM')} affected" if item.vms else "no VMs affected"
        loss = _LOSS.get(item.what, "its machines and their local disks are lost" if item.vms else "")
        head = (
            f"the plan {_VERB[item.action]} {item.what} {name} ({item.detail}; {affected}"
            f"{'; ' + loss if loss else ''})."
        )
        if consent is not None:
            yield Report(Level.WARNING, item.old.urn, f"{head} Allowed by gb300:allowDestroy ({consent.reason}).")
        else:
            yield Report(
                Level.ERROR,
                item.old.urn,
                f"{head} Revert the change, or, if it is intended, add {{resource: {name}, reason: <why>}} to "
                "gb300:allowDestroy (docs/day2.md).",
            )
    for i, entry in enumerate(allow):
        if not any(_consent(entry, item) for item in items):
            yield Report(
                Level.WARNING,
                f"gb300:allowDestroy[{i}].resource",
                f"{entry.resource!r} names nothing this plan deletes, replaces or moves; remove the entry once "
                "its change is deployed, so it cannot consent to a later one.",
            )


# Deployed resources that are bookkeeping, not Azure resources: never counted as destroyed.
_BOOKKEEPING = ("gb300:", "pulumi:providers:", "random:", "pulumi:pulumi:Stack")
_MACHINES = (SCALE_SET, VM, *LEGACY_SCALE_SETS)


def _short(resource_type: str) -> str:
    """``azure-native:monitor:DataCollectionRuleAssociation`` -> ``DataCollectionRuleAssociation``."""
    return resource_type.rsplit(":", 1)[-1]


def summary(planned: Sequence[Resource], deployed: Sequence[DeployedResource]) -> dict[str, Any]:
    """What the change destroys, for the plan's summary (``summary.destroys``) and the one line a reviewer reads
    (:func:`gb300.ops.ci_summary.impact_line`, shared by the text plan and the pull request comment).

    ``resources``: machines, groups, subnets and disks deleted, replaced or moved (the watched kinds above);
    ``vms``: the VMs they take (a VM counts once); ``kinds``: how many of each kind (``rack scale set``: 4);
    ``replaced``: the machines ``pulumi up`` deletes and creates again (the head when its custom data changes);
    ``dataAtRisk``: stateful stores whose data goes with them (the head's state disk, Lustre, storage accounts,
    containers: :func:`gb300.rules.data_loss.lost`); ``others``: the other deployed resources the plan no longer
    declares, by type (a rack's ``-logs`` data collection rule association goes with its rack), counted apart so
    they never read as machines.
    """
    items = destroyed(planned, deployed)
    # A VM counts once: an interconnect group's VMs are its racks' VMs (counted with the racks when they go too).
    machines = sum(i.vms for i in items if _kind(i.old) in _MACHINES)
    groups = sum(i.vms for i in items if _kind(i.old) == GROUP)
    kinds: dict[str, int] = {}
    for item in items:
        kinds[item.what] = kinds.get(item.what, 0) + 1
    replaced = sorted(
        f"{'the head VM' if gb300_tags.role_of(mapping(i.old.inputs.get('tags'))) == gb300_tags.ROLE_HEAD else i.what} "
        f"{_azure_name(i.old)}"
        for i in items
        if i.action == "replace" and _kind(i.old) in _MACHINES
    )
    at_risk = [f"{name} ({what})" for what, name in lost(planned, deployed)]
    at_risk += [f"{_azure_name(i.old)} (a managed disk: {_LOSS[i.what]})" for i in items if _kind(i.old) == DISK]
    counted = {i.old.urn for i in items}
    planned_urns = {r.urn for r in planned}
    others: dict[str, int] = {}
    for old in deployed:
        if old.urn in counted or old.urn in planned_urns or old.type.startswith(_BOOKKEEPING):
            continue
        others[_short(old.type)] = others.get(_short(old.type), 0) + 1
    return {
        "resources": len(items),
        "vms": max(machines, groups),
        "kinds": dict(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
        "replaced": replaced,
        "dataAtRisk": sorted(set(at_risk)),
        "others": dict(sorted(others.items())),
    }


RULE_ID = findings.id
