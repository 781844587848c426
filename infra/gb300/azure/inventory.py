"""Typed views over registered resources, shared by the plan summary and the rules.

Rules and the summary read resources, not config: they see exactly what ``pulumi up`` would send. A scale set
appears as a resource of azure-native's compute 2026-03-01 package (:mod:`gb300.components.compute_package`,
which every GPU pool uses), a default-SDK ``compute:VirtualMachineScaleSet``, a generic ``resources:Resource``,
or, in the state of a stack deployed by gb300 0.1, that release's Python dynamic resource (:data:`LEGACY_DYNAMIC`);
:func:`scale_sets` reads them all.

Several rules read the same views: inside :func:`shared_reads` (one assessment of the rules) each resource is
read into a view once (:func:`read_once`); outside it, every call reads afresh.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from gb300 import tags as gb300_tags
from gb300.components.compute_package import SCALE_SET_TOKEN
from gb300.resources import Resource

GENERIC = "azure-native:resources:Resource"
TYPED_VMSS = "azure-native:compute:VirtualMachineScaleSet"
SUBNET = "azure-native:network:Subnet"
# gb300 0.1 declared racks as Python dynamic resources on azure-mgmt-compute, marked by a ``gb300Kind`` input, with
# the ARM body under ``properties``. No plan declares them any more; deployed states may still hold them until
# ``gb300 migrate-racks`` (gb300.ops.migrate_racks) has moved them.
LEGACY_DYNAMIC = "pulumi-python:dynamic:Resource"
LEGACY_MARKER = "gb300Kind"
LEGACY_KINDS = {
    "rack-scale-set": "rack scale set",
    "pool-scale-set": "scale set",
    "interconnect-block": "interconnect block",
}
LEGACY_SCALE_SETS = ("rack-scale-set", "pool-scale-set")
SCALE_SET_TYPE = "microsoft.compute/virtualmachinescalesets"


@dataclass(frozen=True)
class ScaleSetView:
    """The facts of one scale set that rules and the summary use."""

    urn: str
    name: str
    vm_size: str
    capacity: int
    subnet_ids: tuple[str, ...]
    interconnect_group_id: str | None
    zones: tuple[str, ...]
    single_placement_group: bool | None
    tags: Mapping[str, str]
    properties: Mapping[str, Any]

    @property
    def pool(self) -> str | None:
        return gb300_tags.pool_of(self.tags)


def dig(data: Any, *path: str | int) -> Any:
    """``data[path[0]][path[1]]...`` or None when any step is missing."""
    for step in path:
        if isinstance(step, int):
            if not isinstance(data, list) or step >= len(data):
                return None
        elif not isinstance(data, Mapping) or step not in data:
            return None
        data = data[step]
    return data


def is_dynamic(resource: Resource, arm_type: str) -> bool:
    """A gb300 dynamic compute resource of ``arm_type`` (lowercase ``Namespace/collection``)."""
    return resource.type == LEGACY_DYNAMIC and str(resource.inputs.get("resourceType", "")).lower() == arm_type


def legacy_kind(resource: Resource) -> str | None:
    """The ``gb300Kind`` of a gb300 0.1 dynamic rack, scale set or interconnect block; None for anything else."""
    if resource.type != LEGACY_DYNAMIC:
        return None
    marker = resource.inputs.get(LEGACY_MARKER)
    return marker if isinstance(marker, str) and marker in LEGACY_KINDS else None


def arm_address(resource_id: str | None, inputs: Mapping[str, Any], fallback_name: str) -> tuple[str, str, str]:
    """(subscription, resource group, name) of a deployed resource: from its Azure id, else from the inputs that
    gb300 0.1's dynamic racks carried (``subscriptionId``, ``resourceGroupName``, ``resourceName``)."""
    parts = (resource_id or "").strip("/").split("/")
    if len(parts) >= 8 and parts[0].lower() == "subscriptions" and parts[2].lower() == "resourcegroups":
        return parts[1], parts[3], parts[-1]
    name = next((inputs[k] for k in ("vmScaleSetName", "resourceName") if isinstance(inputs.get(k), str)), None)
    return (
        str(inputs.get("subscriptionId") or ""),
        str(inputs.get("resourceGroupName") or ""),
        str(name or fallback_name),
    )


_SUBSCRIPTION = re.compile(r"/subscriptions/[^/]+", re.IGNORECASE)


def without_subscription(text: str) -> str:
    """An Azure id (or text holding ids) with every subscription id written ``*``: the offline plan's ids carry the
    mocks' subscription, a deployed state's the real one, and a stack cannot move to another subscription without
    every resource changing anyway."""
    return _SUBSCRIPTION.sub("/subscriptions/*", text) if "/subscriptions/" in text.lower() else text


def has_arm_body(resource: Resource) -> bool:
    """The ARM body sits under ``properties`` (generic or gb300 0.1 dynamic), not flattened into the inputs."""
    return resource.type in (GENERIC, LEGACY_DYNAMIC)


def is_scale_set(resource: Resource) -> bool:
    if resource.type in (SCALE_SET_TOKEN, TYPED_VMSS) or is_dynamic(resource, SCALE_SET_TYPE):
        return True
    return (
        resource.type == GENERIC
        and str(resource.inputs.get("resourceProviderNamespace", "")).lower() == "microsoft.compute"
        and str(resource.inputs.get("resourceType", "")).lower() == "virtualmachinescalesets"
    )


# Readers of odd input: each takes any value and never raises. The rules read resources with them too, and the
# quota reader counts with whole().


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one (odd input never raises)."""
    return value if isinstance(value, Mapping) else {}


def items(value: Any) -> list[Any]:
    """``value`` as a list when it is a list or tuple, else an empty list."""
    return list(value) if isinstance(value, list | tuple) else []


def whole(value: Any) -> int | None:
    """``value`` as an int when it is a whole number (protobuf hands numbers over as floats), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _count(value: Any) -> int:
    """A VM count; anything that is not a non-negative whole number counts as 0 (rules never raise)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int | float) and value >= 0 and float(value).is_integer():
        return int(value)
    return 0


T = TypeVar("T")

# The views read inside the outermost shared_reads block, by (reader, id of the resource). Each entry keeps its
# resource alive, so no other object can take that id while the block runs.
_SHARED: ContextVar[dict[tuple[Callable[[Any], Any], int], tuple[Any, Any]] | None] = ContextVar(
    "_SHARED", default=None
)


@contextlib.contextmanager
def shared_reads() -> Iterator[None]:
    """Inside the block, :func:`read_once` reads each resource once per reader; the views go when it ends. A block
    inside another shares the outer one's views (the plan's rules and its summary read the same resources)."""
    if _SHARED.get() is not None:
        yield
        return
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def read_once(resource: Resource, read: Callable[[Resource], T]) -> T:
    """``read(resource)``; inside :func:`shared_reads`, read once and shared (an assessment's rules only read
    the resources, never change them)."""
    shared = _SHARED.get()
    if shared is None:
        return read(resource)
    key = (read, id(resource))
    if key not in shared:
        shared[key] = (resource, read(resource))
    view: T = shared[key][1]
    return view


def scale_set(resource: Resource) -> ScaleSetView:
    """Read a scale set registration (typed or generic) into a :class:`ScaleSetView`.

    Odd input (a property missing, None or of the wrong type) reads as absent: this never raises.
    """
    return read_once(resource, _read_scale_set)


def _read_scale_set(resource: Resource) -> ScaleSetView:
    inputs = resource.inputs
    props = mapping(inputs.get("properties")) if has_arm_body(resource) else inputs
    sku = mapping(inputs.get("sku"))
    nics = items(dig(props, "virtualMachineProfile", "networkProfile", "networkInterfaceConfigurations"))
    subnets: list[str] = []
    for nic in nics:
        nic_props = mapping(nic.get("properties", nic)) if isinstance(nic, Mapping) else {}
        for ipc in items(nic_props.get("ipConfigurations")):
            ipc_props = mapping(ipc.get("properties", ipc)) if isinstance(ipc, Mapping) else {}
            subnet_id = dig(ipc_props, "subnet", "id")
            if isinstance(subnet_id, str):
                subnets.append(subnet_id)
    group = dig(props, "virtualMachineProfile", "networkProfile", "interconnectGroupProfile", "interconnectGroup", "id")
    spg = props.get("singlePlacementGroup")
    size = sku.get("name")
    return ScaleSetView(
        urn=resource.urn,
        name=resource.name,
        vm_size=size if isinstance(size, str) else "",
        capacity=_count(sku.get("capacity")),
        subnet_ids=tuple(subnets),
        interconnect_group_id=group if isinstance(group, str) else None,
        zones=tuple(str(z) for z in items(inputs.get("zones"))),
        single_placement_group=spg if isinstance(spg, bool) else None,
        tags={k: v for k, v in mapping(inputs.get("tags")).items() if isinstance(v, str)},
        properties=props,
    )


def scale_sets(resources: Iterable[Resource]) -> list[ScaleSetView]:
    return [view for r in resources if (view := read_once(r, _scale_set_or_none)) is not None]


def _scale_set_or_none(resource: Resource) -> ScaleSetView | None:
    return scale_set(resource) if is_scale_set(resource) else None


def of_type(resources: Iterable[Resource], typ: str) -> list[Resource]:
    return [r for r in resources if r.type == typ]
