"""The user-assigned managed identity every node runs as. Nodes fetch secrets with it, never from custom data."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
from pulumi_azure_native import managedidentity


def user_assigned_identity(
    parent: pulumi.Resource, name: str, resource_group_name: pulumi.Input[str], location: str, tags: dict[str, str]
) -> managedidentity.UserAssignedIdentity:
    """A user-assigned identity named ``<name>-id`` in Azure and in Pulumi, a child of ``parent``: the nodes' here,
    the head's remediation identity in :mod:`gb300.components.remediation`."""
    return managedidentity.UserAssignedIdentity(
        f"{name}-id",
        resource_name_=f"{name}-id",
        resource_group_name=resource_group_name,
        location=location,
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent),
    )


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
        uai = user_assigned_identity(self, name, args.resource_group_name, args.location, args.tags)
        self.id = uai.id
        self.principal_id = uai.principal_id
        self.client_id = uai.client_id
        self.register_outputs({"id": uai.id, "principalId": uai.principal_id, "clientId": uai.client_id})
