"""A GPU pool: one InfiniBand fabric made of whole NVLink domains (NVL72 racks).

How a fabric becomes Azure resources is decided by the SKU's fabric model in ``data/skus.yaml`` and
nowhere else:

* ``interconnect-group`` (GB300, GB200): one scale set per rack (capacity = VMs per NVLink domain) and one
  ``Microsoft.Network/interconnectGroups`` that every rack's scale set joins, so all racks share one
  InfiniBand fabric. A 64-rack pool (1,152 VMs) exceeds the 1,000-VM scale set cap, so one classic scale
  set cannot carry it; Azure's own tooling also scales GB clusters by whole racks. With
  ``interconnectBlocks`` on, each rack also gets a zonal ``Microsoft.Compute/interconnectBlocks`` (the rack's
  capacity, pre-allocated in the group) that its scale set names.
* ``placement-group`` (H100, H200): one classic scale set with a single placement group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from gb300 import tags as gb300_tags
from gb300.components import scale_set
from gb300.components.arm_resource import ArmResource, token
from gb300.components.node_common import NodeCommon
from gb300.compute_resource import (
    INTERCONNECT_BLOCK,
    POOL_SCALE_SET,
    RACK_SCALE_SET,
    ComputeResource,
)
from gb300.facts.catalog import FabricModel, Sku

RACK_INDEX_WIDTH = 4  # r0001..r9999: names never change when a pool grows past 99 or 999 racks


@dataclass(frozen=True)
class GpuPoolArgs:
    """Inputs of :class:`GpuPool`; ids of shared resources come in, nothing is read from stack config."""

    node: NodeCommon
    cluster_name: str
    pool_name: str
    sku: Sku
    fabric: FabricModel
    racks: int  # rack numbers 1..racks; those in ``retired_racks`` are not deployed
    image: str
    os_disk_size_gb: int
    subnet_id: pulumi.Input[str]
    custom_data: pulumi.Input[str]
    custom_data_sha256: str
    subscription_id: pulumi.Input[str]
    interconnect_blocks: bool
    capacity_reservation_group_id: str | None = None
    extensions: tuple[dict[str, Any], ...] = ()  # VM extensions every node runs (scale set extensionProfile)
    retired_racks: tuple[int, ...] = ()

    @property
    def rack_indices(self) -> list[int]:
        """The rack numbers in service; a retired rack's number is never reused by another rack."""
        return [i for i in range(1, self.racks + 1) if i not in self.retired_racks]

    @property
    def vms(self) -> int:
        return len(self.rack_indices) * self.sku.vms_per_nvlink_domain


def rack_name(cluster: str, pool: str, index: int) -> str:
    """The scale set name of rack ``index`` (1-based) of a pool."""
    return f"{cluster}-{pool}-r{index:0{RACK_INDEX_WIDTH}d}"


class GpuPool(pulumi.ComponentResource):
    """The scale sets (and interconnect group) of one GPU pool."""

    scale_set_ids: list[pulumi.Output[str]]
    interconnect_group_id: pulumi.Output[str] | None

    def __init__(self, name: str, args: GpuPoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gb300:compute:GpuPool", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = gb300_tags.gpu_pool(args.node.tags, args.pool_name, args.custom_data_sha256)
        # What every scale set of the pool carries alike, built once for all its racks.
        self._identity = pulumi.Output.from_input(args.node.identity_id).apply(
            # ARM's shape: a map from identity id to {} (azure-native's list form is its own).
            lambda identity: {"type": "UserAssigned", "userAssignedIdentities": {identity: {}}}
        )
        monitoring = args.node.monitoring
        self._extensions = (
            *args.extensions,
            *(monitoring.scale_set_extensions(args.node.identity_id) if monitoring else ()),
        )
        self.interconnect_group_id = None
        self.scale_set_ids = []
        if args.fabric.scale_set_per == "rack":
            ig = args.fabric.interconnect_group or {}
            group = ArmResource(
                f"{name}-ig",
                {
                    "interconnectGroupName": f"{name}-ig",
                    "resourceGroupName": args.node.resource_group_name,
                    "location": args.node.location,
                    "scope": ig.get("scope", "InfiniBand"),
                    "subgroupProfile": {
                        "vmSize": args.sku.name,
                        "scope": ig.get("subgroupScope", "VerticalConnect"),
                        "size": args.sku.vms_per_nvlink_domain,
                    },
                    "tags": tags,
                },
                child,
                type_=token("network", "InterconnectGroup"),
            )
            self.interconnect_group_id = group.id
            for index in args.rack_indices:
                rack = rack_name(args.cluster_name, args.pool_name, index)
                rack_tags = gb300_tags.rack(tags, index)
                block_id = self._block(rack, args, group.id, rack_tags) if args.interconnect_blocks else None
                self.scale_set_ids.append(
                    self._scale_set(
                        rack,
                        args,
                        kind=RACK_SCALE_SET,
                        capacity=args.sku.vms_per_nvlink_domain,
                        interconnect_group_id=group.id,
                        interconnect_block_id=block_id,
                        tags=rack_tags,
                    )
                )
        else:
            self.scale_set_ids.append(
                self._scale_set(
                    f"{args.cluster_name}-{args.pool_name}", args, kind=POOL_SCALE_SET, capacity=args.vms, tags=tags
                )
            )
        if monitoring is not None:
            monitoring.attach(self.scale_set_ids, prefix=name)
        self.register_outputs(
            {
                "scaleSetIds": self.scale_set_ids,
                "interconnectGroupId": self.interconnect_group_id,
                "vms": args.vms,
            }
        )

    def _zones(self, args: GpuPoolArgs) -> dict[str, list[str]]:
        return {"zones": [args.node.zone]} if args.node.zone else {}

    def _block(
        self, rack: str, args: GpuPoolArgs, group_id: pulumi.Input[str], tags: dict[str, pulumi.Input[str]]
    ) -> pulumi.Output[str]:
        """The rack's interconnect block: its VMs' capacity, in the zone, inside the pool's interconnect group."""
        block = ComputeResource(
            f"{rack}-icb",
            kind=INTERCONNECT_BLOCK,
            api_version=args.fabric.scale_set_api_version.value,
            subscription_id=args.subscription_id,
            resource_group_name=args.node.resource_group_name,
            resource_name=f"{rack}-icb",
            arm_body={
                "location": args.node.location,
                **self._zones(args),
                "sku": {"name": args.sku.name, "capacity": args.sku.vms_per_nvlink_domain},
                "properties": {"interconnectGroup": {"id": group_id}},
                "tags": tags,
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        return block.id

    def _scale_set(
        self,
        name: str,
        args: GpuPoolArgs,
        *,
        kind: str,
        capacity: int,
        tags: dict[str, pulumi.Input[str]],
        interconnect_group_id: pulumi.Input[str] | None = None,
        interconnect_block_id: pulumi.Input[str] | None = None,
    ) -> pulumi.Output[str]:
        spec = scale_set.ScaleSetSpec(
            sku=args.sku,
            fabric=args.fabric,
            capacity=capacity,
            computer_name_prefix=f"{name}-",
            image=args.image,
            os_disk_size_gb=args.os_disk_size_gb,
            admin_username=args.node.admin_username,
            ssh_public_key=args.node.ssh_public_key,
            subnet_id=args.subnet_id,
            custom_data=args.custom_data,
            interconnect_group_id=interconnect_group_id,
            interconnect_block_id=interconnect_block_id,
            capacity_reservation_group_id=args.capacity_reservation_group_id,
            extensions=self._extensions,
        )
        vmss = ComputeResource(
            name,
            kind=kind,
            api_version=args.fabric.scale_set_api_version.value,
            subscription_id=args.subscription_id,
            resource_group_name=args.node.resource_group_name,
            resource_name=name,
            arm_body={
                "location": args.node.location,
                **self._zones(args),
                "sku": scale_set.sku(spec),
                "identity": self._identity,
                "properties": scale_set.properties(spec),
                "tags": tags,
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.node.boot_dependencies)),
        )
        return vmss.id
