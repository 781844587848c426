"""``custom-data-changed``: which pools' running nodes keep an old bootstrap, and whether the head is replaced.

Scale sets use ``upgradePolicy: Manual`` so a new cloud-config never reimages a training rack by surprise;
the flip side (peers' pain) is that a changed custom data silently never reaches running VMs. Each scale set
and the head VM carry the tag :data:`gb300.tags.CUSTOM_DATA_HASH`; with the deployed state
(``gb300 plan --state FILE``) the plan compares the tags and names every pool whose nodes need a reimage,
with the command that rolls it out one rack at a time. The head is a single VM, whose custom data Azure never
updates after creation: it is declared with ``replaceOnChanges: [osProfile.customData]`` (and
``deleteBeforeReplace``, its name being fixed), so a changed head bootstrap replaces the VM, and this rule
warns about what that loses. Like ``storage-data-loss`` it needs deployed state,
so it runs in ``gb300 plan --state`` only, not in the policy pack.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gb300 import tags as gb300_tags
from gb300.azure import inventory
from gb300.findings import Level, Report
from gb300.resources import DeployedResource, Resource
from gb300.rules.base import state_rule

HASH_TAG = gb300_tags.CUSTOM_DATA_HASH
VM = "azure-native:compute:VirtualMachine"


def _hash(inputs: Mapping[str, Any]) -> str | None:
    return gb300_tags.custom_data_hash(inputs.get("tags"))


def _group(resource: Resource) -> str:
    tags = resource.inputs.get("tags")
    return gb300_tags.pool_of(tags) or gb300_tags.role_of(tags) or resource.name


def _stale(resources: Sequence[Resource], deployed: Sequence[DeployedResource], *, vms: bool) -> list[Resource]:
    """Deployed scale sets (or VMs) whose custom data hash differs from the plan's; new ones boot with the new."""
    before = {d.urn: _hash(d.inputs) for d in deployed}
    out = []
    for resource in resources:
        if not (resource.type == VM if vms else inventory.is_scale_set(resource)):
            continue
        if resource.urn not in before:
            continue  # new: it boots with the new custom data
        old, new = before[resource.urn], _hash(resource.inputs)
        if new is not None and old != new:
            out.append(resource)
    return out


def stale(resources: Sequence[Resource], deployed: Sequence[DeployedResource]) -> list[Resource]:
    """Deployed scale sets whose custom data hash differs from the plan's, in plan order (``gb300 rollout``)."""
    return _stale(resources, deployed, vms=False)


def changed(resources: Sequence[Resource], deployed: Sequence[DeployedResource]) -> dict[str, list[str]]:
    """Pool -> names of its deployed scale sets whose custom data hash differs from the plan's (to reimage)."""
    out: dict[str, list[str]] = {}
    for resource in _stale(resources, deployed, vms=False):
        out.setdefault(_group(resource), []).append(resource.name)
    return {group: sorted(names) for group, names in sorted(out.items())}


def replaced(resources: Sequence[Resource], deployed: Sequence[DeployedResource]) -> list[str]:
    """Names of deployed VMs (the head) whose custom data changed: ``pulumi up`` replaces them."""
    return sorted(r.name for r in _stale(resources, deployed, vms=True))


@state_rule("custom-data-changed", lambda resources, ctx: (resources, ctx.deployed or ()))
def findings(resources: Sequence[Resource], deployed: Sequence[DeployedResource]) -> list[Report]:
    """One info per pool whose running nodes need a reimage; one warning per VM that the update replaces."""
    out = []
    for group, names in changed(resources, deployed).items():
        example = names[0]
        out.append(
            Report(
                Level.INFO,
                f"gb300:gpuPools[name={group}]",
                f"{group}: the bootstrap changed; {len(names)} deployed scale set(s) keep the old one until "
                f"reimaged ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}). After `pulumi up`, run "
                "`gb300 rollout --stack <stack> --state <export> --azure live --dry-run`, then without --dry-run: "
                f"rack by rack ({example} first) it drains the nodes, brings the VMs to the scale set's new model "
                "(manual upgrade), reimages them and waits for the health gate "
                "(docs/rollout.md).",
            )
        )
    for name in replaced(resources, deployed):
        out.append(
            Report(
                Level.WARNING,
                "gb300:head",
                f"{name}: the head's bootstrap changed, and Azure keeps a VM's custom data from its creation, so "
                f"`pulumi up` replaces the head VM (replaceOnChanges osProfile.customData: delete, then create "
                f"{name} again). The Slurm controller's state and the accounting database are on the head's "
                f"state disk ({name}-state, detached and attached to the new VM), so the queue and job history "
                "survive, and /home lives on Lustre when gb300:storage.lustre is set (docs/storage.md); running "
                "jobs lose their controller while the head is rebuilt, and the rest of the OS disk (local "
                "installs; /home without Lustre) is gone. Before `pulumi up`, let jobs finish "
                "(`scontrol update partitionname=<pool> state=drain`); or revert the change. Reimaging does not "
                "apply to a single VM.",
            )
        )
    return out


RULE_ID = findings.id
