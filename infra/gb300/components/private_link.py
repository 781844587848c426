"""A private endpoint with its private DNS zone, the zone's VNet link and the endpoint's zone group.

Every data-plane service the nodes reach (Key Vault, Blob, DFS) is reached only this way: the service's
public network access is off, and its name resolves to the endpoint's address inside the VNet.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from gb300.components.arm_resource import ArmResource, token
from gb300.components.network import SUBNET_POLICY_DEFAULTS


@dataclass(frozen=True)
class PrivateLinkArgs:
    """Where the endpoint goes and what it serves; ``group`` is the service's sub-resource (vault, blob, dfs)."""

    group: str
    zone_name: str
    service_id: pulumi.Input[str]
    resource_group_name: pulumi.Input[str]
    location: str
    vnet_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    tags: dict[str, str]


@dataclass(frozen=True)
class PrivateLink:
    """The endpoint, and the zone group that makes the service's name resolve to it (what a client waits for)."""

    endpoint: ArmResource
    zone_group: ArmResource


def private_endpoint(prefix: str, args: PrivateLinkArgs, *, parent: pulumi.Resource) -> PrivateLink:
    """Declare ``<prefix>-zone``, ``-link``, ``-pe`` and ``-dns`` under ``parent``."""
    child = pulumi.ResourceOptions(parent=parent)
    zone = ArmResource(
        f"{prefix}-zone",
        {
            "privateZoneName": args.zone_name,
            "resourceGroupName": args.resource_group_name,
            "location": "global",
            "tags": args.tags,
        },
        child,
        type_=token("privatedns", "PrivateZone"),
        outputs=("name",),
    )
    ArmResource(
        f"{prefix}-link",
        {
            "virtualNetworkLinkName": f"{prefix}-link",
            "privateZoneName": zone.output("name"),
            "resourceGroupName": args.resource_group_name,
            "location": "global",
            "registrationEnabled": False,
            "virtualNetwork": {"id": args.vnet_id},
            "tags": args.tags,
        },
        child,
        type_=token("privatedns", "VirtualNetworkLink"),
    )
    endpoint = ArmResource(
        f"{prefix}-pe",
        {
            "privateEndpointName": f"{prefix}-pe",
            "resourceGroupName": args.resource_group_name,
            "location": args.location,
            "subnet": {"id": args.subnet_id, **SUBNET_POLICY_DEFAULTS},
            "privateLinkServiceConnections": [
                {"name": prefix, "privateLinkServiceId": args.service_id, "groupIds": [args.group]}
            ],
            "tags": args.tags,
        },
        child,
        type_=token("network", "PrivateEndpoint"),
        outputs=("name",),
    )
    zone_group = ArmResource(
        f"{prefix}-dns",
        {
            "privateDnsZoneGroupName": "default",
            "privateEndpointName": endpoint.output("name"),
            "resourceGroupName": args.resource_group_name,
            "privateDnsZoneConfigs": [{"name": args.group, "privateDnsZoneId": zone.id}],
        },
        child,
        type_=token("network", "PrivateDnsZoneGroup"),
    )
    return PrivateLink(endpoint, zone_group)
