"""A CPU pool (``gb300:cpuPools``): one scale set of CPU VMs for data preparation and evaluation.

The scale set is declared as a GPU pool's are (:func:`~gb300.components.gpu_pool.declare_pool_scale_set`: the compute
package's class, Uniform orchestration, manual upgrades, the Scheduled Events gb300 drains on), in the same subnet
(the scope's ``gpu`` subnet, whose room the plan sizes for both), without an interconnect group or InfiniBand: its
nodes join Slurm as dynamic nodes of the pool's partition, which is the custom data's business.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from gb300 import tags as gb300_tags
from gb300.components.gpu_pool import Placement, declare_pool_scale_set, node_spec, pool_shared
from gb300.components.node_common import NodeCommon
from gb300.facts.catalog import Sku

CPU_POOL_TYPE = "gb300:compute:CpuPool"


@dataclass(frozen=True)
class CpuPoolArgs:
    """Inputs of :class:`CpuPool`; the VMs go in the scope's ``gpu`` subnet, nothing is read from stack config."""

    node: NodeCommon
    pool_name: str
    sku: Sku
    count: int
    image: str
    os_disk_size_gb: int
    custom_data: pulumi.Input[str]
    custom_data_sha256: str
    compute_provider: pulumi.ProviderResource | None = None
    zones: list[str] | None = None
    """The pool's zone (``gb300:cpuPools[].zone``, else the cluster's); None: no zone."""


class CpuPool(pulumi.ComponentResource):
    """One CPU pool: its scale set ``<cluster>-<pool>`` of ``count`` VMs, and its logs association."""

    scale_set_id: pulumi.Output[str]

    def __init__(self, name: str, args: CpuPoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(CPU_POOL_TYPE, name, None, opts)
        tags = gb300_tags.cpu_pool(args.node.tags, args.pool_name, args.custom_data_sha256)
        shared = pool_shared(args.node, tags, args.zones)
        spec = node_spec(
            name,
            args.node,
            sku=args.sku,
            capacity=args.count,
            image=args.image,
            os_disk_size_gb=args.os_disk_size_gb,
            custom_data=args.custom_data,
            extensions=shared.extensions,
        )
        # One placement group of at most 100 VMs is the scale set default; a CPU pool needs none (no InfiniBand).
        where = Placement(args.node, args.compute_provider, single_placement_group=False)
        vmss = declare_pool_scale_set(name, spec, shared, self, where, tags=tags)
        self.scale_set_id = vmss.id
        if args.node.monitoring is not None:
            args.node.monitoring.associate(vmss.id, f"{name}-logs", pulumi.ResourceOptions(parent=self))
        self.register_outputs({"scaleSetId": self.scale_set_id, "vms": args.count})
