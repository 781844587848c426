"""Shared builders for the bootstrap tests: the reference contexts each role is rendered from."""

from __future__ import annotations

from gb300.node.boot_context import BootstrapContext
from gb300.node.custom_data import render_custom_data
from gb300.node.pack import CustomData
from gb300.node.roles import known_roles

REFERENCE_CLUSTER = "gb300-ref"
POOL_FOR_ROLE = {"gpu-node": "gpu-a", "head": "head"}


def reference_context(role: str, **overrides: object) -> BootstrapContext:
    """The context the goldens are rendered from (reference cluster, one pool per role)."""
    return BootstrapContext.for_pool(
        role=role,
        cluster_name=REFERENCE_CLUSTER,
        pool_name=POOL_FOR_ROLE.get(role, role),
        software_overrides=overrides or None,
    )


def render_role(role: str, **overrides: object) -> CustomData:
    """Render `role` for the reference cluster."""
    return render_custom_data(reference_context(role, **overrides))


ROLES = known_roles()
