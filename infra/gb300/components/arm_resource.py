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
