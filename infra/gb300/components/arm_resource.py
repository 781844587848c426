"""Azure resources registered by type token and camelCase inputs, without pulumi-azure-native's typed classes.

gb300 declares every azure-native resource through :class:`ArmResource`: the type token
(``azure-native:network:Subnet``), the inputs as the provider receives them (camelCase, nested dicts), and the
outputs the program reads. The engine and the provider see exactly what the typed class would send (the same
type, name, inputs and provider version: ``tests/components/test_arm_resource.py`` registers every resource of
the reference plan again through its typed class and compares), but the plan no longer pays for the typed
modules: importing ``pulumi_azure_native.network`` alone loads every network resource and input type (about
0.3 s of CPU), the modules gb300 used took about 0.75 s and 70 MiB of a plan, and each typed class computes one
alias URN per older API version as it is constructed (pulumi/pulumi#10010). Measurements: ``docs/scale.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
from pulumi_azure_native import _utilities

TYPE = "azure-native:resources:Resource"
PACKAGE = "azure-native"


def token(module: str, name: str) -> str:
    """The type token of an azure-native resource: ``token("network", "Subnet")``."""
    return f"{PACKAGE}:{module}:{name}"


class ArmResource(pulumi.CustomResource):
    """One azure-native resource (by default a generic ``resources:Resource``).

    ``inputs`` are camelCase, as the provider receives them; a ``None`` input is left out, as the typed classes
    leave it out. ``outputs`` names the output properties the program reads (:meth:`output`); ``id`` and ``urn``
    are always there.
    """

    def __init__(
        self,
        name: str,
        inputs: Mapping[str, pulumi.Input[Any] | None],
        opts: pulumi.ResourceOptions | None = None,
        *,
        type_: str = TYPE,
        outputs: Sequence[str] = (),
    ) -> None:
        # The provider version and download URL the typed classes pin, from the same generated helper.
        opts = pulumi.ResourceOptions.merge(_utilities.get_resource_opts_defaults(), opts)
        props: dict[str, Any] = {k: v for k, v in inputs.items() if v is not None}
        for key in outputs:
            props.setdefault(key, None)
        self._declared = frozenset(props)
        super().__init__(type_, name, props, opts)

    def output(self, key: str) -> pulumi.Output[Any]:
        """The output property ``key`` (camelCase), declared as an input or in ``outputs``."""
        if key not in self._declared:
            raise AttributeError(f"{self._name}: output {key!r} was not declared")
        value: pulumi.Output[Any] = getattr(self, key)
        return value


def invoke(module: str, function: str, args: Mapping[str, Any] | None = None) -> pulumi.Output[Any]:
    """An azure-native function (``invoke("authorization", "getClientConfig")``): its result as a camelCase
    dict, invoked with the provider version the typed functions pin."""
    opts = pulumi.InvokeOutputOptions.merge(_utilities.get_invoke_opts_defaults(), None)
    return pulumi.runtime.invoke_output(token(module, function), dict(args or {}), opts=opts)
