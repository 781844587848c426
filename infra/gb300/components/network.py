"""The cluster network: a VNet carved into role subnets, NSGs that deny the Internet, NAT egress, Bastion.

In a landing zone (docs/landing-zone.md) the VNet is the hub team's (``existing_vnet``): the subnets are declared
in it and nothing else of it; egress may go through the hub's firewall (a route table, ``firewall_ip``) instead of a
NAT gateway, and the hub's Bastion may serve the head.

Nothing here gives a NIC a public IP. The only public addresses are Bastion's (its service endpoint)
and the NAT gateway's (egress only, attached to no NIC). Default outbound access is off on every subnet, so
the NAT gateway is the egress of the subnets that need one: GPU and head nodes, and the Azure Managed Lustre
filesystem, which reaches Azure services from its own subnet (its NSG rules come from ``data/storage.yaml``).
The gateway's public IPs are sized from the nodes behind it (:mod:`gb300.facts.egress`, rule
``nat-egress-capacity``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
from pulumi_azure_native import network

from gb300.components.scope import ClusterScope, NetworkIds
from gb300.config import netplan
from gb300.config.netplan import Role, SubnetPlan
from gb300.facts import catalog, egress, storage_facts

# Subnets whose resources need outbound access: nodes (packages, Azure APIs) and Azure Managed Lustre.
EGRESS_ROLES: frozenset[Role] = frozenset({"gpu", "head", "storage"})


def security_rule(
    name: str,
    priority: int,
    *,
    access: str,
    protocol: str,
    source: str,
    destination: str,
    ports: str,
    description: str,
    direction: str = "Inbound",
) -> network.SecurityRuleArgs:
    """One NSG rule from any source port."""
    return network.SecurityRuleArgs(
        name=name,
        priority=priority,
        direction=direction,
        access=access,
        protocol=protocol,
        source_address_prefix=source,
        source_port_range="*",
        destination_address_prefix=destination,
        destination_port_range=ports,
        description=description,
    )


_DENY_INTERNET = security_rule(
    "deny-internet-inbound",
    4000,
    access="Deny",
    protocol="*",
    source="Internet",
    destination="*",
    ports="*",
    description="gb300: nothing on the Internet reaches the cluster directly",
)


def plan_subnets(
    address_space: str,
    *,
    gpu_vms: int,
    bastion: bool,
    storage_prefix: int | None,
    gpu_prefix: int | None,
) -> list[SubnetPlan]:
    """The subnets carved from the address space (``gb300:network.addressSpace``).

    Every size comes from the config (``gb300:storage.lustre.subnetPrefixLength`` for the storage subnet, its
    default Azure's documented size for the capacity), never from a live answer: the offline plan shows the
    CIDRs a real preview produces, and nothing Azure says later re-carves subnets in use. Rule
    ``lustre-subnet-size`` compares the storage subnet with Azure's requirement.
    """
    roles: tuple[Role, ...] = ("gpu", "head", "storage", "endpoints")
    if bastion:
        roles = (*roles, "bastion")
    return netplan.carve(
        address_space,
        gpu_vms=gpu_vms,
        reserved=catalog.load().limit("subnetReservedAddresses"),
        roles=roles,
        storage_prefix=storage_prefix,
        gpu_prefix=gpu_prefix,
    )


@dataclass(frozen=True)
class ExistingVnet:
    """An existing VNet: its id, and its resource group and name (where its subnets are declared)."""

    id: str
    resource_group_name: str
    name: str


@dataclass(frozen=True)
class NetworkArgs:
    """Inputs of :class:`Network`: where (the scope) and what. ``subnets`` come from :func:`plan_subnets`."""

    scope: ClusterScope
    address_space: str
    subnets: list[SubnetPlan]
    ssh_source_ranges: list[str] = field(default_factory=list)
    nat_gateway: bool = True
    nat_public_ips: int = 1
    """Public IPs of the NAT gateway, 1 to ``natPublicIpsPerGateway`` (16): :meth:`NatSizing.gateway_ips
    <gb300.facts.egress.NatSizing.gateway_ips>` of the nodes behind it."""
    bastion: bool = True
    existing_vnet: ExistingVnet | None = None
    """A VNet gb300 carves its subnets in and does not declare (``gb300:network.existingVnetId``); None: its own."""
    firewall_ip: str | None = None
    """``gb300:network.egress.nextHopIp``: a route table sends ``0.0.0.0/0`` there from the egress subnets (give
    ``nat_gateway=False`` with it)."""


@dataclass(frozen=True)
class _Vnet:
    """The VNet the subnets are declared in: its id, name and resource group."""

    id: pulumi.Output[str]
    name: pulumi.Output[str]
    resource_group_name: pulumi.Input[str]


class Network(pulumi.ComponentResource):
    """A VNet (or an existing one) with one subnet per role, an NSG per non-Bastion subnet, NAT or firewall egress,
    and optional Bastion."""

    subnet_ids: dict[Role, pulumi.Output[str]]
    vnet_id: pulumi.Output[str]
    bastion_name: pulumi.Output[str] | None

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        most = egress.nat_sizing().max_ips
        if not 1 <= args.nat_public_ips <= most:
            raise ValueError(
                f"'nat_public_ips' must be 1 to {most}, Azure's limit per NAT gateway (got {args.nat_public_ips!r})"
            )
        super().__init__("gb300:network:Network", name, None, opts)
        self._name = name
        self._args = args
        vnet = self._vnet()
        route_table_id = self._route_table() if args.firewall_ip is not None else None
        nat_id = self._nat_gateway() if args.nat_gateway else None
        self.subnet_ids = self._subnets(vnet, nat_id, route_table_id)
        self.bastion_name = self._bastion() if args.bastion and "bastion" in self.subnet_ids else None
        self.vnet_id = vnet.id
        self.register_outputs({"vnetId": vnet.id, "subnetIds": self.subnet_ids})

    @property
    def ids(self) -> NetworkIds:
        """The VNet and subnet ids, as :meth:`gb300.components.scope.ClusterScope.with_network` takes them."""
        return NetworkIds(self.vnet_id, dict(self.subnet_ids))

    def _vnet(self) -> _Vnet:
        """The cluster's own VNet, or the landing zone's (``existing_vnet``), which is not declared."""
        name, args, scope = self._name, self._args, self._args.scope
        if args.existing_vnet is None:
            vnet = network.VirtualNetwork(
                f"{name}-vnet",
                virtual_network_name=f"{name}-vnet",
                resource_group_name=scope.resource_group_name,
                location=scope.location,
                address_space=network.AddressSpaceArgs(address_prefixes=[args.address_space]),
                tags=scope.tags,
                opts=pulumi.ResourceOptions(parent=self),
            )
            return _Vnet(vnet.id, vnet.name, scope.resource_group_name)
        # A landing zone's VNet: the subnets are its children, declared in its resource group; the VNet itself,
        # its other subnets and its peerings stay the hub team's.
        existing = args.existing_vnet
        return _Vnet(
            pulumi.Output.from_input(existing.id),
            pulumi.Output.from_input(existing.name),
            existing.resource_group_name,
        )

    def _route_table(self) -> pulumi.Output[str]:
        """The route table that sends the egress subnets' default route to the hub's firewall (``firewall_ip``)."""
        name, scope = self._name, self._args.scope
        return network.RouteTable(
            f"{name}-egress-rt",
            route_table_name=f"{name}-egress-rt",
            resource_group_name=scope.resource_group_name,
            location=scope.location,
            # Routes the hub propagates (ExpressRoute, VPN) still reach the subnets.
            disable_bgp_route_propagation=False,
            routes=[
                network.RouteArgs(
                    name="default-via-firewall",
                    address_prefix="0.0.0.0/0",
                    next_hop_type=network.RouteNextHopType.VIRTUAL_APPLIANCE,
                    next_hop_ip_address=self._args.firewall_ip,
                )
            ],
            tags=scope.tags,
            opts=pulumi.ResourceOptions(parent=self),
        ).id

    def _nat_gateway(self) -> pulumi.Output[str]:
        """The NAT gateway and its public IPs (``nat_public_ips``)."""
        name, scope = self._name, self._args.scope
        # The first keeps the name of the one address gateways had before sizing (no replacement, same egress IP).
        nat_ips = [
            self._public_ip(f"{name}-nat-ip" if i == 1 else f"{name}-nat-ip-{i}", zonal=True)
            for i in range(1, self._args.nat_public_ips + 1)
        ]
        return network.NatGateway(
            f"{name}-nat",
            nat_gateway_name=f"{name}-nat",
            resource_group_name=scope.resource_group_name,
            location=scope.location,
            sku=network.NatGatewaySkuArgs(name=network.NatGatewaySkuName.STANDARD),
            public_ip_addresses=[network.SubResourceArgs(id=ip.id) for ip in nat_ips],
            zones=scope.zones,
            tags=scope.tags,
            opts=pulumi.ResourceOptions(parent=self),
        ).id

    def _subnets(
        self, vnet: _Vnet, nat_id: pulumi.Output[str] | None, route_table_id: pulumi.Output[str] | None
    ) -> dict[Role, pulumi.Output[str]]:
        """One subnet per planned role, each but Bastion's with its NSG; the egress roles through NAT or firewall."""
        name, args = self._name, self._args
        by_role = {s.role: s for s in args.subnets}
        subnet_ids: dict[Role, pulumi.Output[str]] = {}
        previous: pulumi.Resource | None = None
        for plan in args.subnets:
            nsg_id = self._nsg(plan, by_role) if plan.role != "bastion" else None
            egress_role = plan.role in EGRESS_ROLES
            subnet = network.Subnet(
                f"{name}-{plan.name}",
                subnet_name=plan.name,
                virtual_network_name=vnet.name,
                resource_group_name=vnet.resource_group_name,
                address_prefix=plan.prefix,
                network_security_group=network.NetworkSecurityGroupArgs(id=nsg_id) if nsg_id else None,
                nat_gateway=network.SubResourceArgs(id=nat_id) if egress_role and nat_id else None,
                route_table=network.RouteTableArgs(id=route_table_id) if egress_role and route_table_id else None,
                default_outbound_access=False,
                # Otherwise the schema's default (Disabled): private endpoints go in the endpoints subnet only.
                private_endpoint_network_policies="Enabled" if plan.role == "endpoints" else None,
                # Azure serialises subnet writes on one VNet; chaining them avoids conflicting PUTs.
                opts=pulumi.ResourceOptions(parent=self, depends_on=[previous] if previous else None),
            )
            previous = subnet
            subnet_ids[plan.role] = subnet.id
        return subnet_ids

    def _nsg(self, plan: SubnetPlan, by_role: dict[Role, SubnetPlan]) -> pulumi.Output[str]:
        """The network security group of one subnet."""
        name, scope = self._name, self._args.scope
        return network.NetworkSecurityGroup(
            f"{name}-{plan.name}-nsg",
            network_security_group_name=f"{name}-{plan.name}-nsg",
            resource_group_name=scope.resource_group_name,
            location=scope.location,
            security_rules=self._rules(plan, self._args, by_role),
            tags=scope.tags,
            opts=pulumi.ResourceOptions(parent=self),
        ).id

    def _bastion(self) -> pulumi.Output[str]:
        """Bastion (Standard, tunnelling on) in its subnet, and its public IP; returns its name."""
        name, scope = self._name, self._args.scope
        bastion_ip = self._public_ip(f"{name}-bastion-ip", zonal=False)
        return network.BastionHost(
            f"{name}-bastion",
            bastion_host_name=f"{name}-bastion",
            resource_group_name=scope.resource_group_name,
            location=scope.location,
            sku=network.SkuArgs(name=network.BastionHostSkuName.STANDARD),
            enable_tunneling=True,
            ip_configurations=[
                network.BastionHostIPConfigurationArgs(
                    name="bastion",
                    subnet=network.SubResourceArgs(id=self.subnet_ids["bastion"]),
                    public_ip_address=network.SubResourceArgs(id=bastion_ip.id),
                )
            ],
            tags=scope.tags,
            opts=pulumi.ResourceOptions(parent=self),
        ).name

    def _public_ip(self, name: str, *, zonal: bool) -> network.PublicIPAddress:
        """A Standard static public address for a service endpoint (NAT egress, Bastion), never for a NIC."""
        scope = self._args.scope
        return network.PublicIPAddress(
            name,
            public_ip_address_name=name,
            resource_group_name=scope.resource_group_name,
            location=scope.location,
            sku=network.PublicIPAddressSkuArgs(name=network.PublicIPAddressSkuName.STANDARD),
            public_ip_allocation_method=network.IPAllocationMethod.STATIC,
            zones=scope.zones if zonal else None,
            tags=scope.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )

    @staticmethod
    def _rules(plan: SubnetPlan, args: NetworkArgs, by_role: dict[Role, SubnetPlan]) -> list[network.SecurityRuleArgs]:
        rules: list[network.SecurityRuleArgs] = []
        if plan.role == "head":
            sources = list(args.ssh_source_ranges)
            if "bastion" in by_role:
                sources.append(by_role["bastion"].prefix)
            for i, source in enumerate(sources):
                rules.append(
                    security_rule(
                        f"allow-ssh-{i}",
                        100 + i,
                        access="Allow",
                        protocol="Tcp",
                        source=source,
                        destination="*",
                        ports="22",
                        description="gb300: SSH from gb300:access.sshSourceRanges or Bastion",
                    )
                )
        if plan.role == "storage":
            rules.extend(_lustre_rule(rule) for rule in storage_facts.lustre_network_rules())
        rules.append(_DENY_INTERNET)
        return rules


def _lustre_rule(rule: dict[str, str]) -> network.SecurityRuleArgs:
    """One NSG rule Azure Managed Lustre needs in its subnet, from ``lustreNetwork.rules``."""
    return security_rule(
        rule["name"],
        int(rule["priority"]),
        direction=rule["direction"],
        access="Allow",
        protocol=rule["protocol"],
        source=rule["source"],
        destination=rule["destination"],
        ports=str(rule["ports"]),
        description=rule["description"],
    )
