"""What each node role boots with: the steps and files of the node registry (:mod:`gb300.node.steps`) for the
role and the stack, packed as Azure custom data.

Custom data is rendered from the typed config alone (no deploy-time values), so its hash is known at plan
time and tells which pools need a reimage. Deploy-time values a node needs (the Key Vault's generated name)
reach it as VM tags read from IMDS, never as custom data.
"""

from __future__ import annotations

from dataclasses import dataclass

from gb300 import bootstrap
from gb300.config import GpuPool, StackConfig
from gb300.node import context as node_context
from gb300.node.context import GPU_NODE, HEAD, head_hostname, slurm_cluster

__all__ = ["GPU_NODE", "HEAD", "CustomData", "head_hostname", "render", "slurm_cluster"]


@dataclass(frozen=True)
class CustomData:
    """One role's rendered custom data, base64 of gzip as Azure takes it, with its content hash."""

    role: str
    base64: str
    sha256: str
    cloud_config: str

    @property
    def size(self) -> int:
        return len(self.base64)


def render(role: str, cfg: StackConfig, pool: GpuPool | None = None) -> CustomData:
    """The custom data of ``role`` (``head`` or ``gpu-node`` of ``pool``)."""
    rendered = bootstrap.render_custom_data(node_context.build(cfg, role, pool))
    return CustomData(role, rendered.custom_data, rendered.sha256, rendered.cloud_config)
