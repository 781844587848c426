"""What each node role boots with: the steps and files of the node registry (:mod:`gb300.node.steps`) for the
role and the stack, packed as a node payload (one content-addressed archive, stored once per cluster) and the
small custom data that fetches it (:mod:`gb300.node.payload`, docs/node-payload.md).

Both are rendered from the typed config alone, so the custom data's hash is known at plan time and tells which
pools need a reimage. The custom data does not carry the payload's sha256 (a signed manifest does), so a payload
change leaves it unchanged. Its one deploy-time value, the payload account's name, goes in at deploy time
(:meth:`CustomData.for_account`) and is left out of the hash. Other deploy-time values a node needs (the Key
Vault's generated name) reach it as VM tags read from IMDS, each checked against the form it must have.
"""

from __future__ import annotations

from dataclasses import dataclass

from gb300.config import GpuPool, StackConfig
from gb300.node import context as node_context
from gb300.node.context import GPU_NODE, HEAD, head_hostname, slurm_cluster
from gb300.node.payload import ACCOUNT_PLACEHOLDER, Payload, pack_text, render_small_custom_data

__all__ = ["GPU_NODE", "HEAD", "CustomData", "head_hostname", "render", "slurm_cluster"]


@dataclass(frozen=True)
class CustomData:
    """One role's rendered custom data, base64 of gzip as Azure takes it, with its content hash, and the node
    payload it fetches (``payload.cloud_config`` is the full cloud-config the payload's files come from)."""

    role: str
    base64: str
    """The custom data with the payload account's placeholder (sizes, the plan's custom data checks)."""
    sha256: str
    cloud_config: str
    payload: Payload
    name: str
    """The payload's name in the payload container (``head``, ``gpu-<pool>``)."""

    @property
    def size(self) -> int:
        return len(self.base64)

    def for_account(self, account: str) -> str:
        """What Azure receives: the custom data with the payload account ``account`` put in."""
        return pack_text(self.cloud_config.replace(ACCOUNT_PLACEHOLDER, account))


def render(role: str, cfg: StackConfig, pool: GpuPool | None = None) -> CustomData:
    """The custom data of ``role`` (``head`` or ``gpu-node`` of ``pool``)."""
    small = render_small_custom_data(node_context.build(cfg, role, pool))
    rendered = small.rendered
    return CustomData(role, rendered.custom_data, rendered.sha256, rendered.cloud_config, small.payload, small.name)
