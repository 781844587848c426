"""Every VM the resources declare, scale sets and single VMs alike, in the shape quota and image rules read.

A scale set (dynamic, typed or generic, see :mod:`gb300.azure.inventory`) counts ``sku.capacity`` VMs; a typed
``compute:VirtualMachine`` counts one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gb300.azure import inventory
from gb300.resources import Resource

VM = "azure-native:compute:VirtualMachine"


@dataclass(frozen=True)
class Machine:
    """VMs of one size declared by one resource: where, how many, booting what."""

    urn: str
    name: str
    size: str
    count: int
    location: str | None
    zones: tuple[str, ...]
    pool: str | None
    image_reference: Mapping[str, Any]
    capacity_reservation_group: str | None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _location(resource: Resource) -> str | None:
    value = resource.inputs.get("location")
    return value.replace(" ", "").lower() if isinstance(value, str) and value else None


def _zones(resource: Resource) -> tuple[str, ...]:
    """The top-level ``zones`` Azure places the VMs in (a tag places nothing)."""
    raw = resource.inputs.get("zones")
    zones = {str(z) for z in raw if isinstance(z, str | int)} if isinstance(raw, list | tuple) else set()
    return tuple(sorted(zones))


def _reservation(profile: Mapping[str, Any]) -> str | None:
    group = inventory.dig(profile, "capacityReservation", "capacityReservationGroup", "id")
    return group if isinstance(group, str) and group else None


def machines(resources: Iterable[Resource]) -> list[Machine]:
    """One :class:`Machine` per scale set or VM, in URN order."""
    found = (inventory.read_once(r, _machine) for r in sorted(resources, key=lambda r: r.urn))
    return [m for m in found if m is not None]


def _machine(resource: Resource) -> Machine | None:
    if inventory.is_scale_set(resource):
        ss = inventory.scale_set(resource)
        profile = _mapping(ss.properties.get("virtualMachineProfile"))
        return Machine(
            urn=ss.urn,
            name=ss.name,
            size=ss.vm_size,
            count=ss.capacity,
            location=_location(resource),
            zones=_zones(resource),
            pool=ss.pool or ss.name,
            image_reference=_mapping(_mapping(profile.get("storageProfile")).get("imageReference")),
            capacity_reservation_group=_reservation(profile),
        )
    if resource.type == VM:
        inputs = resource.inputs
        size = _mapping(inputs.get("hardwareProfile")).get("vmSize")
        return Machine(
            urn=resource.urn,
            name=str(inputs.get("vmName") or resource.name),
            size=size if isinstance(size, str) else "",
            count=1,
            location=_location(resource),
            zones=_zones(resource),
            pool=None,
            image_reference=_mapping(_mapping(inputs.get("storageProfile")).get("imageReference")),
            capacity_reservation_group=_reservation(inputs),
        )
    return None
