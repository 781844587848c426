"""Network rules: the VNet stays clear of Azure's RDMA range, every subnet fits what it carries, Lustre gets out,
the NAT gateway carries the nodes behind it."""

from __future__ import annotations

import ipaddress
import math
from collections import defaultdict
from collections.abc import Iterator, Sequence

from gb300.azure import inventory
from gb300.azure.inventory import items, mapping
from gb300.facts import catalog, egress, storage_facts
from gb300.findings import Level, Report
from gb300.resources import Resource
from gb300.rules.base import RuleContext, count, network, resource_rule, short, text

VNET = "azure-native:network:VirtualNetwork"
SUBNET = inventory.SUBNET
LUSTRE = "azure-native:storagecache:AmlFilesystem"


@resource_rule("vnet-avoids-rdma-range")
def vnet_avoids_rdma_range(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """A VNet address space must not overlap Azure's RDMA network (172.16.0.0/16); in a VNet the stack does not
    declare (a landing zone's), neither may the subnets it carves there."""
    del ctx
    rdma = ipaddress.IPv4Network(catalog.load().limit("rdmaReservedRange"))
    declared = set(_spaces(resources))
    for sub in inventory.of_type(resources, SUBNET):
        vnet_name = text(sub.inputs.get("virtualNetworkName"))
        net = network(sub.inputs.get("addressPrefix"))
        if vnet_name is not None and vnet_name.lower() not in declared and net is not None and net.overlaps(rdma):
            yield Report(
                Level.ERROR,
                sub.urn,
                f"subnet {short_subnet(sub)} of VNet {vnet_name}: must not overlap {rdma}, which Azure's InfiniBand "
                f"RDMA network reserves (got {net}). Set gb300:network.addressSpace to a range of the VNet outside it.",
            )
    for vnet in inventory.of_type(resources, VNET):
        prefixes = items(mapping(vnet.inputs.get("addressSpace")).get("addressPrefixes"))
        for prefix in prefixes:
            net = network(prefix)
            if net is not None and net.overlaps(rdma):
                yield Report(
                    Level.ERROR,
                    vnet.urn,
                    f"VNet {short(vnet)}: address space must not overlap {rdma}, which Azure's InfiniBand RDMA "
                    f"network reserves (got {prefix}). Set gb300:network.addressSpace to a range outside it, "
                    "such as 10.40.0.0/16.",
                )


def _subnet_key(subnet_id: str) -> tuple[str, str] | None:
    """``.../virtualNetworks/<vnet>/subnets/<name>`` -> ``(vnet, name)`` (lowercase), or None."""
    parts = subnet_id.strip("/").split("/")
    lowered = [p.lower() for p in parts]
    try:
        i = lowered.index("virtualnetworks")
    except ValueError:
        return None
    if len(parts) < i + 4 or lowered[i + 2] != "subnets":
        return None
    return parts[i + 1].lower(), parts[i + 3].lower()


def _prefix_for(addresses: int) -> int:
    return 32 - max(3, math.ceil(math.log2(max(addresses, 1))))


Net = ipaddress.IPv4Network
SubnetEntry = tuple[Resource, Net]


def _spaces(resources: Sequence[Resource]) -> dict[str, list[Net]]:
    """VNet name (lowercase) -> its address prefixes."""
    spaces: dict[str, list[Net]] = {}
    for vnet in inventory.of_type(resources, VNET):
        name = text(vnet.inputs.get("virtualNetworkName")) or vnet.name
        prefixes = items(mapping(vnet.inputs.get("addressSpace")).get("addressPrefixes"))
        spaces[name.lower()] = [n for n in (network(p) for p in prefixes) if n is not None]
    return spaces


def _subnets(resources: Sequence[Resource]) -> dict[tuple[str, str], SubnetEntry]:
    """(VNet, subnet) names (lowercase) -> the subnet resource and its prefix."""
    subnets: dict[tuple[str, str], SubnetEntry] = {}
    for sub in inventory.of_type(resources, SUBNET):
        net = network(sub.inputs.get("addressPrefix"))
        vnet_name = text(sub.inputs.get("virtualNetworkName"))
        if net is not None and vnet_name is not None:
            subnets[(vnet_name.lower(), short_subnet(sub).lower())] = (sub, net)
    return subnets


def _placement(vnet_name: str, space: list[Net], entries: list[SubnetEntry]) -> Iterator[Report]:
    """Subnets outside their VNet's address space, and subnets overlapping each other."""
    for sub, net in entries:
        if space and not any(net.subnet_of(s) for s in space):
            yield Report(
                Level.ERROR,
                sub.urn,
                f"subnet {short_subnet(sub)}: must lie inside VNet {vnet_name}'s address space "
                f"{', '.join(map(str, space))} (got {net}). The address space is too small for the subnets the "
                "cluster needs: set gb300:network.addressSpace to a larger range (a /16 holds every role).",
            )
    ordered = sorted(entries, key=lambda e: e[1])
    for i, (sub, net) in enumerate(ordered):
        earlier = [f"{short_subnet(o)} ({o_net})" for o, o_net in ordered[:i] if o_net.overlaps(net)]
        if earlier:
            yield Report(
                Level.ERROR,
                sub.urn,
                f"subnet {short_subnet(sub)}: must not overlap another subnet (got {net}, overlapping "
                f"{', '.join(earlier)}). The address space cannot hold every subnet apart: set "
                "gb300:network.addressSpace to a larger range (a /16 holds every role).",
            )


@resource_rule("subnet-fits-pool")
def subnet_fits_pool(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """Each subnet lies inside its VNet, overlaps no other subnet, and has room for the VMs its scale sets place."""
    del ctx
    reserved = int(catalog.load().limit("subnetReservedAddresses"))
    spaces = _spaces(resources)
    subnets = _subnets(resources)
    by_vnet: dict[str, list[SubnetEntry]] = defaultdict(list)
    for (vnet_name, _), entry in subnets.items():
        by_vnet[vnet_name].append(entry)
    for vnet_name, entries in sorted(by_vnet.items()):
        yield from _placement(vnet_name, spaces.get(vnet_name, []), entries)

    demand: dict[tuple[str, str], int] = defaultdict(int)
    pools: dict[tuple[str, str], set[str]] = defaultdict(set)
    for ss in inventory.scale_sets(resources):
        for subnet_id in set(ss.subnet_ids):
            key = _subnet_key(subnet_id)
            if key is not None:
                demand[key] += ss.capacity
                pools[key].add(ss.pool or ss.name)
    for key, vms in sorted(demand.items()):
        if key not in subnets:
            continue
        sub, net = subnets[key]
        usable = net.num_addresses - reserved
        if vms > usable:
            yield Report(
                Level.ERROR,
                sub.urn,
                f"subnet {short_subnet(sub)} ({net}): must have room for {count(vms, 'VM')} of pool(s) "
                f"{', '.join(sorted(pools[key]))} plus Azure's {reserved} reserved addresses (got {usable:,} usable). "
                f"It needs a /{_prefix_for(vms + reserved)} or larger: "
                + (
                    f"set gb300:network.gpuSubnetPrefixLength to {_prefix_for(vms + reserved)} or less (unset, the "
                    "GPU subnet is the upper half of gb300:network.addressSpace), or plan fewer racks. Check with "
                    "`gb300 plan --stack <stack>`."
                    if short_subnet(sub) == "gpu"
                    else "set gb300:network.addressSpace to a larger range, or plan fewer racks."
                ),
            )


def short_subnet(sub: Resource) -> str:
    return text(sub.inputs.get("subnetName")) or short(sub)


AML = "azure-native:storagecache:AmlFilesystem"


@resource_rule("lustre-subnet-size")
def lustre_subnet_size(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """The Lustre filesystem's subnet is at least the size Azure documents for its capacity."""
    del ctx
    subnets = _subnets(resources)
    for fs in inventory.of_type(resources, AML):
        capacity = fs.inputs.get("storageCapacityTiB")
        key = _subnet_key(text(fs.inputs.get("filesystemSubnet")) or "")
        if key is None or key not in subnets or not isinstance(capacity, int | float) or isinstance(capacity, bool):
            continue  # an id a preview cannot know yet, or no such subnet among the resources
        sub, net = subnets[key]
        wanted = storage_facts.lustre_subnet_prefix(float(capacity))
        if wanted is not None and net.prefixlen > wanted:
            yield Report(
                Level.WARNING,
                sub.urn,
                f"subnet {short_subnet(sub)} ({net}): Azure documents /{wanted} or larger for a {capacity:g} TiB "
                f"Managed Lustre filesystem (got /{net.prefixlen}), and a subnet cannot move once the filesystem "
                f"is in it. Set gb300:storage.lustre.subnetPrefixLength to {wanted} or lower, or ask Azure first "
                "(getRequiredAmlFSSubnetsSize; docs/rules.md#lustre-subnet-size).",
            )


ROUTE_TABLE = "azure-native:network:RouteTable"


def _default_route(table: Resource) -> bool:
    """Whether a route table sends ``0.0.0.0/0`` somewhere (the hub's firewall, a gateway, the Internet)."""
    return any(
        text(mapping(route).get("addressPrefix")) == "0.0.0.0/0" and text(mapping(route).get("nextHopType")) != "None"
        for route in items(table.inputs.get("routes"))
    )


@resource_rule("lustre-subnet-egress")
def lustre_subnet_egress(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """The Lustre filesystem's subnet must reach Azure services: a NAT gateway, a route table with a default route
    (a landing zone's firewall), default outbound access, or a VNet the stack does not declare (whose hub routes it).
    """
    del ctx
    by_key = {
        (vnet_name.lower(), short_subnet(sub).lower()): sub
        for sub in inventory.of_type(resources, SUBNET)
        if (vnet_name := text(sub.inputs.get("virtualNetworkName"))) is not None
    }
    declared_vnets = set(_spaces(resources))
    tables = {
        (text(t.inputs.get("routeTableName")) or t.name).lower(): t for t in inventory.of_type(resources, ROUTE_TABLE)
    }
    for fs in inventory.of_type(resources, LUSTRE):
        ref = text(fs.inputs.get("filesystemSubnet"))
        key = _subnet_key(ref) if ref else None
        sub = by_key.get(key) if key else None
        if sub is None:  # unknown yet, or a subnet the stack does not declare: not ours to judge
            continue
        nat = text(mapping(sub.inputs.get("natGateway")).get("id"))
        if nat or sub.inputs.get("defaultOutboundAccess") is not False:
            continue
        table_ref = text(mapping(sub.inputs.get("routeTable")).get("id"))
        if table_ref is not None:
            table = tables.get(_last(table_ref, "routeTables") or "")
            if table is None or _default_route(table):
                continue  # a default route (the firewall), or a table the stack does not declare: not ours to judge
            yield Report(
                Level.ERROR,
                fs.urn,
                f"Lustre {short(fs)}: its subnet {short_subnet(sub)} must have outbound access to Azure services "
                f"(got route table {short(table)} without a 0.0.0.0/0 route, no NAT gateway, and default outbound "
                "access off). Azure Managed Lustre reaches Azure Storage, Key Vault and Azure Monitor from its own "
                "subnet. Set gb300:network.egress.via: firewall with egress.nextHopIp (docs/landing-zone.md).",
            )
            continue
        if key is not None and key[0] not in declared_vnets:
            continue  # a landing zone's VNet (gb300:network.egress.via: none): the hub's routes are not in the plan
        yield Report(
            Level.ERROR,
            fs.urn,
            f"Lustre {short(fs)}: its subnet {short_subnet(sub)} must have outbound access to Azure services "
            "(got no NAT gateway, and default outbound access off). Azure Managed Lustre reaches Azure Storage, "
            "Key Vault and Azure Monitor from its own subnet. Set gb300:network.natGateway: true (or, in a landing "
            "zone, gb300:network.egress.via: firewall).",
        )


NAT = "azure-native:network:NatGateway"
NIC = "azure-native:network:NetworkInterface"
IP_PREFIX = "azure-native:network:PublicIPPrefix"


def _last(resource_id: str | None, collection: str) -> str | None:
    """The name after ``/<collection>/`` in an ARM id (lowercase), or None."""
    parts = (resource_id or "").strip("/").split("/")
    lowered = [p.lower() for p in parts]
    if collection.lower() not in lowered:
        return None
    i = lowered.index(collection.lower())
    return lowered[i + 1] if i + 1 < len(lowered) else None


def _nodes_behind(resources: Sequence[Resource]) -> dict[str, int]:
    """NAT gateway name (lowercase) -> VMs in the subnets it serves (scale sets' capacity, one per NIC)."""
    gateway_of: dict[tuple[str, str], str] = {}
    for key, (sub, _) in _subnets(resources).items():
        gateway = _last(text(mapping(sub.inputs.get("natGateway")).get("id")), "natGateways")
        if gateway is not None:
            gateway_of[key] = gateway
    behind: dict[str, int] = defaultdict(int)

    def place(subnet_ids: Iterator[str] | Sequence[str], vms: int) -> None:
        gateways = {gateway_of.get(_subnet_key(s) or ("", "")) for s in subnet_ids} - {None}
        for gateway in gateways:
            assert gateway is not None  # noqa: S101 - None was removed above
            behind[gateway] += vms

    for ss in inventory.scale_sets(resources):
        place(ss.subnet_ids, ss.capacity)
    for nic in inventory.of_type(resources, NIC):
        ids = (text(mapping(mapping(c).get("subnet")).get("id")) for c in items(nic.inputs.get("ipConfigurations")))
        place([i for i in ids if i], 1)
    return behind


def _gateway_ips(nat: Resource, prefixes: dict[str, int]) -> int:
    """Public addresses of a NAT gateway: its public IPs plus every address of its prefixes (unknown prefix: 0)."""
    ips = len(items(nat.inputs.get("publicIpAddresses")))
    for ref in items(nat.inputs.get("publicIpPrefixes")):
        ips += prefixes.get(_last(text(mapping(ref).get("id")), "publicIPPrefixes") or "", 0)
    return ips


@resource_rule("nat-egress-capacity")
def nat_egress_capacity(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """Each NAT gateway has public IPs enough for its nodes' concurrent connections to one destination."""
    del ctx
    sizing = egress.nat_sizing()
    behind = _nodes_behind(resources)
    prefixes = {
        (text(p.inputs.get("publicIpPrefixName")) or p.name).lower(): 2 ** (32 - length)
        for p in inventory.of_type(resources, IP_PREFIX)
        if isinstance(length := p.inputs.get("prefixLength"), int) and 0 < length <= 32
    }
    for nat in inventory.of_type(resources, NAT):
        name = text(nat.inputs.get("natGatewayName")) or nat.name
        nodes = behind.get(name.lower(), 0)
        ips = _gateway_ips(nat, prefixes)
        if nodes == 0 or ips == 0 or nodes <= sizing.nodes_for(ips):
            continue  # nothing behind it, or addresses a preview cannot count yet, or enough
        needed = sizing.ips_for(nodes)
        demand = (
            f"NAT gateway {name}: {count(nodes, 'node')} behind it may open {nodes * sizing.flows_per_node:,} "
            f"concurrent connections to one destination at boot ({sizing.flows_per_node} per node, natFlowsPerNode "
            f"in infra/gb300/data/platform.yaml); Azure allows {sizing.connections_per_ip:,} per public IP to one "
            "destination"
        )
        if needed <= sizing.max_ips:
            yield Report(
                Level.WARNING,
                nat.urn,
                f"{demand}, so it needs {count(needed, 'public IP')} (got {ips}, enough for "
                f"{sizing.nodes_for(ips):,} nodes). Give the gateway {needed} (gb300 sizes them from the node count; "
                "this gateway was changed by hand), or the nodes' pulls time out when they boot together.",
            )
            continue
        most = sizing.nodes_for(sizing.max_ips)
        yield Report(
            Level.WARNING,
            nat.urn,
            f"{demand} and at most {sizing.max_ips} public IPs (or a /28 prefix) per gateway: {most:,} nodes at most "
            f"(got {nodes:,}, which would need {needed} IPs). When they boot together, pulls from the same registry "
            "or mirror exhaust SNAT ports and time out. Take the heaviest destinations off the NAT: the storage "
            "account is already reached by private endpoint; put the container registry behind a private endpoint "
            "and serve packages from a mirror inside the VNet. Or split the GPU nodes across subnets with one NAT "
            f"gateway each (at most {most:,} nodes per gateway), and boot racks in waves "
            "(docs/azure-resources.md#nat-egress-public-ips-sized-from-the-node-count).",
        )
