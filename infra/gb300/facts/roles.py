"""Built-in Azure role definitions by name (``data/roles.yaml``) and scoped role assignments."""

from __future__ import annotations

import functools
import uuid

import pulumi
from pulumi_azure_native import authorization

from gb300.facts.loader import data


@functools.cache
def _roles() -> dict[str, str]:
    roles: dict[str, str] = data("roles.yaml")["roles"]
    return roles


def definition_id(role: str) -> str:
    """The subscription-independent role definition id of a built-in role."""
    return f"/providers/Microsoft.Authorization/roleDefinitions/{_roles()[role]}"


def name_of(role_definition_id: str) -> str | None:
    """The built-in role name of a role definition id (with or without a subscription prefix), or None."""
    guid = role_definition_id.rstrip("/").rsplit("/", 1)[-1].lower()
    return next((name for name, known in _roles().items() if known.lower() == guid), None)


def assign(
    name: str,
    *,
    role: str,
    scope: pulumi.Input[str],
    principal_id: pulumi.Input[str],
    parent: pulumi.Resource,
    principal_type: str = "ServicePrincipal",
) -> authorization.RoleAssignment:
    """Grant ``role`` to a service principal (a managed identity; ``principal_type`` ``User`` for a person) on
    exactly ``scope``.

    The assignment's name is :func:`assignment_name` of the scope, role and principal: stable across runs, and
    different in every subscription (the scope is a resource id that starts with it). Azure refuses a second
    assignment of one role to one principal on one scope, so a renamed assignment is deleted before it is
    created again (``delete_before_replace``).
    """
    return assign_definition(
        name,
        definition=definition_id(role),
        scope=scope,
        principal_id=principal_id,
        parent=parent,
        principal_type=principal_type,
    )


def assign_definition(
    name: str,
    *,
    definition: str,
    scope: pulumi.Input[str],
    principal_id: pulumi.Input[str],
    parent: pulumi.Resource,
    principal_type: str = "ServicePrincipal",
) -> authorization.RoleAssignment:
    """:func:`assign` for a role given by its definition id (a custom role an operator created)."""
    return authorization.RoleAssignment(
        name,
        role_assignment_name=pulumi.Output.all(scope, principal_id).apply(
            lambda parts: assignment_name(str(parts[0]), definition, str(parts[1]))
        ),
        role_definition_id=definition,
        principal_id=principal_id,
        principal_type=principal_type,
        scope=scope,
        opts=pulumi.ResourceOptions(parent=parent, delete_before_replace=True),
    )


def assignment_name(scope: str, role_definition_id: str, principal_id: str) -> str:
    """The GUID name of a role assignment, as ARM templates derive it: ``guid(scope, role, principal)``.

    Role assignment names must be unique in the whole Microsoft Entra tenant, whatever their scope; a name from
    the full scope id (which names the subscription) cannot collide with another subscription's.
    """
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"gb300/{scope.lower()}/{role_definition_id.lower()}/{principal_id}"))
