"""The resource nouns every layer shares: what a rule reads (:class:`Resource`), what the plan records
(:class:`ResourceRecord`) and what a deployed stack's state holds (:class:`DeployedResource`).

This module is the ground floor: it imports nothing from gb300, so the plan, the rules, the policy pack, the
summary and the ops commands can all read these types without importing one another (as SkyPilot keeps its
provisioning records in ``sky/provision/common.py``, below every cloud's provisioner). ``tests/test_layering.py``
holds it to that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

UNKNOWN = "(known after deployment)"
"""What the policy pack puts where a preview cannot know a value yet (the id of a resource not created): a rule, and
the contract check of ARM bodies, read it as "not known", never as the text it is."""


class Resource(Protocol):
    """What a rule needs of a resource: the plan's record, the policy pack's arguments and the deployed state's
    resources all fit."""

    @property
    def urn(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def inputs(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class ResourceRecord:
    """One resource as the plan JSON shows it; inputs are camelCase, as the provider receives them."""

    urn: str
    type: str
    name: str
    parent: str | None
    protect: bool
    id: str | None
    inputs: dict[str, Any]
    retain_on_delete: bool = False
    replace_on_changes: tuple[str, ...] = ()
    delete_before_replace: bool = False
    dependencies: tuple[str, ...] = ()  # URNs created first: explicit depends_on and the inputs' resources
    package: Mapping[str, str] | None = None  # the parameterized package it belongs to (azure-native's compute)
    custom_timeouts: Mapping[str, str] | None = None
    provider: str | None = None  # an explicit provider's reference, ``<urn>::<id>``

    def as_json(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self.package is not None:
            extra["package"] = dict(self.package)
        if self.custom_timeouts is not None:
            extra["customTimeouts"] = dict(self.custom_timeouts)
        if self.provider is not None:
            extra["provider"] = self.provider
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "parent": self.parent,
            "protect": self.protect,
            "retainOnDelete": self.retain_on_delete,
            "replaceOnChanges": list(self.replace_on_changes),
            "deleteBeforeReplace": self.delete_before_replace,
            "dependencies": list(self.dependencies),
            "id": self.id,
            **extra,
            "inputs": self.inputs,
        }


@dataclass(frozen=True)
class DeployedResource:
    """One resource of the deployed stack's state: its URN, type, id and the inputs it was created with."""

    urn: str
    type: str
    name: str
    id: str | None
    inputs: Mapping[str, Any]


MUNGE_SECRET_NAME = "munge-key"  # noqa: S105 - the name of the secret, not its value
"""The Key Vault secret holding the cluster's munge key: the program creates it (gb300.components.secrets), the nodes
fetch it (gb300.node.context): a name both layers share, here so that the node layer needs no Pulumi module."""
