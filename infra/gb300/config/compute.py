"""``gb300:gpuPools`` and ``gb300:head``: the GPU pools (one InfiniBand fabric of whole racks each) and the Slurm
controller and login node."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field

from gb300.config.base import Checks, ConfigModel
from gb300.config.checks import PathError, check_gpu_size, check_image, check_resource_id, check_size
from gb300.config.fields import AzureName, ImageReference, PoolName
from gb300.config.slurm import Settings
from gb300.config.text import text_limit
from gb300.facts import catalog


class GpuPool(ConfigModel):
    """One entry of ``gb300:gpuPools``: one InfiniBand fabric of whole NVLink domains (racks)."""

    name: PoolName
    """1-10 lowercase letters/digits; becomes the Slurm partition and part of host names. `head`, `node`, `mon`,
    `lustre`, `blob`, `rg` are refused: gb300 names its own resources so (docs/engine-contract.md).
    """
    vm_size: Annotated[AzureName, AfterValidator(check_gpu_size)] = "Standard_ND128isr_GB300_v6"
    """A GPU size from the catalog (GB300, GB200, H100, H200)."""
    racks: Annotated[int, Field(ge=1, strict=True)]
    """NVLink domains: NVL72 racks of 18 VMs for GB sizes (VMs = racks x 18); single VMs for H100/H200. At most what
    one InfiniBand fabric spans (`data/skus.yaml` `fabricModels`: `maxRacksPerFabric` racks for GB sizes, the
    on-request `maxVmsPerFabric` VMs for H100/H200), refused before any resource is declared; more is more pools.
    """
    image: Annotated[ImageReference, AfterValidator(check_image)] = "microsoft-dsvm:ubuntu-hpc:2404-gb:24.04.2026052801"
    """Marketplace URN `publisher:offer:sku:version` or an image resource id. Pin a version
    `infra/gb300/data/images.yaml` knows (rule `image-version-pinned`).
    """
    os_disk_size_gb: Annotated[int, Field(ge=64, le=4095, strict=True)] = Field(256, alias="osDiskSizeGB")
    """OS disk size in GB (Premium SSD)."""
    capacity_reservation_group_id: (
        Annotated[str, Field(max_length=text_limit("resourceId")), AfterValidator(check_resource_id)] | None
    ) = None
    """Resource id of a capacity reservation group to target; the quota check then skips cores (the reservation holds
    them).
    """
    interconnect_blocks: Annotated[bool, Field(strict=True)] = False
    """Give each rack a zonal `Microsoft.Compute/interconnectBlocks` (its capacity, in the pool's interconnect group)
    that its scale set names; GB sizes only. Must stay `false` for now: whether azure-native's compute 2026-03-01
    package (what racks are declared with) has the interconnect block resource is not verified. Azure's GB300 tests
    say blocks are not needed with dedicated quota (docs/fabric.md).
    """
    retired_racks: list[Annotated[int, Field(ge=1, strict=True)]] = Field(default_factory=list)
    """Rack numbers `1..racks` not deployed: retire a failed rack (`[5]` deletes `<cluster>-<pool>-r0005` only) without
    renumbering the others; GB sizes only (docs/day2.md).
    """
    partition_settings: Settings = Field(default_factory=dict)
    """Keys of the pool's own `PartitionName=` line beyond gb300's (`MaxTime`, `DefaultTime`, `PriorityTier`,
    `AllowQos`, ...), checked against the pinned Slurm release (docs/customize.md).
    """

    def check_racks_within_one_fabric(self) -> None:
        """The pool's racks fit one InfiniBand fabric of its VM size (data/skus.yaml)."""
        sku = self.sku
        if sku.fabric_model is None:
            return
        fabric = catalog.load().fabric_for(sku)
        if fabric.max_racks_per_fabric is not None and sku.is_rack_scale:
            most, fact = int(fabric.max_racks_per_fabric.value), fabric.max_racks_per_fabric
            unit = "racks"
        elif fabric.max_vms_per_fabric is not None:
            most = int(fabric.max_vms_on_request or fabric.max_vms_per_fabric.value) // sku.vms_per_nvlink_domain
            fact, unit = fabric.max_vms_per_fabric, "VMs (on request to Azure)"
        else:
            return
        if self.racks > most:
            raise PathError(
                ("racks",),
                f"must be at most {most:,} (got {self.racks:,}): one pool is one InfiniBand fabric, and one fabric "
                f"of {sku.name} (model {fabric.name}) spans at most {most:,} {unit} (data/skus.yaml, {fact.status}: "
                f"{fact.source}). Split the racks into several pools, each its own fabric",
                relative=True,
            )

    def check_blocks_available(self) -> None:
        """Interconnect blocks are asked for only where the size's fabric offers them."""
        fabric = catalog.load().fabric_for(self.sku) if self.interconnect_blocks else None
        if fabric is not None and not fabric.interconnect_blocks_available:
            raise PathError(
                ("interconnectBlocks",),
                f"must be false: racks are declared at Compute API {fabric.scale_set_api_version.value} through "
                "azure-native's local package, whose interconnect block is not yet verified (got true). Remove the "
                "key; Azure's GB300 tests run without blocks on dedicated quota (docs/fabric.md).",
                relative=True,
            )

    def check_retired_within_racks(self) -> None:
        """Retired racks are rack numbers of this pool, each once, for a size with a scale set per rack."""
        seen: set[int] = set()
        if self.retired_racks and catalog.load().fabric_for(self.sku).scale_set_per != "rack":
            raise PathError(
                ("retiredRacks",),
                f"applies only to VM sizes with one scale set per rack (GB300, GB200); {self.vm_size} pools are "
                "one scale set: lower racks instead",
                relative=True,
            )
        for i, index in enumerate(self.retired_racks):
            if index > self.racks:
                raise PathError(
                    ("retiredRacks", i),
                    f"must be a rack number from 1 to racks ({self.racks}) (got {index}); racks counts every "
                    "rack number ever used, retired ones included",
                    relative=True,
                )
            if index in seen:
                raise PathError(("retiredRacks", i), f"duplicates another entry (got {index})", relative=True)
            seen.add(index)
        if len(seen) >= self.racks:
            raise PathError(
                ("retiredRacks",), f"must leave at least one rack in service (got all {self.racks})", relative=True
            )

    CHECKS: ClassVar[Checks] = (check_racks_within_one_fabric, check_blocks_available, check_retired_within_racks)

    @property
    def sku(self) -> catalog.Sku:
        return catalog.load().sku(self.vm_size)

    @property
    def rack_indices(self) -> list[int]:
        """The rack numbers in service: 1..racks without the retired ones (names never renumber)."""
        retired = set(self.retired_racks)
        return [i for i in range(1, self.racks + 1) if i not in retired]

    @property
    def vms(self) -> int:
        return len(self.rack_indices) * self.sku.vms_per_nvlink_domain


class HeadSettings(ConfigModel):
    """``gb300:head``: the Slurm controller and login node."""

    vm_size: Annotated[AzureName, AfterValidator(check_size)] = "Standard_D16ds_v5"
    """Any size in the catalog, x86_64 or arm64 (the image must match)."""
    image: Annotated[ImageReference, AfterValidator(check_image)] = "canonical:ubuntu-24_04-lts:server:latest"
    """Marketplace URN or image id."""
    os_disk_size_gb: Annotated[int, Field(ge=64, le=4095, strict=True)] = Field(128, alias="osDiskSizeGB")
    """OS disk size in GB."""
    # The managed data disk that holds slurmctld's state and the accounting database across reimages.
    state_disk_size_gb: Annotated[int, Field(ge=32, le=4095, strict=True)] = Field(64, alias="stateDiskSizeGB")
    """Size in GB of the head's state disk (Premium SSD, protected, retained, detached not deleted with the VM):
    slurmctld's `StateSaveLocation` and the accounting database survive a reimage or replacement
    (docs/day2.md#a-head-that-keeps-its-state).
    """
    slurmdbd: bool = False
    """Job accounting (`sacct`, `sreport`): the head step `gb300-slurmdbd-setup` installs MariaDB and slurmdbd on the
    head node and slurm.conf stores into it. No password anywhere: the database account `slurm`@`localhost` is
    `IDENTIFIED VIA unix_socket`. The database lives on the head's state disk, so it survives a reimage or
    replacement of the head VM (docs/slurm.md#job-accounting-gb300headslurmdbd). Declared accounts or QoS
    (gb300:slurm.accounts, gb300:slurm.qos) turn it on without this key (docs/accounts.md).
    """
