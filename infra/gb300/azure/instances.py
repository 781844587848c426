"""Which VMs of each rack scale set run the scale set's latest model: Azure's ``latestModelApplied``, asked live or
read from a saved answer, as :mod:`gb300.azure.quota` reads usages.

Why Azure and not the state: ``pulumi up`` writes the new custom data into each scale set's *model* (and the
state records the new hash tag at once), while ``upgradePolicy: Manual`` leaves every existing VM on the model it
was created with. Azure says which VM that is: each scale set VM carries ``latestModelApplied``, "whether or not
the VM is up-to-date with the latest overall scale set model" (MicrosoftDocs/azure-docs
``articles/virtual-machine-scale-sets/virtual-machine-scale-sets-upgrade-scale-set.md``, "How to update global
scale set properties"). Sources:

* a saved answer: the JSON of ``az vmss list-instances --resource-group RG --name RACK -o json`` (a list; the
  CLI lifts ``properties`` to the top), or the REST body of ``GET .../virtualMachineScaleSets/RACK/virtualMachines``
  (``{"value": [...]}``, ``properties.latestModelApplied``); a file may hold the VMs of several racks (each VM's
  ``id`` names its scale set), and a directory is read file by file (``*.json``);
* ``live``: azure-mgmt-compute's ``virtual_machine_scale_set_vms.list`` per rack, signed in with gb300's credential
  (:mod:`gb300.azure.credential`).

A rack the answer does not cover is not assumed to be current: :func:`missing` names it and the caller refuses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gb300.errors import ConfigError, UsageError
from gb300.io import reader
from gb300.slurm.hostlist import natural_key

LIVE = "live"
SAVE_HINT = "az vmss list-instances --resource-group RG --name RACK -o json > FILE"
_VM_ID = re.compile(
    r"/subscriptions/[^/]+/resourceGroups/([^/]+)/providers/Microsoft\.Compute/virtualMachineScaleSets/([^/]+)"
    r"/virtualMachines/([^/]+)$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Instance:
    """One VM of a rack scale set: its instance id, computer name (the Slurm node name) and whether it runs the
    scale set's latest model."""

    rack: str
    instance_id: str
    host: str
    latest_model: bool


@dataclass(frozen=True)
class Answer:
    """Azure's VMs per rack scale set (keyed by the lower-case name: Azure names are case-insensitive)."""

    source: str
    racks: Mapping[str, tuple[Instance, ...]]

    def of(self, rack: str) -> tuple[Instance, ...] | None:
        return self.racks.get(rack.lower())


def _instance(raw: Any, where: str) -> Instance:
    """One VM from ``az vmss list-instances`` (properties at the top) or the REST body (under ``properties``)."""
    if not isinstance(raw, Mapping):
        raise UsageError(f"{where} must be an object (a scale set VM)")
    nested = raw.get("properties")
    props: Mapping[str, Any] = nested if isinstance(nested, Mapping) else raw
    latest = props.get("latestModelApplied")
    if not isinstance(latest, bool):
        raise UsageError(
            f"{where}.latestModelApplied must be true or false (got {latest!r}); save it with `{SAVE_HINT}`"
        )
    vm_id = str(raw.get("id") or "")
    match = _VM_ID.search(vm_id)
    if match is None:
        raise UsageError(
            f"{where}.id must be a scale set VM id '.../virtualMachineScaleSets/RACK/virtualMachines/N' (got {vm_id!r})"
        )
    instance_id = str(raw.get("instanceId") or match.group(3))
    os_profile = props.get("osProfile")
    profile: Mapping[str, Any] = os_profile if isinstance(os_profile, Mapping) else {}
    host = str(profile.get("computerName") or raw.get("name") or instance_id)
    return Instance(match.group(2), instance_id, host, latest)


def parse(doc: Any, where: str) -> list[Instance]:
    """The VMs of a saved answer: a list (``az vmss list-instances -o json``) or ``{"value": [...]}`` (REST)."""
    entries = doc.get("value") if isinstance(doc, Mapping) else doc
    if not isinstance(entries, list):
        raise UsageError(f"{where} must be a list of scale set VMs (`{SAVE_HINT}`) or a REST body with 'value'")
    return [_instance(raw, f"{where}[{i}]") for i, raw in enumerate(entries)]


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(path.glob("*.json"))
        if not files:
            raise UsageError(f"--azure {path}: the directory holds no *.json file (save each rack with `{SAVE_HINT}`)")
        return files
    return [path]


def read_saved(path: Path) -> Answer:
    """A saved answer from a file, or from every ``*.json`` file of a directory; a bad file is a :class:`UsageError`."""
    found: list[Instance] = []
    for file in _files(path):
        try:
            doc = reader.load_json(file, reader.AZURE_ANSWER)
        except ConfigError as exc:
            raise UsageError(f"--azure {exc}") from None
        found.extend(parse(doc, f"--azure {file}"))
    return Answer(str(path), _by_rack(found))


def _by_rack(found: Iterable[Instance]) -> dict[str, tuple[Instance, ...]]:
    racks: dict[str, list[Instance]] = {}
    for instance in found:
        racks.setdefault(instance.rack.lower(), []).append(instance)
    return {k: tuple(sorted(v, key=lambda i: natural_key(i.host))) for k, v in racks.items()}


def list_live(client: Any, resource_group: str, rack: str) -> tuple[Instance, ...]:
    """One rack's VMs through azure-mgmt-compute (``GET .../virtualMachineScaleSets/RACK/virtualMachines``)."""
    out = []
    for vm in client.virtual_machine_scale_set_vms.list(resource_group, rack):
        profile = getattr(vm, "os_profile", None)
        host = str(getattr(profile, "computer_name", None) or vm.name)
        out.append(Instance(rack, str(vm.instance_id), host, bool(getattr(vm, "latest_model_applied", False))))
    return tuple(sorted(out, key=lambda i: natural_key(i.host)))


def fetch_live(racks: Sequence[tuple[str, str, str]], client_for: Callable[[str], Any]) -> Answer:
    """Ask Azure for every ``(subscription, resource group, rack)``; an Azure error is a :class:`UsageError`: a
    rollout that cannot read the fleet must not guess."""
    from azure.core.exceptions import AzureError  # noqa: PLC0415 - the SDK loads only when live

    found: dict[str, tuple[Instance, ...]] = {}
    for subscription, group, rack in racks:
        try:
            found[rack.lower()] = list_live(client_for(subscription), group, rack)
        except AzureError as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UsageError(f"--azure live: Azure did not list the VMs of {rack} ({first[:200]})") from None
    return Answer(LIVE, found)


def missing(answer: Answer, racks: Iterable[str]) -> list[str]:
    """The racks the answer says nothing about (no VM listed)."""
    return [r for r in racks if answer.of(r) is None]
