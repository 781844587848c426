"""The cluster's user-assigned managed identities: the nodes' and the head's remediation identity.

One component for both, parametrised by the role assignment it holds of its own:

* **The node identity** every node runs as (no role of its own): nodes fetch secrets with it, never from custom
  data; the components that need its access (the vault's secret, the containers, the metrics rule) add its role
  assignments themselves.
* **The remediation identity** (``gb300:remediation.enabled``; docs/self-healing.md#permissions), attached to the
  head only, holding one role assignment: the operator's custom role ``gb300 remediation``
  (``gb300:remediation.roleDefinitionId``) on the cluster's resource group, where the racks' scale sets are. The
  node identity gets nothing new: a GPU node's root cannot restart, reimage or redeploy other VMs. The deploy
  pipeline only assigns the role (it cannot write role definitions); the operator created it once from
  ``gb300 heal role``.

Each keeps the type token it had when they were two components (:data:`NODE_TYPE`, :data:`REMEDIATION_TYPE`), so
the URNs of deployed identities and their children are unchanged and no alias is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import managedidentity

from gb300.components.scope import ClusterScope
from gb300.facts import roles

NODE_TYPE = "gb300:identity:NodeIdentity"
REMEDIATION_TYPE = "gb300:heal:RemediationIdentity"


@dataclass(frozen=True)
class IdentityArgs:
    """Inputs of :class:`Identity`."""

    scope: ClusterScope
    role_definition_id: str | None = None
    """A role the identity holds on the cluster's resource group (``<name>-role``): the remediation identity's;
    None: no role of its own (the node identity, whose grants the components that need them add)."""


class Identity(pulumi.ComponentResource):
    """A user-assigned identity ``<name>-id`` (in Azure and in Pulumi) and, with a role, its one assignment."""

    id: pulumi.Output[str]
    principal_id: pulumi.Output[str]
    client_id: pulumi.Output[str]

    def __init__(self, name: str, args: IdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(NODE_TYPE if args.role_definition_id is None else REMEDIATION_TYPE, name, None, opts)
        scope = args.scope
        uai = managedidentity.UserAssignedIdentity(
            f"{name}-id",
            resource_name_=f"{name}-id",
            resource_group_name=scope.resource_group_name,
            location=scope.location,
            tags=scope.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        if args.role_definition_id is not None:
            roles.assign_definition(
                f"{name}-role",
                definition=args.role_definition_id,
                scope=scope.resource_group_id,
                principal_id=uai.principal_id,
                parent=self,
            )
        self.id = uai.id
        self.principal_id = uai.principal_id
        self.client_id = uai.client_id
        self.register_outputs({"id": uai.id, "principalId": uai.principal_id, "clientId": uai.client_id})
