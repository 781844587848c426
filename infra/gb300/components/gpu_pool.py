"""A GPU pool: one InfiniBand fabric made of whole NVLink domains (NVL72 racks).

How a fabric becomes Azure resources is decided by the SKU's fabric model in ``data/skus.yaml`` and
nowhere else:

* ``interconnect-group`` (GB300, GB200): one scale set per rack (capacity = VMs per NVLink domain) and one
  ``Microsoft.Network/interconnectGroups`` that every rack's scale set joins, so all racks share one
  InfiniBand fabric. A 64-rack pool (1,152 VMs) exceeds the 1,000-VM scale set cap, so one classic scale
  set cannot carry it; Azure's own tooling also scales GB clusters by whole racks. Each rack is a
  :class:`Rack` component holding its scale set (azure-native's compute 2026-03-01 package) and its logs
  association. Interconnect blocks are refused until the compute package is shown to have them
  (``data/skus.yaml``, docs/fabric.md).
* ``placement-group`` (H100, H200): one classic scale set with a single placement group.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_azure_native import network

from gb300 import tags as gb300_tags
from gb300.components import compute_package, scale_set
from gb300.components.node_common import NodeCommon
from gb300.facts import catalog
from gb300.facts.catalog import FabricModel, Sku

RACK_INDEX_WIDTH = 4  # r0001..r9999: names never change when a pool grows past 99 or 999 racks


@dataclass(frozen=True)
class GpuPoolArgs:
    """Inputs of :class:`GpuPool`; ids of shared resources come in (the nodes go in the scope's ``gpu`` subnet),
    nothing is read from stack config."""

    node: NodeCommon
    pool_name: str
    sku: Sku
    fabric: FabricModel
    racks: int  # rack numbers 1..racks; those in ``retired_racks`` are not deployed
    image: str
    os_disk_size_gb: int
    custom_data: pulumi.Input[str]
    custom_data_sha256: str
    # The compute package's provider (program.py builds it from the stack's azure-native settings; components
    # create no providers). None: the package's default provider.
    compute_provider: pulumi.ProviderResource | None = None
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


# How long the engine waits for one rack operation before it fails it. A rack create returns once all 18 VMs
# have provisioned (azure-native waits for the scale set's long-running PUT); docs/scale.md gives the figures.
RACK_TIMEOUTS = pulumi.CustomTimeouts(create="90m", update="90m", delete="60m")
RACK_TYPE = "gb300:compute:Rack"


@dataclass(frozen=True)
class PoolShared:
    """What every scale set of a pool carries alike, built once for all its racks."""

    identity: pulumi.Output[dict[str, Any]]
    extensions: tuple[dict[str, Any], ...]
    tags: dict[str, pulumi.Input[str]]
    zones: list[str] | None


def declare_scale_set(
    name: str,
    args: GpuPoolArgs,
    shared: PoolShared,
    parent: pulumi.Resource,
    *,
    capacity: int,
    tags: dict[str, pulumi.Input[str]],
    interconnect_group_id: pulumi.Input[str] | None = None,
) -> compute_package.VirtualMachineScaleSet:
    """A GPU pool's scale set (a rack's, or a classic pool's one)."""
    spec = node_spec(
        name,
        args.node,
        sku=args.sku,
        capacity=capacity,
        image=args.image,
        os_disk_size_gb=args.os_disk_size_gb,
        custom_data=args.custom_data,
        interconnect_group_id=interconnect_group_id,
        capacity_reservation_group_id=args.capacity_reservation_group_id,
        extensions=shared.extensions,
    )
    where = Placement(args.node, args.compute_provider, args.fabric.single_placement_group)
    return declare_pool_scale_set(name, spec, shared, parent, where, tags=tags)


def node_spec(name: str, node: NodeCommon, **spec: Any) -> scale_set.ScaleSetSpec:
    """Scale set ``name``'s spec: its VMs named after it, logging in and attaching as every pool's nodes do (the admin
    user and key, the scope's ``gpu`` subnet); ``spec`` holds the rest of :class:`~scale_set.ScaleSetSpec`."""
    return scale_set.ScaleSetSpec(
        computer_name_prefix=f"{name}-",
        admin_username=node.admin_username,
        ssh_public_key=node.ssh_public_key,
        subnet_id=node.scope.subnet_id("gpu"),
        **spec,
    )


@dataclass(frozen=True)
class Placement:
    """Where a pool's scale set goes: what every node shares, the compute package's provider, one placement group."""

    node: NodeCommon
    provider: pulumi.ProviderResource | None
    single_placement_group: bool


def declare_pool_scale_set(
    name: str,
    spec: scale_set.ScaleSetSpec,
    shared: PoolShared,
    parent: pulumi.Resource,
    where: Placement,
    *,
    tags: dict[str, pulumi.Input[str]],
) -> compute_package.VirtualMachineScaleSet:
    """A pool's scale set, GPU or CPU: the compute package's class with the rack options (the package's provider, the
    boot dependencies, :data:`RACK_TIMEOUTS`, delete before replace) and the Scheduled Events gb300 drains on."""
    spec = dataclasses.replace(
        spec,
        # Drain before Azure deletes or reimages a node (gb300-scheduled-events acknowledges once idle).
        terminate_notification_timeout=str(catalog.load().limit("terminateNotificationTimeout")),
        os_image_notification_timeout=str(catalog.load().limit("osImageNotificationTimeout")),
    )
    node = where.node
    return compute_package.VirtualMachineScaleSet(
        name,
        pulumi.ResourceOptions(
            parent=parent,
            provider=where.provider,
            depends_on=list(node.boot_dependencies),
            custom_timeouts=RACK_TIMEOUTS,
            # Azure names are fixed: a replacement deletes the old scale set before it creates the new one.
            delete_before_replace=True,
        ),
        resource_group_name=node.scope.resource_group_name,
        vm_scale_set_name=name,
        location=node.scope.location,
        zones=shared.zones,
        sku=scale_set.sku(spec),
        identity=shared.identity,
        orchestration_mode="Uniform",
        single_placement_group=where.single_placement_group,
        overprovision=False,
        platform_fault_domain_count=1,
        # Manual: a changed custom data never silently reimages a training rack; the plan says which need one.
        upgrade_policy={"mode": "Manual"},
        virtual_machine_profile=scale_set.virtual_machine_profile(spec),
        tags=tags,
    )


def pool_shared(node: NodeCommon, tags: dict[str, pulumi.Input[str]], zones: list[str] | None) -> PoolShared:
    """What every scale set of a pool carries alike: the node identity, the monitoring agent, the tags, the zones."""
    monitoring = node.monitoring
    return PoolShared(
        identity=pulumi.Output.from_input(node.identity_id).apply(
            lambda identity: {"type": "UserAssigned", "userAssignedIdentities": [identity]}
        ),
        extensions=monitoring.scale_set_extensions(node.identity_id) if monitoring else (),
        tags=tags,
        zones=zones,
    )


class Rack(pulumi.ComponentResource):
    """One NVL72 rack: its scale set (18 VMs, one NVLink domain) and its logs association. ``pulumi stack`` shows a
    rack as one subtree; retiring a rack removes it whole. (An interconnect block would be the rack's child too; the
    Compute API version racks use has none: data/skus.yaml.)"""

    scale_set_id: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: GpuPoolArgs,
        shared: PoolShared,
        *,
        index: int,
        interconnect_group_id: pulumi.Input[str],
        logs_alias: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(RACK_TYPE, name, None, opts)
        tags = gb300_tags.rack(shared.tags, index)
        vmss = declare_scale_set(
            name,
            args,
            shared,
            self,
            capacity=args.sku.vms_per_nvlink_domain,
            tags=tags,
            interconnect_group_id=interconnect_group_id,
        )
        self.scale_set_id = vmss.id
        monitoring = args.node.monitoring
        if monitoring is not None:
            # Until racks were components, the association was the monitoring component's child, numbered by the
            # rack's position in the pool: the alias keeps its URN (and the deployed association) as it was.
            monitoring.associate(
                vmss.id,
                f"{name}-logs",
                pulumi.ResourceOptions(parent=self, aliases=[pulumi.Alias(name=logs_alias, parent=monitoring)]),
            )
        self.register_outputs({"scaleSetId": self.scale_set_id})


class GpuPool(pulumi.ComponentResource):
    """The racks (or the one classic scale set) and the interconnect group of one GPU pool."""

    scale_set_ids: list[pulumi.Output[str]]
    interconnect_group_id: pulumi.Output[str] | None

    def __init__(self, name: str, args: GpuPoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gb300:compute:GpuPool", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = gb300_tags.gpu_pool(args.node.tags, args.pool_name, args.custom_data_sha256)
        monitoring = args.node.monitoring
        shared = pool_shared(args.node, tags, args.node.scope.zones)
        shared = dataclasses.replace(shared, extensions=(*args.extensions, *shared.extensions))
        self.interconnect_group_id = None
        self.scale_set_ids = []
        if args.fabric.scale_set_per == "rack":
            ig = args.fabric.interconnect_group or {}
            group = network.InterconnectGroup(
                f"{name}-ig",
                interconnect_group_name=f"{name}-ig",
                resource_group_name=args.node.scope.resource_group_name,
                location=args.node.scope.location,
                scope=ig.get("scope", "InfiniBand"),
                subgroup_profile=network.SubgroupProfileArgs(
                    vm_size=args.sku.name,
                    scope=ig.get("subgroupScope", "VerticalConnect"),
                    size=args.sku.vms_per_nvlink_domain,
                ),
                tags=tags,
                opts=child,
            )
            self.interconnect_group_id = group.id
            for position, index in enumerate(args.rack_indices, start=1):
                rack = Rack(
                    rack_name(args.node.scope.cluster_name, args.pool_name, index),
                    args,
                    shared,
                    index=index,
                    interconnect_group_id=group.id,
                    logs_alias=f"{name}-{position:04d}-logs",
                    opts=child,
                )
                self.scale_set_ids.append(rack.scale_set_id)
        else:
            scale_set_name = f"{args.node.scope.cluster_name}-{args.pool_name}"
            vmss = declare_scale_set(scale_set_name, args, shared, self, capacity=args.vms, tags=tags)
            self.scale_set_ids.append(vmss.id)
            if monitoring is not None:
                monitoring.associate(vmss.id, f"{name}-0001-logs")
        self.register_outputs(
            {
                "scaleSetIds": self.scale_set_ids,
                "interconnectGroupId": self.interconnect_group_id,
                "vms": args.vms,
            }
        )
