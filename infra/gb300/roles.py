"""Built-in Azure role definitions by name (``data/roles.yaml``) and scoped role assignments."""

from __future__ import annotations

import functools
import uuid

import pulumi
import yaml
from pulumi_azure_native import authorization

from gb300.paths import DATA_DIR


@functools.cache
def _roles() -> dict[str, str]:
    with (DATA_DIR / "roles.yaml").open(encoding="utf-8") as fh:
        roles: dict[str, str] = yaml.safe_load(fh)["roles"]
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
) -> authorization.RoleAssignment:
    """Grant ``role`` to a service principal (a managed identity) on exactly ``scope``.

    The assignment's name is a GUID derived from the Pulumi name, so it is stable across runs.
    """
    return authorization.RoleAssignment(
        name,
        role_assignment_name=str(uuid.uuid5(uuid.NAMESPACE_URL, f"gb300/{name}")),
        role_definition_id=definition_id(role),
        principal_id=principal_id,
        principal_type="ServicePrincipal",
        scope=scope,
        opts=pulumi.ResourceOptions(parent=parent),
    )
