"""A private endpoint with its private DNS zone, the zone's VNet link and the endpoint's zone group.

Every data-plane service the nodes reach (Key Vault, Blob, DFS) is reached only this way: the service's
public network access is off, and its name resolves to the endpoint's address inside the VNet.

Every zone's VNet link falls back to public resolution for names the zone does not hold
(``resolutionPolicy: NxDomainRedirect``, "Fallback to internet for Azure Private DNS zones",
learn.microsoft.com/azure/dns/private-dns-fallback): a VNet linked to ``privatelink.blob.core.windows.net``
otherwise gets NXDOMAIN for every other account (a public dataset, another team's vault) that has a private
endpoint in some other network.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import network, privatedns

from gb300.components.scope import ClusterScope


@dataclass(frozen=True)
class PrivateLinkArgs:
    """What the endpoint serves; ``group`` is the service's sub-resource (vault, blob, dfs). The endpoint goes in
    the scope's endpoints subnet, its zone is linked to the scope's VNet, and it joins the hub's zone of its group
    when the scope names one (``gb300:network.privateDnsZones``): then no zone or VNet link is declared (the hub
    links its zones to the VNet)."""

    group: str
    zone_name: str
    service_id: pulumi.Input[str]
    scope: ClusterScope


@dataclass(frozen=True)
class PrivateLink:
    """The endpoint, and the zone group that makes the service's name resolve to it (what a client waits for)."""

    endpoint: network.PrivateEndpoint
    zone_group: network.PrivateDnsZoneGroup
    zone_id: pulumi.Output[str]
    """The private DNS zone the endpoint's name is in (another endpoint of the same group joins it)."""


def private_endpoint(prefix: str, args: PrivateLinkArgs, *, parent: pulumi.Resource) -> PrivateLink:
    """Declare ``<prefix>-zone``, ``-link``, ``-pe`` and ``-dns`` under ``parent``; with a hub zone, only ``-pe`` and
    ``-dns``, in the hub's zone."""
    scope = args.scope
    hub_zone_id = scope.hub_zone_ids.get(args.group)
    if hub_zone_id is not None:
        return endpoint_in_zone(prefix, args, hub_zone_id, parent=parent)
    child = pulumi.ResourceOptions(parent=parent)
    zone = privatedns.PrivateZone(
        f"{prefix}-zone",
        private_zone_name=args.zone_name,
        resource_group_name=scope.resource_group_name,
        location="global",
        tags=scope.tags,
        opts=child,
    )
    privatedns.VirtualNetworkLink(
        f"{prefix}-link",
        virtual_network_link_name=f"{prefix}-link",
        private_zone_name=zone.name,
        resource_group_name=scope.resource_group_name,
        location="global",
        registration_enabled=False,
        resolution_policy=privatedns.ResolutionPolicy.NX_DOMAIN_REDIRECT,
        virtual_network=privatedns.SubResourceArgs(id=scope.vnet_id),
        tags=scope.tags,
        opts=child,
    )
    return endpoint_in_zone(prefix, args, zone.id, parent=parent)


def endpoint_in_zone(
    prefix: str, args: PrivateLinkArgs, zone_id: pulumi.Input[str], *, parent: pulumi.Resource
) -> PrivateLink:
    """Declare ``<prefix>-pe`` and ``-dns`` under ``parent``, registering the endpoint in the existing zone
    ``zone_id`` (one ``privatelink.blob`` zone per VNet serves every account's blob endpoint)."""
    child = pulumi.ResourceOptions(parent=parent)
    scope = args.scope
    endpoint = network.PrivateEndpoint(
        f"{prefix}-pe",
        private_endpoint_name=f"{prefix}-pe",
        resource_group_name=scope.resource_group_name,
        location=scope.location,
        subnet=network.SubnetArgs(id=scope.subnet_id("endpoints")),
        private_link_service_connections=[
            network.PrivateLinkServiceConnectionArgs(
                name=prefix, private_link_service_id=args.service_id, group_ids=[args.group]
            )
        ],
        tags=scope.tags,
        opts=child,
    )
    zone_group = network.PrivateDnsZoneGroup(
        f"{prefix}-dns",
        private_dns_zone_group_name="default",
        private_endpoint_name=endpoint.name,
        resource_group_name=scope.resource_group_name,
        private_dns_zone_configs=[network.PrivateDnsZoneConfigArgs(name=args.group, private_dns_zone_id=zone_id)],
        opts=child,
    )
    return PrivateLink(endpoint, zone_group, pulumi.Output.from_input(zone_id))
