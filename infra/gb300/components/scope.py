"""The cluster scope: where every resource of one cluster is placed, said once.

Cluster Toolkit's blueprint ``vars:`` reach every module input of the same name (GoogleCloudPlatform/cluster-toolkit
``pkg/config/expand.go``); here the program builds one :class:`ClusterScope` (the cluster's name, resource group,
location, zone, tags, subscription and tenant, the hub's private DNS zones) and hands the same value to every
component, which reads its placement from it instead of restating it in its own ``...Args``. Once the network
component has declared the subnets, :meth:`ClusterScope.with_network` adds their ids, and every later component
takes those from the scope too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi

from gb300.config.netplan import Role


@dataclass(frozen=True)
class NetworkIds:
    """The cluster's VNet and its role subnets, as :class:`~gb300.components.network.Network` declares them."""

    vnet_id: pulumi.Input[str]
    subnet_ids: Mapping[Role, pulumi.Input[str]]


@dataclass(frozen=True)
class ClusterScope:
    """What every component of one cluster shares: its name, where it lives and the tags it carries."""

    cluster_name: str
    resource_group_name: pulumi.Input[str]
    resource_group_id: pulumi.Input[str]
    location: str
    subscription_id: pulumi.Input[str]
    """The deployer's subscription (the storage accounts' names are derived from it)."""
    tenant_id: pulumi.Input[str]
    zone: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    hub_zone_ids: Mapping[str, str] = field(default_factory=dict)
    """The landing zone hub's private DNS zone per sub-resource (``blob``, ``dfs``, ``vault``;
    ``gb300:network.privateDnsZones``): a private endpoint of that sub-resource joins it and declares no zone."""
    network: NetworkIds | None = None
    """The VNet and subnets; None until the network component has declared them (:meth:`with_network`)."""

    @property
    def zones(self) -> list[str] | None:
        """The zone as Azure's ``zones`` property takes it: ``[zone]``, or None for a regional resource."""
        return [self.zone] if self.zone else None

    def with_network(self, ids: NetworkIds) -> ClusterScope:
        """This scope with the cluster's VNet and subnets."""
        return dataclasses.replace(self, network=ids)

    @property
    def vnet_id(self) -> pulumi.Input[str]:
        """The cluster's VNet (its own, or the landing zone's)."""
        return self._network().vnet_id

    def subnet_id(self, role: Role) -> pulumi.Input[str]:
        """The id of the subnet of ``role`` (``gpu``, ``head``, ``storage``, ``endpoints``, ``bastion``)."""
        ids = self._network().subnet_ids
        if role not in ids:
            raise ValueError(f"the cluster scope has no {role!r} subnet (it has {sorted(ids)})")
        return ids[role]

    def _network(self) -> NetworkIds:
        if self.network is None:
            raise ValueError("the cluster scope has no network yet: declare the Network component and use with_network")
        return self.network
