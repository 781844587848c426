"""The tagging rule: every Azure resource that carries tags carries the cluster's required ones.

A resource "carries tags" when it is a tracked ARM resource, i.e. it has a ``location`` input; child
resources (subnets, role assignments, containers) take no tags and are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from gb300 import tags as gb300_tags
from gb300.findings import Level, Report
from gb300.resources import Resource
from gb300.rules.base import RuleContext, is_azure, resource_rule, short, tags_of

TOOLKIT_TAGS = gb300_tags.TOOLKIT


@resource_rule("required-tags")
def required_tags(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """Every taggable Azure resource carries the tags in gb300:policy.requiredTags (default: owner, the cluster's)."""
    wanted = list(dict.fromkeys(ctx.policy.required_tags))
    if not wanted:
        return
    for resource in resources:
        if not is_azure(resource) or "location" not in resource.inputs:
            continue
        tags = tags_of(resource)
        missing = [t for t in wanted if not (isinstance(tags.get(t), str) and tags.get(t))]
        if not missing:
            continue
        user = [t for t in missing if t not in TOOLKIT_TAGS]
        fix = (
            f"Add {', '.join(user)} to gb300:cluster.tags"
            if user
            else "Declare it through a gb300 component, which tags every child with the cluster's tags"
        )
        yield Report(
            Level.WARNING,
            resource.urn,
            f"{resource.type.rsplit(':', 1)[-1]} {short(resource)}: must carry tag(s) {', '.join(wanted)} "
            f"(missing {', '.join(missing)}). {fix}, or change gb300:policy.requiredTags.",
        )
