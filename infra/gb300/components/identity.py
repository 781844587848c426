"""The user-assigned managed identity every node runs as. Nodes fetch secrets with it, never from custom data."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from gb300.components.arm_resource import ArmResource, token


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
        uai = ArmResource(
            f"{name}-id",
            {
                "resourceName": f"{name}-id",
                "resourceGroupName": args.resource_group_name,
                "location": args.location,
                "tags": args.tags,
            },
            pulumi.ResourceOptions(parent=self),
            type_=token("managedidentity", "UserAssignedIdentity"),
            outputs=("principalId", "clientId"),
        )
        self.id = uai.id
        self.principal_id = uai.output("principalId")
        self.client_id = uai.output("clientId")
        self.register_outputs({"id": uai.id, "principalId": self.principal_id, "clientId": self.client_id})
