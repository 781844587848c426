"""The SKU and image catalog, read from ``data/skus.yaml`` and ``data/images.yaml``.

Facts have one home: sizes, rack shapes, quota families and fabric limits are data with a source and a
status. This module only types them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Literal

from gb300.facts.loader import data

Arch = Literal["arm64", "x64"]


@dataclass(frozen=True)
class Sourced:
    """A catalog value with where it came from and how sure we are of it."""

    value: Any
    status: str = "verified"
    source: str = ""


def sourced(raw: Any) -> Sourced:
    if isinstance(raw, dict) and "value" in raw:
        return Sourced(raw["value"], raw.get("status", "verified"), raw.get("source", ""))
    return Sourced(raw)


@dataclass(frozen=True)
class FabricModel:
    """How one InfiniBand fabric is expressed in Azure (see ``fabricModels`` in skus.yaml)."""

    name: str
    scale_set_per: Literal["rack", "pool"]
    scale_set_api_version: Sourced
    interconnect_blocks_available: bool
    single_placement_group: bool
    max_racks_per_fabric: Sourced | None
    max_vms_per_fabric: Sourced | None
    interconnect_group: dict[str, Any] | None
    max_vms_on_request: int | None = None  # maxVmsPerFabric.onRequest: what Azure support may raise the cap to


@dataclass(frozen=True)
class CpuLayout:
    """How a size's vCPUs are laid out (``cpuLayout`` in skus.yaml): what a GPU node registers with slurmd."""

    sockets: int
    cores_per_socket: int
    threads_per_core: int
    status: str = "verified"
    source: str = ""

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core


@dataclass(frozen=True)
class Sku:
    """One VM size: what it has and how its NVLink domain and fabric are shaped."""

    name: str
    family: str
    gpus: int
    vcpus: int
    memory_gib: Sourced
    cpu_arch: Arch
    vms_per_nvlink_domain: int
    ib_ports: int
    ib_rate_gbps: Sourced | None
    quota_family: Sourced
    fabric_model: str | None
    source: str
    status: str
    cpu_layout: CpuLayout | None = None  # GPU sizes: sockets, cores and threads slurmd registers

    @property
    def is_gpu(self) -> bool:
        return self.gpus > 0

    @property
    def is_rack_scale(self) -> bool:
        """True for NVL72-style sizes whose NVLink domain spans several VMs."""
        return self.vms_per_nvlink_domain > 1


@dataclass(frozen=True)
class Image:
    """A known marketplace image (publisher:offer:sku) and the architecture it boots."""

    urn_prefix: str
    arch: Arch
    description: str
    carries_gb_stack: bool = False  # boots with the GB software stack (driver, DOCA, IMEX, NCCL...) installed
    versions: dict[str, ImageVersion] = field(default_factory=dict)  # known versions and what each carries
    versions_status: str = "unverified"
    versions_source: str = ""
    record_file: str | None = None  # where the image records its component versions (JSON)
    record_keys: dict[str, str] = field(default_factory=dict)  # versions.yaml component -> key in record_file

    @property
    def latest_known(self) -> str | None:
        """The newest version the catalog knows (versions sort as dotted dates)."""
        return max(self.versions, default=None)


@dataclass(frozen=True)
class ImageVersion:
    """One published version of an image and the component versions it carries."""

    version: str
    release: str  # where its contents were read (an azhpc-images release tag)
    components: dict[str, str]
    status: str = "unverified"  # verified: seen in Azure's own image list (az vm image show); else inferred
    source: str = ""  # where its existence was seen (for a verified entry)
    components_status: str = "read"  # read: at its own release tag; inferred: from the nearest public configuration
    components_source: str = ""


@dataclass(frozen=True)
class Catalog:
    """Everything the toolkit knows about sizes, images, fabrics and platform limits."""

    skus: dict[str, Sku]
    images: dict[str, Image]
    fabric_models: dict[str, FabricModel]
    limits: dict[str, Sourced]
    # API version a body is declared for -> the azure-mgmt-compute models' version that stands in for it
    contract_models: dict[str, str] = field(default_factory=dict)

    def sku(self, name: str) -> Sku:
        return self.skus[name]

    def fabric_for(self, sku: Sku) -> FabricModel:
        if sku.fabric_model is None:
            raise KeyError(f"{sku.name} has no InfiniBand fabric model")
        return self.fabric_models[sku.fabric_model]

    def limit(self, name: str) -> Any:
        return self.limits[name].value

    def image(self, image: str) -> Image | None:
        """The catalog entry of a marketplace URN (any version), or None for an image id or an unknown image."""
        parts = image.split(":")
        if len(parts) != 4:
            return None
        return self.images.get(":".join(parts[:3]).lower())

    def image_arch(self, image: str) -> Arch | None:
        """Architecture of a marketplace URN (any version), or None when the catalog cannot know it."""
        known = self.image(image)
        return known.arch if known else None

    def image_carries_gb_stack(self, image: str) -> bool | None:
        """Whether a marketplace URN boots with the GB software stack; None when the catalog cannot know."""
        known = self.image(image)
        return known.carries_gb_stack if known else None


def _fabric(name: str, raw: dict[str, Any]) -> FabricModel:
    return FabricModel(
        name=name,
        scale_set_per=raw["scaleSetPer"],
        scale_set_api_version=sourced(raw["scaleSetApiVersion"]),
        interconnect_blocks_available=bool(raw.get("interconnectBlocks", {}).get("available", False)),
        single_placement_group=bool(raw["singlePlacementGroup"]),
        max_racks_per_fabric=sourced(raw["maxRacksPerFabric"]) if "maxRacksPerFabric" in raw else None,
        max_vms_per_fabric=sourced(raw["maxVmsPerFabric"]) if "maxVmsPerFabric" in raw else None,
        interconnect_group=raw.get("interconnectGroup"),
        max_vms_on_request=(raw.get("maxVmsPerFabric") or {}).get("onRequest"),
    )


def _sku(name: str, raw: dict[str, Any]) -> Sku:
    return Sku(
        name=name,
        family=raw["family"],
        gpus=int(raw["gpus"]),
        vcpus=int(raw["vcpus"]),
        memory_gib=sourced(raw["memoryGiB"]),
        cpu_arch=raw["cpuArch"],
        vms_per_nvlink_domain=int(raw["vmsPerNvlinkDomain"]),
        ib_ports=int(raw["ibPorts"]),
        ib_rate_gbps=sourced(raw["ibRateGbps"]) if "ibRateGbps" in raw else None,
        quota_family=sourced(raw["quotaFamily"]),
        fabric_model=raw.get("fabricModel"),
        source=raw.get("source", ""),
        status=raw.get("status", "verified"),
        cpu_layout=_layout(raw["cpuLayout"]) if "cpuLayout" in raw else None,
    )


def _layout(raw: dict[str, Any]) -> CpuLayout:
    return CpuLayout(
        int(raw["sockets"]),
        int(raw["coresPerSocket"]),
        int(raw["threadsPerCore"]),
        str(raw.get("status", "verified")),
        str(raw.get("source", "")),
    )


def _image(urn: str, raw: dict[str, Any]) -> Image:
    default_status = str(raw.get("versionsStatus", "unverified"))
    versions = {
        str(v): ImageVersion(
            str(v),
            str(entry.get("release", "")),
            {k: str(c) for k, c in entry["components"].items()},
            status=str(entry.get("status", default_status)),
            source=str(entry.get("source", "")),
            components_status=str(entry.get("componentsStatus", "read")),
            components_source=str(entry.get("componentsSource", "")),
        )
        for v, entry in (raw.get("versions") or {}).items()
    }
    return Image(
        urn,
        raw["arch"],
        raw.get("description", ""),
        bool(raw.get("carriesGbStack", False)),
        versions=versions,
        versions_status=default_status,
        versions_source=str(raw.get("versionsSource", "")),
        record_file=raw.get("recordFile"),
        record_keys={str(k): str(v) for k, v in (raw.get("recordKeys") or {}).items()},
    )


@functools.cache
def load() -> Catalog:
    """The catalog, read once per process."""
    skus_raw = data("skus.yaml")
    images_raw = data("images.yaml")["images"]
    return Catalog(
        skus={name: _sku(name, raw) for name, raw in skus_raw["skus"].items()},
        images={urn.lower(): _image(urn, raw) for urn, raw in images_raw.items()},
        fabric_models={name: _fabric(name, raw) for name, raw in skus_raw["fabricModels"].items()},
        limits={
            name: sourced(raw)
            for doc in (skus_raw, data("platform.yaml"))  # sizes' limits; Azure's and Linux's (config checks)
            for name, raw in doc["limits"].items()
        },
        contract_models={
            str(version): str(raw["models"]) for version, raw in (skus_raw.get("contractModels") or {}).items()
        },
    )
