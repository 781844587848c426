"""What each node role boots with: the steps and files of the node registry (:mod:`gb300.node.steps`) for the
role and the stack, packed as a node payload (one content-addressed archive, stored once per cluster) and the
small custom data that fetches it (:mod:`gb300.node.payload`, docs/node-payload.md).

Both are rendered from the typed config alone (no deploy-time values), so the custom data's hash, which
carries the payload's sha256, is known at plan time and tells which pools need a reimage. Deploy-time values a
node needs (the Key Vault's generated name, the payload container's URL) reach it as VM tags read from IMDS,
never as custom data.
"""

from __future__ import annotations

from dataclasses import dataclass

from gb300.config import GpuPool, StackConfig
from gb300.node import context as node_context
from gb300.node.context import GPU_NODE, HEAD, head_hostname, slurm_cluster
from gb300.node.payload import Payload, render_small_custom_data

__all__ = ["GPU_NODE", "HEAD", "CustomData", "head_hostname", "render", "slurm_cluster"]


@dataclass(frozen=True)
class CustomData:
    """One role's rendered custom data, base64 of gzip as Azure takes it, with its content hash, and the node
    payload it fetches (``payload.cloud_config`` is the full cloud-config the payload's files come from)."""

    role: str
    base64: str
    sha256: str
    cloud_config: str
    payload: Payload

    @property
    def size(self) -> int:
        return len(self.base64)


def render(role: str, cfg: StackConfig, pool: GpuPool | None = None) -> CustomData:
    """The custom data of ``role`` (``head`` or ``gpu-node`` of ``pool``)."""
    small = render_small_custom_data(node_context.build(cfg, role, pool))
    rendered = small.rendered
    return CustomData(role, rendered.custom_data, rendered.sha256, rendered.cloud_config, small.payload)
