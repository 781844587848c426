"""An azure-native resource registered by type token and camelCase inputs, without its typed class.

Every other Azure resource gb300 declares is a pulumi-azure-native typed class (``network.Subnet(...)``). This is
left for the GPU pool's interconnect group (``components/gpu_pool.py``, being rewritten as a rack component);
``tests/components/test_typed_resources.py`` lists that exception, holds it to what the typed class would register,
and fails once nothing uses this module any more: then delete it.
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
