"""Typed views over registered resources, shared by the plan summary and the rules.

Rules and the summary read resources, not config: they see exactly what ``pulumi up`` would send. The
scale set appears either as a typed ``compute:VirtualMachineScaleSet`` or as the generic
``resources:Resource`` that the interconnect-group fabric model uses; :func:`scale_sets` reads both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

GENERIC = "azure-native:resources:Resource"
TYPED_VMSS = "azure-native:compute:VirtualMachineScaleSet"
SUBNET = "azure-native:network:Subnet"


class Resource(Protocol):
    """What a rule needs of a resource: the plan's record and the policy pack's arguments both fit."""

    @property
    def urn(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def inputs(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class ScaleSetView:
    """The facts of one scale set that rules and the summary use."""

    urn: str
    name: str
    vm_size: str
    capacity: int
    subnet_ids: tuple[str, ...]
    interconnect_group_id: str | None
    single_placement_group: bool | None
    tags: Mapping[str, str]
    properties: Mapping[str, Any]

    @property
    def pool(self) -> str | None:
        return self.tags.get("gb300-pool")


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


def is_scale_set(resource: Resource) -> bool:
    if resource.type == TYPED_VMSS:
        return True
    return (
        resource.type == GENERIC
        and str(resource.inputs.get("resourceProviderNamespace", "")).lower() == "microsoft.compute"
        and str(resource.inputs.get("resourceType", "")).lower() == "virtualmachinescalesets"
    )


def scale_set(resource: Resource) -> ScaleSetView:
    """Read a scale set registration (typed or generic) into a :class:`ScaleSetView`."""
    inputs = resource.inputs
    props = inputs.get("properties", {}) if resource.type == GENERIC else inputs
    props = props if isinstance(props, Mapping) else {}
    sku = inputs.get("sku") or {}
    nics = dig(props, "virtualMachineProfile", "networkProfile", "networkInterfaceConfigurations") or []
    subnets: list[str] = []
    for nic in nics:
        nic_props = nic.get("properties", nic) if isinstance(nic, Mapping) else {}
        for ipc in nic_props.get("ipConfigurations", []) or []:
            ipc_props = ipc.get("properties", ipc) if isinstance(ipc, Mapping) else {}
            subnet_id = dig(ipc_props, "subnet", "id")
            if isinstance(subnet_id, str):
                subnets.append(subnet_id)
    return ScaleSetView(
        urn=resource.urn,
        name=resource.name,
        vm_size=str(sku.get("name", "")),
        capacity=int(sku.get("capacity", 0) or 0),
        subnet_ids=tuple(subnets),
        interconnect_group_id=dig(props, "virtualMachineProfile", "networkProfile", "interconnectGroupProfile", "id"),
        single_placement_group=props.get("singlePlacementGroup"),
        tags=inputs.get("tags") or {},
        properties=props,
    )


def scale_sets(resources: Iterable[Resource]) -> list[ScaleSetView]:
    return [scale_set(r) for r in resources if is_scale_set(r)]


def of_type(resources: Iterable[Resource], typ: str) -> list[Resource]:
    return [r for r in resources if r.type == typ]
