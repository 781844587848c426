"""What each node role boots with, for a whole stack: :func:`render_stack` renders every role's bundle once.

One bundle per role (:mod:`gb300.node.bundle`: the head's, one per GPU pool), packed by :mod:`gb300.node.pack` as
a node payload (one content-addressed archive, stored once per cluster) and the small custom data that fetches it
(docs/node-payload.md). Both are rendered from the typed config alone, so the custom data's hash is known at plan
time and tells which pools need a reimage. The custom data does not carry the payload's sha256 (a signed manifest
does), so a payload change leaves it unchanged. Its one deploy-time value, the payload account's name, goes in at
deploy time (:meth:`~gb300.node.pack.CustomData.for_account`) and is left out of the hash. Other deploy-time values
a node needs (the Key Vault's generated name) reach it as VM tags read from IMDS.

The program, the plan's summary and ``gb300 payload publish`` all call :func:`render_stack`; within one process it
renders a given config object once (the plan's program and summary share one render).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gb300 import tags as gb300_tags
from gb300.config import CpuPool, GpuPool, StackConfig
from gb300.node import context as node_context
from gb300.node.boot_context import BootstrapContext
from gb300.node.bundle import bundle_for
from gb300.node.pack import CustomData, pack_custom_data, pack_full

__all__ = ["CustomData", "StackRender", "render", "render_custom_data", "render_stack"]


@dataclass(frozen=True)
class StackRender:
    """Every role's custom data and payload for one stack: the head's, then each GPU pool's."""

    head: CustomData
    pools: dict[str, CustomData]
    login: CustomData | None = None
    """The login nodes' (gb300:login), or None without them."""
    cpu_pools: dict[str, CustomData] = field(default_factory=dict)
    """Each CPU pool's (gb300:cpuPools), in the stack's order."""

    @property
    def all(self) -> tuple[CustomData, ...]:
        """The head's, then each pool's, in the stack's pool order (as the program declares them), then the login
        nodes', then each CPU pool's."""
        login = (self.login,) if self.login is not None else ()
        return (self.head, *self.pools.values(), *login, *self.cpu_pools.values())


def render(role: str, cfg: StackConfig, pool: GpuPool | CpuPool | None = None) -> CustomData:
    """The custom data of ``role`` (``head``, ``login``, or ``gpu-node`` or ``cpu-node`` of ``pool``)."""
    return pack_custom_data(bundle_for(node_context.build(cfg, role, pool)))


_LAST: list[tuple[StackConfig, StackRender]] = []
"""The last stack rendered and its render: the program and the summary of one plan share it (same object)."""


def render_stack(cfg: StackConfig) -> StackRender:
    """Every role's custom data and payload for ``cfg``, rendered once per config object."""
    if _LAST and _LAST[0][0] is cfg:
        return _LAST[0][1]
    rendered = StackRender(
        render(gb300_tags.ROLE_HEAD, cfg),
        {pool.name: render(gb300_tags.ROLE_GPU_NODE, cfg, pool) for pool in cfg.gpu_pools},
        render(gb300_tags.ROLE_LOGIN, cfg) if cfg.login is not None else None,
        {pool.name: render(gb300_tags.ROLE_CPU_NODE, cfg, pool) for pool in cfg.cpu_pools},
    )
    _LAST[:] = [(cfg, rendered)]
    return rendered


def render_custom_data(ctx: BootstrapContext) -> CustomData:
    """``ctx.role``'s full cloud-config packed as custom data (no fetch): a context without a stack (the bootstrap's
    own tests) boots this whole. Raises BootstrapError for secret-looking content or past 64 KB."""
    return pack_full(bundle_for(ctx, fetch=False))
