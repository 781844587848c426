"""The user-assigned managed identity every node runs as. Nodes fetch secrets with it, never from custom data."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
from pulumi_azure_native import managedidentity


@dataclass(frozen=True)
class NodeIdentityArgs:
    """Inputs of :class:`NodeIdentity`."""

    resource_group_name: pulumi.Input[str]
    location: str
    tags: dict[str, str] = field(default_factory=dict)


class NodeIdentity(pulumi.ComponentResource):
    """One user-assigned identity for the nodes; components that need access add its role assignments."""

    id: pulumi.Output[str]
    principal_id: pulumi.Output[str]
    client_id: pulumi.Output[str]

    def __init__(self, name: str, args: NodeIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gb300:identity:NodeIdentity", name, None, opts)
        uai = managedidentity.UserAssignedIdentity(
            f"{name}-id",
            resource_name_=f"{name}-id",
            resource_group_name=args.resource_group_name,
            location=args.location,
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.id = uai.id
        self.principal_id = uai.principal_id
        self.client_id = uai.client_id
        self.register_outputs({"id": uai.id, "principalId": uai.principal_id, "clientId": uai.client_id})
