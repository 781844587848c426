"""``gb300:cpuPools``: CPU pools beside the GPU pools, for data preparation and evaluation (docs/customize.md).

A CPU pool is one scale set of a CPU size in the GPU nodes' subnet, without InfiniBand. Its VMs join Slurm as dynamic
nodes, as the GPU nodes do, with the pool's name (and the pool's ``features``) as their node features, in a partition
named after the pool. What needs the rest of the stack (names shared with the GPU pools, extra partitions naming a
CPU pool) is :class:`gb300.config.models.StackConfig`'s.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field

from gb300.config.base import Checks, ConfigModel
from gb300.config.checks import PathError, check_cpu_size, check_image
from gb300.config.fields import AzureName, ImageReference, PoolName, Zone
from gb300.config.slurm import NodeFeature, Settings
from gb300.facts import catalog

__all__ = ["CpuPool"]


class CpuPool(ConfigModel):
    """One entry of ``gb300:cpuPools``: one scale set of CPU VMs, one Slurm partition of dynamic nodes."""

    name: PoolName
    """1-10 lowercase letters/digits, unique among gpuPools and cpuPools; the Slurm partition's name, its node
    feature and part of the host names (`<cluster>-<name>-...`). The names gb300 gives its own resources are refused
    as for GPU pools."""
    vm_size: Annotated[AzureName, AfterValidator(check_cpu_size)] = "Standard_D32ds_v5"
    """A CPU size (no GPU) from the catalog (`data/skus.yaml`), x86_64 or arm64: the image must match."""
    count: Annotated[int, Field(ge=1, le=1000, strict=True)]
    """How many VMs the pool's scale set holds (at most Azure's 1,000 per scale set)."""
    zone: Zone | None = None
    """Availability zone of the pool's VMs; unset: gb300:cluster.zone."""
    image: Annotated[ImageReference, AfterValidator(check_image)] = "canonical:ubuntu-24_04-lts:server:latest"
    """Marketplace URN `publisher:offer:sku:version` or an image id (Ubuntu 24.04) of the size's architecture
    (`data/images.yaml`)."""
    os_disk_size_gb: Annotated[int, Field(ge=64, le=4095, strict=True)] = Field(128, alias="osDiskSizeGB")
    """OS disk size in GB (Premium SSD)."""
    features: Annotated[list[NodeFeature], Field(max_length=8)] = Field(default_factory=list)
    """Node features the pool's VMs register with besides the pool's name (an extra partition with `feature:`
    selects them)."""
    partition_settings: Settings = Field(default_factory=dict)
    """Keys of the pool's own `PartitionName=` line beyond gb300's (`MaxTime`, `DefaultTime`, `OverSubscribe`, ...),
    checked against the pinned Slurm release (docs/customize.md)."""

    def check_image_boots_the_size(self) -> None:
        """A marketplace image the catalog knows boots the size's architecture (no x86_64 image on an arm64 size)."""
        sku = self.sku
        arch = catalog.load().image_arch(self.image)
        if arch is not None and arch != sku.cpu_arch:
            raise PathError(
                ("image",),
                f"must boot {sku.cpu_arch} like {sku.name} (got {self.image!r}, an {arch} image); the VMs would not "
                f"boot. Choose an {sku.cpu_arch} image (data/images.yaml) or an {arch} size",
                relative=True,
            )

    def check_unique_features(self) -> None:
        """No feature is listed twice, nor is the pool's own name (every node of the pool has it)."""
        seen = {self.name}
        for i, feature in enumerate(self.features):
            if feature in seen:
                what = "is the pool's name, which its nodes have already" if feature == self.name else "is listed twice"
                raise PathError(("features", i), f"{what} (got {feature!r})", relative=True)
            seen.add(feature)

    CHECKS: ClassVar[Checks] = (check_image_boots_the_size, check_unique_features)

    @property
    def sku(self) -> catalog.Sku:
        return catalog.load().sku(self.vm_size)

    @property
    def node_features(self) -> tuple[str, ...]:
        """The features the pool's nodes register with: the pool's name first, then its ``features``."""
        return (self.name, *self.features)
