"""``custom-data-changed``: which pools' running nodes keep an old bootstrap until they are reimaged.

Scale sets use ``upgradePolicy: Manual`` so a new cloud-config never reimages a training rack by surprise;
the flip side (peers' pain) is that a changed custom data silently never reaches running VMs. Each scale set
and the head VM carry the tag ``gb300-custom-data-sha256``; with the deployed state
(``gb300 plan --state FILE``) the plan compares the tags and names every pool whose nodes need a reimage,
with the command that rolls it out one rack at a time. Like ``storage-data-loss`` it needs deployed state,
so it runs in ``gb300 plan --state`` only, not in the policy pack.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gb300 import inventory
from gb300.findings import Finding, Level
from gb300.inventory import Resource
from gb300.rules.data_loss import DeployedResource

RULE_ID = "custom-data-changed"
HASH_TAG = "gb300-custom-data-sha256"
VM = "azure-native:compute:VirtualMachine"


def _hash(inputs: Mapping[str, Any]) -> str | None:
    tags = inputs.get("tags")
    value = tags.get(HASH_TAG) if isinstance(tags, Mapping) else None
    return value if isinstance(value, str) else None


def _group(resource: Resource) -> str:
    tags = resource.inputs.get("tags")
    tags = tags if isinstance(tags, Mapping) else {}
    return str(tags.get("gb300-pool") or tags.get("gb300-role") or resource.name)


def changed(resources: Sequence[Resource], deployed: Sequence[DeployedResource]) -> dict[str, list[str]]:
    """Pool (or role) -> names of its deployed scale sets / VMs whose custom data hash differs from the plan's."""
    before = {d.urn: _hash(d.inputs) for d in deployed}
    out: dict[str, list[str]] = {}
    for resource in resources:
        if not (inventory.is_scale_set(resource) or resource.type == VM):
            continue
        if resource.urn not in before:
            continue  # new: it boots with the new custom data
        old, new = before[resource.urn], _hash(resource.inputs)
        if new is not None and old != new:
            out.setdefault(_group(resource), []).append(resource.name)
    return {group: sorted(names) for group, names in sorted(out.items())}


def findings(resources: Sequence[Resource], deployed: Sequence[DeployedResource]) -> list[Finding]:
    """One info per pool whose running nodes need a reimage to pick up the new bootstrap."""
    out = []
    for group, names in changed(resources, deployed).items():
        example = names[0]
        out.append(
            Finding(
                RULE_ID,
                Level.INFO,
                f"gb300:gpuPools[name={group}]" if group != "head" else "gb300:head",
                f"{group}: the bootstrap changed; {len(names)} deployed scale set(s)/VM(s) keep the old one until "
                f"reimaged ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}). Roll out one rack at a "
                f"time after `pulumi up`: drain the rack's nodes in Slurm, then "
                f"`az vmss reimage -g <rg> -n {example}` and wait for bootstrap.done before the next rack.",
            )
        )
    return out
