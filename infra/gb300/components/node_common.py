"""What every VM of the cluster shares, whatever its role: one value built once by the program."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pulumi

from gb300.components.scope import ClusterScope

if TYPE_CHECKING:
    from gb300.components.monitoring import Monitoring


@dataclass(frozen=True)
class NodeCommon:
    """Where a node lives (the cluster scope), who may log in, the identity it runs as and the tags it carries.

    The head node (:class:`~gb300.components.head.HeadNodeArgs`) and every GPU pool
    (:class:`~gb300.components.gpu_pool.GpuPoolArgs`) take the same one; each finds its role's subnet in the scope
    (``head``, ``gpu``), and what else differs by role (size, image, custom data) stays on their own ``...Args``.
    """

    scope: ClusterScope
    admin_username: str
    ssh_public_key: str
    identity_id: pulumi.Input[str]
    tags: dict[str, pulumi.Input[str]] = field(default_factory=dict)
    """The node tags: the scope's, plus the deploy-time values nodes read from their own tags
    (:func:`gb300.tags.node`)."""
    # Resources a node's first boot reads (its secret, the role that lets it read it, the private DNS that
    # resolves the vault): every VM and scale set is created after them (``depends_on``).
    boot_dependencies: tuple[pulumi.Resource, ...] = ()
    # Where the nodes send logs: every scale set runs the Azure Monitor Agent as an extension and the head VM
    # as a VM extension (each component attaches its own machines); None: no monitoring.
    monitoring: Monitoring | None = None
