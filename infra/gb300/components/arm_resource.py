"""Azure resources registered without the typed classes' alias lists.

The typed ``pulumi_azure_native.resources.Resource`` adds 25 aliases, one per older API-version type token
(``azure-native:resources/v20151101:Resource`` ...). The Python SDK turns every alias into URN outputs as the
resource is constructed (pulumi/pulumi#10010), about 1 ms of CPU each on the benchmark machine: 85% of the CPU
of a 1,389-rack plan, which declares one such resource per rack (bench/README.md). Aliases matter only to
a stack whose state holds the resource under one of those old tokens; gb300 has only ever declared the
unversioned token. :class:`ArmResource` registers the same type, name, inputs and provider version, without
them: for the resources declared once per rack (the scale set, its data collection rule associations).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi_azure_native import _utilities

TYPE = "azure-native:resources:Resource"


class ArmResource(pulumi.CustomResource):
    """One azure-native resource (by default a generic ``resources:Resource``); ``inputs`` are camelCase, as the
    provider receives them, in the order the typed class sends them (so the plan JSON reads the same)."""

    def __init__(
        self,
        name: str,
        inputs: Mapping[str, pulumi.Input[Any]],
        opts: pulumi.ResourceOptions | None = None,
        *,
        type_: str = TYPE,
    ) -> None:
        # The provider version and download URL the typed classes pin, from the same generated helper.
        opts = pulumi.ResourceOptions.merge(_utilities.get_resource_opts_defaults(), opts)
        super().__init__(type_, name, dict(inputs), opts)


def drop_version_aliases(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
    """A stack transformation that registers every typed azure-native resource without its alias list.

    The typed classes add one alias per older API-version type token (60 for each network resource); the SDK
    computes their URNs when the resource is constructed, before any transform that runs in the engine could drop
    them, about 1,500 for the reference stack and half its fixed plan CPU (docs/scale.md). They matter only to a
    state that holds a resource under one of those versioned tokens, and gb300 has only ever declared the
    unversioned ones. Only the ``azure-native:`` resources' aliases go; any other stays.
    """
    if not args.opts.aliases or not args.type_.startswith("azure-native:"):
        return None
    opts = args.opts._copy()
    opts.aliases = None
    return pulumi.ResourceTransformationResult(args.props, opts)
