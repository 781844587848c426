"""Compute rules: whole racks, one InfiniBand fabric per pool within its model's limits, matching image
architecture, and custom data Azure accepts. Sizes, rack shapes and limits come from the catalog."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gb300.azure import contract, inventory
from gb300.azure.inventory import ScaleSetView, mapping
from gb300.azure.machines import machines
from gb300.facts import catalog
from gb300.findings import Level, Report
from gb300.resources import UNKNOWN, Resource
from gb300.rules.base import RuleContext, count, resource_rule, text


@resource_rule("gpu-pool-rack-aligned")
def gpu_pool_rack_aligned(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """GPU scale sets of NVL72 sizes hold whole racks (a multiple of the NVLink domain, 18 VMs)."""
    del ctx
    cat = catalog.load()
    for ss in inventory.scale_sets(resources):
        sku = cat.skus.get(ss.vm_size)
        if sku is None or not sku.is_rack_scale:
            continue
        rack = sku.vms_per_nvlink_domain
        if ss.capacity % rack:
            lower, upper = ss.capacity // rack * rack, (ss.capacity // rack + 1) * rack
            yield Report(
                Level.ERROR,
                ss.urn,
                f"scale set {ss.name} ({sku.name}): capacity must be a multiple of {rack} VMs, one NVL72 rack "
                f"(got {ss.capacity:,}). A partial rack leaves GPUs outside any NVLink domain; use "
                f"{lower:,} or {upper:,} VMs (set gb300:gpuPools[].racks).",
            )


def _groups(resources: Sequence[Resource]) -> dict[str, list[ScaleSetView]]:
    pools: dict[str, list[ScaleSetView]] = defaultdict(list)
    for ss in inventory.scale_sets(resources):
        pools[ss.pool or ss.name].append(ss)
    return pools


@resource_rule("ib-fabric-within-limits")
def ib_fabric_within_limits(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """A GPU pool is one InfiniBand fabric within its fabric model's limits, never silently split."""
    del ctx
    cat = catalog.load()
    max_per_scale_set = int(cat.limit("maxVmsPerScaleSet"))
    for pool, members in sorted(_groups(resources).items()):
        sizes = {ss.vm_size for ss in members}
        skus = [cat.skus[s] for s in sizes if s in cat.skus]
        for ss in members:
            if ss.capacity > max_per_scale_set:
                yield _finding(
                    ss.urn,
                    f"scale set {ss.name}: must hold at most {max_per_scale_set:,} VMs, Azure's scale set limit "
                    f"(got {ss.capacity:,}). Split the pool into whole racks of their own scale sets.",
                )
        if len(sizes) > 1:
            yield _finding(
                members[0].urn,
                f"pool {pool}: all scale sets must have one VM size to share a fabric "
                f"(got {', '.join(sorted(sizes))}). "
                "Give each size its own pool.",
            )
            continue
        if not skus or skus[0].fabric_model is None or skus[0].fabric_model not in cat.fabric_models:
            continue
        sku = skus[0]
        fabric = cat.fabric_for(sku)
        vms = sum(ss.capacity for ss in members)
        if fabric.max_vms_per_fabric is not None and vms > int(fabric.max_vms_per_fabric.value):
            more = fabric.max_vms_on_request
            extra = f" ({more:,} on request to Azure support)" if more else ""
            yield _finding(
                members[0].urn,
                f"pool {pool} ({sku.name}, fabric model {fabric.name}): must hold at most "
                f"{int(fabric.max_vms_per_fabric.value):,} VMs in one InfiniBand placement group{extra} "
                f"(got {vms:,}). Make several smaller pools, each its own fabric, or lower gb300:gpuPools[].racks.",
            )
        if fabric.max_racks_per_fabric is not None and sku.is_rack_scale:
            racks = vms // sku.vms_per_nvlink_domain
            limit = int(fabric.max_racks_per_fabric.value)
            if racks > limit:
                yield _finding(
                    members[0].urn,
                    f"pool {pool} ({sku.name}): must span at most {limit:,} racks in one InfiniBand fabric "
                    f"(got {racks:,}; limit is {fabric.max_racks_per_fabric.status}: "
                    f"{fabric.max_racks_per_fabric.source}). Split the pool or lower gb300:gpuPools[].racks.",
                )
        yield from _split(pool, members, fabric.scale_set_per, fabric.single_placement_group)


def _split(pool: str, members: list[ScaleSetView], per: str, single_pg: bool) -> Iterator[Report]:
    if per == "rack":
        groups: dict[str | None, list[str]] = defaultdict(list)
        for ss in members:
            group = ss.interconnect_group_id if isinstance(ss.interconnect_group_id, str) else None
            groups[group].append(ss.name)
        unknown = groups.pop(UNKNOWN, [])  # a preview before the group exists: joined, id not yet known
        known = [g for g in groups if g is not None]
        # Each scale set without a group is a fabric of its own; unknown ids may all be the one known group.
        fabrics = len(known) + len(groups.get(None, [])) + (1 if unknown and not known else 0)
        if fabrics > 1:
            parts = [
                f"{count(len(names), 'scale set')} in {_last(g) if g else 'no interconnect group'}"
                for g, names in sorted(groups.items(), key=lambda kv: (kv[0] is not None, kv[0] or ""))
            ]
            yield _finding(
                members[0].urn,
                f"pool {pool}: every rack's scale set must join the same interconnect group, or the pool is split "
                f"into isolated InfiniBand fabrics (got {'; '.join(parts)}). Give each scale set the pool's "
                "interconnectGroupProfile.interconnectGroup.id (gb300's GpuPool does this; check resources declared "
                "elsewhere).",
            )
        return
    if len(members) > 1:
        yield _finding(
            members[0].urn,
            f"pool {pool}: must be one scale set in the placement-group fabric model (got {len(members)}: "
            f"{', '.join(sorted(ss.name for ss in members))}); InfiniBand never crosses scale sets. "
            "Make each scale set its own pool or use one scale set.",
        )
    for ss in members:
        if single_pg and ss.single_placement_group is False:
            yield _finding(
                ss.urn,
                f"scale set {ss.name}: singlePlacementGroup must be true for InfiniBand in this fabric model "
                "(got false); without it VMs land in several placement groups and fabrics.",
            )


def _last(resource_id: str) -> str:
    return resource_id.rstrip("/").rsplit("/", 1)[-1]


def _finding(urn: str, message: str) -> Report:
    return Report(Level.ERROR, urn, message)


def _image_text(reference: Mapping[str, Any]) -> str | None:
    if isinstance(reference.get("id"), str):
        return str(reference["id"])
    parts = [reference.get(k) for k in ("publisher", "offer", "sku", "version")]
    if all(isinstance(p, str) and p for p in parts[:3]):
        return ":".join(str(p) for p in parts[:3]) + f":{parts[3] if isinstance(parts[3], str) else 'latest'}"
    return None


@resource_rule("image-arch-matches-sku")
def image_arch_matches_sku(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """The image boots the CPU architecture of the VM size: no x86_64 image on arm64 GB300, or the reverse."""
    del ctx
    cat = catalog.load()
    for m in machines(resources):
        sku = cat.skus.get(m.size)
        image = _image_text(m.image_reference)
        if sku is None or image is None:
            continue
        arch = cat.image_arch(image)
        key = "gb300:gpuPools[].image" if m.pool else "the image"
        if arch is None:
            yield Report(
                Level.WARNING,
                m.urn,
                f"{m.name} ({sku.name}, {sku.cpu_arch}): the architecture of image {image} is unknown to the "
                f"catalog, so gb300 cannot check it boots on {sku.cpu_arch}. Check it by hand (az vm image show "
                f"--urn {image} --query architecture) and add it to infra/gb300/data/images.yaml.",
            )
        elif arch != sku.cpu_arch:
            hint = ", ".join(sorted(i.urn_prefix for i in cat.images.values() if i.arch == sku.cpu_arch))
            yield Report(
                Level.ERROR,
                m.urn,
                f"{m.name}: image must boot {sku.cpu_arch} like {sku.name} (got {image}, an {arch} image); the VM "
                f"would not boot. Set {key} to an {sku.cpu_arch} image such as {hint}.",
            )


def _custom_data(resource: Resource) -> str | None:
    inputs = resource.inputs
    if inventory.is_scale_set(resource):
        props = mapping(inputs.get("properties")) if inventory.has_arm_body(resource) else inputs
        return text(mapping(mapping(props.get("virtualMachineProfile")).get("osProfile")).get("customData"))
    if resource.type == "azure-native:compute:VirtualMachine":
        return text(mapping(inputs.get("osProfile")).get("customData"))
    if resource.type == inventory.GENERIC and str(inputs.get("resourceType", "")).lower() == "virtualmachines":
        return text(mapping(mapping(inputs.get("properties")).get("osProfile")).get("customData"))
    return None


@resource_rule("custom-data-size")
def custom_data_size(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """Custom data (base64, as Azure receives it) stays under Azure's 64 KB limit, with a warning above 8 KB (it
    only fetches the node payload, docs/node-payload.md)."""
    del ctx
    cat = catalog.load()
    limit, warn = int(cat.limit("customDataMaxBytes")), int(cat.limit("customDataWarnBytes"))
    for resource in resources:
        data = _custom_data(resource)
        if data is None:
            continue
        size = len(data)
        where = f"{resource.name}: custom data"
        if size > limit:
            yield Report(
                Level.ERROR,
                resource.urn,
                f"{where} must be at most {limit:,} bytes in base64, Azure's limit (got {size:,}); Azure rejects the "
                "deployment. Move files into the node payload (docs/node-payload.md), which nodes fetch at boot.",
            )
        elif size > warn:
            yield Report(
                Level.WARNING,
                resource.urn,
                f"{where} is {size:,} bytes in base64, over the {warn:,} bytes a custom data that only fetches the "
                f"node payload needs ({limit - size:,} bytes under Azure's {limit:,}-byte limit). Move what went "
                "inline into the node payload (docs/node-payload.md).",
            )


@resource_rule("arm-body-matches-sdk")
def arm_body_matches_sdk(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """ARM bodies gb300 writes as data match Azure's SDK models: no unknown or read-only key, no unknown enum value."""
    del ctx
    for violation in contract.violations(resources):
        yield Report(
            Level.ERROR,
            violation.urn,
            f"{violation.resource}: {violation.path}: {violation.problem}. Azure would reject the body or silently "
            "ignore the key; fix the resource that writes it (see docs/fabric.md).",
        )
