"""NAT egress sizing: how many public IPs a NAT gateway needs for the nodes behind it.

Arithmetic over three limits of ``data/platform.yaml``: the concurrent connections Azure allows per NAT public IP
to one destination (``natConnectionsPerPublicIp``), the public IPs one gateway takes (``natPublicIpsPerGateway``)
and gb300's estimate of the connections one booting node opens to the busiest destination (``natFlowsPerNode``).
The program sizes the NAT gateway with it; rule ``nat-egress-capacity`` checks the registered gateway with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gb300.facts import catalog


@dataclass(frozen=True)
class NatSizing:
    """What one NAT public IP carries to one destination, how many a gateway takes, what one node asks for."""

    connections_per_ip: int
    max_ips: int
    flows_per_node: int

    def ips_for(self, nodes: int) -> int:
        """Public IPs whose connections to one destination cover ``nodes`` at the per-node target (at least 1;
        not capped: compare with :attr:`max_ips`)."""
        return max(1, math.ceil(nodes * self.flows_per_node / self.connections_per_ip))

    def gateway_ips(self, nodes: int) -> int:
        """The public IPs gb300 gives a gateway with ``nodes`` behind it: :meth:`ips_for`, at most :attr:`max_ips`."""
        return min(self.ips_for(nodes), self.max_ips)

    def nodes_for(self, ips: int) -> int:
        """The most nodes ``ips`` public IPs carry at the per-node target."""
        return ips * self.connections_per_ip // self.flows_per_node


def nat_sizing() -> NatSizing:
    """The sizing from ``data/platform.yaml``."""
    cat = catalog.load()
    return NatSizing(
        connections_per_ip=int(cat.limit("natConnectionsPerPublicIp")),
        max_ips=int(cat.limit("natPublicIpsPerGateway")),
        flows_per_node=int(cat.limit("natFlowsPerNode")),
    )
