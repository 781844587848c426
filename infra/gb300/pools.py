"""The pools: stack config -> one GPU pool component per ``gb300:gpuPools`` entry and one CPU pool component per
``gb300:cpuPools`` entry, each booting its pool's rendered custom data (:func:`gb300.program.build` calls them, as it
calls :mod:`gb300.access` for the login nodes)."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi

from gb300.components.cpu_pool import CpuPool, CpuPoolArgs
from gb300.components.gpu_pool import GpuPool, GpuPoolArgs
from gb300.components.node_common import NodeCommon
from gb300.components.node_payload import NodePayloads
from gb300.config import StackConfig
from gb300.facts import catalog
from gb300.node.custom_data import CustomData


def gpu_pools(
    cfg: StackConfig,
    node: NodeCommon,
    payloads: NodePayloads,
    pool_data: Mapping[str, CustomData],
    compute_provider: pulumi.ProviderResource,
) -> None:
    """``gb300:gpuPools``: one GPU pool component per pool, its racks booting the pool's rendered custom data. The
    racks' compute package reads its own config namespace; ``compute_provider`` gives it the stack's azure-native:*
    settings (compute_package.Provider)."""
    cat = catalog.load()
    name = node.scope.cluster_name
    for pool in cfg.gpu_pools:
        custom = pool_data[pool.name]
        GpuPool(
            f"{name}-{pool.name}",
            GpuPoolArgs(
                node=node,
                pool_name=pool.name,
                sku=pool.sku,
                fabric=cat.fabric_for(pool.sku),
                racks=pool.racks,
                retired_racks=tuple(pool.retired_racks),
                image=pool.image,
                os_disk_size_gb=pool.os_disk_size_gb,
                custom_data=payloads.account_name.apply(custom.for_account),
                custom_data_sha256=custom.sha256,
                compute_provider=compute_provider,
                capacity_reservation_group_id=pool.capacity_reservation_group_id,
            ),
        )


def cpu_pools(
    cfg: StackConfig,
    node: NodeCommon,
    payloads: NodePayloads,
    pool_data: Mapping[str, CustomData],
    compute_provider: pulumi.ProviderResource,
) -> None:
    """``gb300:cpuPools``: one scale set per CPU pool, in the GPU nodes' subnet, booting the pool's custom data."""
    for pool in cfg.cpu_pools:
        custom = pool_data[pool.name]
        zone = pool.zone or cfg.cluster.zone
        CpuPool(
            f"{node.scope.cluster_name}-{pool.name}",
            CpuPoolArgs(
                node=node,
                pool_name=pool.name,
                sku=pool.sku,
                count=pool.count,
                image=pool.image,
                os_disk_size_gb=pool.os_disk_size_gb,
                custom_data=payloads.account_name.apply(custom.for_account),
                custom_data_sha256=custom.sha256,
                compute_provider=compute_provider,
                zones=[zone] if zone is not None else None,
            ),
        )
