"""Pulumi components: one concept per module, each with a typed ``...Args``.

Every component takes the :class:`~gb300.components.scope.ClusterScope` (resource group, location, tags,
subscription, network ids: the placement, said once) and ids of the other shared resources it needs
(``identity_id``), never reads stack config, tags every taggable child, parents every child to itself and creates
no providers.
"""

from gb300.components.gpu_pool import GpuPool, GpuPoolArgs
from gb300.components.identity import Identity, IdentityArgs
from gb300.components.network import Network, NetworkArgs
from gb300.components.scope import ClusterScope, NetworkIds

__all__ = [
    "ClusterScope",
    "GpuPool",
    "GpuPoolArgs",
    "Identity",
    "IdentityArgs",
    "Network",
    "NetworkArgs",
    "NetworkIds",
]
