"""Pulumi components: one concept per module, each with a typed ``...Args``.

Components take ids of shared resources in (``subnet_id``, ``identity_id``), never read stack config,
tag every taggable child, parent every child to themselves and create no providers.
"""

from gb300.components.gpu_pool import GpuPool, GpuPoolArgs
from gb300.components.identity import NodeIdentity, NodeIdentityArgs
from gb300.components.network import Network, NetworkArgs

__all__ = ["GpuPool", "GpuPoolArgs", "Network", "NetworkArgs", "NodeIdentity", "NodeIdentityArgs"]
