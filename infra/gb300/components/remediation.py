"""The head's remediation identity (``gb300:remediation.enabled``; docs/self-healing.md#permissions).

A user-assigned identity of its own, attached to the head only, holding one role assignment: the operator's custom
role ``gb300 remediation`` (``gb300:remediation.roleDefinitionId``) on the cluster's resource group, where the
racks' scale sets are. The node identity every GPU node runs as gets nothing new: a GPU node's root cannot
restart, reimage or redeploy other VMs. The deploy pipeline only assigns the role (it cannot write role
definitions); the operator created it once from ``gb300 heal role``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from gb300.components.identity import user_assigned_identity
from gb300.facts import roles


@dataclass(frozen=True)
class RemediationIdentityArgs:
    """Inputs of :class:`RemediationIdentity`."""

    resource_group_name: pulumi.Input[str]
    resource_group_id: pulumi.Input[str]
    location: str
    role_definition_id: str
    tags: dict[str, str] = field(default_factory=dict)


class RemediationIdentity(pulumi.ComponentResource):
    """The identity ``gb300-heal`` signs in with, and its one role assignment on the resource group."""

    id: pulumi.Output[str]
    client_id: pulumi.Output[str]
    principal_id: pulumi.Output[str]

    def __init__(self, name: str, args: RemediationIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gb300:heal:RemediationIdentity", name, None, opts)
        uai = user_assigned_identity(self, name, args.resource_group_name, args.location, args.tags)
        roles.assign_definition(
            f"{name}-role",
            definition=args.role_definition_id,
            scope=args.resource_group_id,
            principal_id=uai.principal_id,
            parent=self,
        )
        self.id = uai.id
        self.client_id = uai.client_id
        self.principal_id = uai.principal_id
        self.register_outputs({"id": uai.id, "clientId": uai.client_id, "principalId": uai.principal_id})
