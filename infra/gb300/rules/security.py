"""Security rules: no SSH from the Internet, no public IP on a GPU node, a login node's public IP only
behind restricted SSH source ranges.

SSH exposure is reasoned about as address sets, not as literals: per network security group, the sources of
every inbound Allow rule reaching port 22 are united (:func:`ipaddress.collapse_addresses`), the private
ranges a VNet can use are taken out, and what is left is compared with one block of
``gb300:policy.sshSourceLimitPrefix`` (default from ``data/skus.yaml`` ``limits``). ``0.0.0.0/1`` plus
``128.0.0.0/1`` is the whole Internet however it is spelled, and a bare ``0.0.0.0`` is "any" as Azure reads it.
Service tags other than ``VirtualNetwork`` and ``AzureLoadBalancer`` (``Internet``, ``AzureCloud``,
``AzureMonitor`` ...) count as wider than any limit; the one exception is a rule exactly as Azure documents it
for a managed service's subnet (``data/storage.yaml`` ``lustreNetwork.rules``), which names every port, not SSH.
:func:`united` is the address-set union the storage rule counts IP rules with too.
"""

from __future__ import annotations

import functools
import ipaddress
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gb300 import tags as gb300_tags
from gb300.azure import inventory
from gb300.azure.inventory import items, mapping
from gb300.facts import catalog, storage_facts
from gb300.findings import Level, Report
from gb300.resources import Resource
from gb300.rules.base import OPEN_SOURCES, RuleContext, network, resource_rule, short, text

NSG = "azure-native:network:NetworkSecurityGroup"
SECURITY_RULE = "azure-native:network:SecurityRule"
NIC = "azure-native:network:NetworkInterface"
VM = "azure-native:compute:VirtualMachine"
SSH_PORT = 22


# Service tags that stand for addresses inside Azure's own network path to the VM, not for the Internet.
_INTERNAL_TAGS = frozenset({"virtualnetwork", "azureloadbalancer"})
# How much wider an IPv6 limit is than the IPv4 one: a /16 in IPv4 is compared with a /48 in IPv6 (a site).
_IPV6_EXTRA_BITS = 32


@dataclass(frozen=True)
class SshRule:
    """An inbound Allow rule that reaches port 22, with the sources it admits."""

    owner: Resource
    name: str
    sources: tuple[str, ...]
    nsg: str = ""
    platform: bool = False  # exactly a rule Azure documents for a managed service's subnet (not aimed at SSH)

    @property
    def open(self) -> bool:
        """Whether a source is spelled as "anyone" (``Internet``, ``*``, ``0.0.0.0/0``...)."""
        return any(s.strip().lower() in OPEN_SOURCES for s in self.sources)

    @property
    def public_sources(self) -> tuple[str, ...]:
        """The sources that admit addresses from outside the VNet (public ranges, Internet-wide tags)."""
        if self.platform:
            return ()
        return tuple(s for s in self.sources if _from_outside(s))


def _no_public_sources(ssh: Sequence[SshRule]) -> str:
    """What the SSH rules admit when none admits a public source: private ranges only (named), or nothing."""
    private = sorted({src for rule in ssh for src in rule.sources if src.strip()})
    if not private:
        return "no SSH source ranges"
    return (
        f"no public SSH source ranges: SSH is admitted only from {', '.join(private[:3])}"
        f"{', ...' if len(private) > 3 else ''}, inside the VNet, which never reaches the public IP"
    )


@dataclass(frozen=True)
class AddressSet:
    """The union of some sources, private VNet ranges taken out: public addresses counted, tags listed apart."""

    v4_addresses: int
    v6_addresses: int
    unbounded: tuple[str, ...]  # sources that are not address ranges: service tags such as Internet

    @property
    def empty(self) -> bool:
        return not (self.v4_addresses or self.v6_addresses or self.unbounded)

    def wider_than(self, prefix: int) -> bool:
        """True when the union is more than one IPv4 /prefix (IPv6: /prefix+32), or has an unbounded source."""
        v6_prefix = min(128, prefix + _IPV6_EXTRA_BITS)
        return (
            bool(self.unbounded) or self.v4_addresses > 2 ** (32 - prefix) or self.v6_addresses > 2 ** (128 - v6_prefix)
        )

    def describe(self) -> str:
        parts = []
        if self.unbounded:
            parts.append(f"{', '.join(sorted(set(self.unbounded)))} (the Internet or a public service tag)")
        if self.v4_addresses:
            every = " (every IPv4 address)" if self.v4_addresses >= _PUBLIC_V4 else ""
            parts.append(f"{self.v4_addresses:,} public IPv4 addresses{every}")
        if self.v6_addresses:
            parts.append(f"{self.v6_addresses:,} public IPv6 addresses")
        return " and ".join(parts) or "no public addresses"


def united(sources: Iterable[str]) -> AddressSet:
    """The union of ``sources`` (CIDRs, bare addresses, service tags) from outside the VNet, as an address set.

    A bare ``0.0.0.0`` is "any" (Azure reads it so); a source that is not an address range (``Internet``, ``*``,
    a service tag other than the VNet's own) is unbounded. Shared by the SSH rules and ``storage-no-public-access``.
    """
    v4: list[ipaddress.IPv4Network] = []
    v6: list[ipaddress.IPv6Network] = []
    unbounded: list[str] = []
    for source in sources:
        if not _from_outside(source):
            continue
        net = _any_network(source)
        if net is None:
            unbounded.append(source)
        elif isinstance(net, ipaddress.IPv4Network):
            v4.append(net)
        else:
            v6.append(net)
    return AddressSet(_public_v4(v4), _public_v6(v6), tuple(unbounded))


@dataclass(frozen=True)
class Exposure:
    """What one NSG's SSH rules admit from outside the VNet, united."""

    nsg: str
    rules: tuple[SshRule, ...]
    addresses: AddressSet

    def wider_than(self, prefix: int) -> bool:
        return self.addresses.wider_than(prefix)

    def describe(self) -> str:
        return self.addresses.describe()


def _public_v4(nets: list[ipaddress.IPv4Network]) -> int:
    """IPv4 addresses in the union of ``nets`` outside the VNet ranges."""
    total = 0
    for net in ipaddress.collapse_addresses(nets):
        pieces = [net]
        for private in _VNET_RANGES:
            rest: list[ipaddress.IPv4Network] = []
            for piece in pieces:
                if not piece.overlaps(private):
                    rest.append(piece)
                elif not piece.subnet_of(private):
                    rest.extend(piece.address_exclude(private))
            pieces = rest
        total += sum(p.num_addresses for p in pieces)
    return total


def _public_v6(nets: list[ipaddress.IPv6Network]) -> int:
    """IPv6 addresses in the union of ``nets`` (the VNet ranges are IPv4)."""
    return sum(n.num_addresses for n in ipaddress.collapse_addresses(nets))


def exposures(rules: Sequence[SshRule]) -> list[Exposure]:
    """Per NSG, the union of what its SSH rules admit from outside the VNet."""
    by_nsg: dict[str, list[SshRule]] = defaultdict(list)
    for rule in rules:
        by_nsg[rule.nsg or rule.owner.urn].append(rule)
    return [
        Exposure(name, tuple(group), united(s for rule in group for s in rule.public_sources))
        for name, group in by_nsg.items()
    ]


def _any_network(source: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """A source as a network; None for a service tag (``Internet``, ``*``, ``AzureCloud``...)."""
    spec = source.strip()
    if spec == "0.0.0.0":  # noqa: S104 - Azure reads a bare 0.0.0.0 as "any"
        return ipaddress.IPv4Network("0.0.0.0/0")
    try:
        return ipaddress.ip_network(spec, strict=False)
    except ValueError:
        return None


def source_limit(ctx: RuleContext) -> int:
    """The prefix length whose one block bounds the public SSH sources of one NSG."""
    return ctx.policy.ssh_source_limit_prefix


def _covers_ssh(port_range: object) -> bool:
    """Whether a port spec reaches 22: ``"*"``, ``"22"``, ``"20-25"``, or the number 22 (ARM takes either)."""
    if isinstance(port_range, int) and not isinstance(port_range, bool):
        return port_range == SSH_PORT
    if not isinstance(port_range, str):
        return False
    spec = port_range.strip()
    if spec in ("*", "Any", "any"):
        return True
    low, _, high = spec.partition("-")
    try:
        return int(low) <= SSH_PORT <= int(high or low)
    except ValueError:
        return False


def _ssh_rule(owner: Resource, rule: Mapping[str, Any], nsg: str = "") -> SshRule | None:
    body = mapping(rule.get("properties")) or rule
    if str(body.get("direction", "")).lower() != "inbound" or str(body.get("access", "")).lower() != "allow":
        return None
    if str(body.get("protocol", "*")).lower() not in ("tcp", "*", "any"):
        return None
    ports = [p for p in [body.get("destinationPortRange"), *items(body.get("destinationPortRanges"))] if p]
    if not any(_covers_ssh(p) for p in ports):
        return None
    sources = [s for s in [body.get("sourceAddressPrefix"), *items(body.get("sourceAddressPrefixes"))] if s]
    name = text(rule.get("name")) or text(body.get("securityRuleName")) or "unnamed"
    return SshRule(owner, name, tuple(str(s) for s in sources), nsg or short(owner), _documented_platform_rule(body))


def _documented_platform_rule(body: Mapping[str, Any]) -> bool:
    """Whether an inbound rule is exactly one Azure documents for a managed service's subnet (``data/storage.yaml``
    ``lustreNetwork.rules``: AzureMonitor to VirtualNetwork on every TCP port, for Managed Lustre's health checks).

    Only that exact shape is exempt: the same tag on port 22, in a port list or range, or beside other sources is
    SSH from a public service tag like any other.
    """
    ports = [body.get("destinationPortRange"), *items(body.get("destinationPortRanges"))]
    sources = [body.get("sourceAddressPrefix"), *items(body.get("sourceAddressPrefixes"))]
    shape = (
        str(body.get("protocol", "")).lower(),
        tuple(str(s).lower() for s in sources if s),
        str(body.get("destinationAddressPrefix", "")).lower(),
        tuple(str(p) for p in ports if p),
    )
    return shape in _platform_rule_shapes()


@functools.cache
def _platform_rule_shapes() -> frozenset[tuple[str, tuple[str, ...], str, tuple[str, ...]]]:
    rules = storage_facts.lustre_network_rules()
    return frozenset(
        (str(r["protocol"]).lower(), (str(r["source"]).lower(),), str(r["destination"]).lower(), (str(r["ports"]),))
        for r in rules
        if str(r["direction"]).lower() == "inbound" and str(r["source"]).lower() not in _INTERNAL_TAGS
    )


def ssh_rules(resources: Sequence[Resource]) -> list[SshRule]:
    """Every inbound Allow rule reaching port 22, in NSGs and as standalone security rules."""
    out: list[SshRule] = []
    for nsg in inventory.of_type(resources, NSG):
        for rule in items(nsg.inputs.get("securityRules")):
            found = _ssh_rule(nsg, mapping(rule), short(nsg))
            if found is not None:
                out.append(found)
    for rule_resource in inventory.of_type(resources, SECURITY_RULE):
        found = _ssh_rule(
            rule_resource, rule_resource.inputs, text(rule_resource.inputs.get("networkSecurityGroupName")) or ""
        )
        if found is not None:
            out.append(found)
    return out


@resource_rule("no-ssh-from-internet", security=True)
def no_ssh_from_internet(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """No NSG admits SSH (port 22) from more public addresses, united, than one block of sshSourceLimitPrefix."""
    limit = source_limit(ctx)
    for exposure in exposures(ssh_rules(resources)):
        if not exposure.wider_than(limit):
            continue
        for rule in exposure.rules:
            if not rule.public_sources:
                continue
            yield Report(
                Level.ERROR,
                rule.owner.urn,
                f"NSG {exposure.nsg} rule {rule.name}: must not allow SSH (port 22) from the Internet: with the "
                f"NSG's other SSH rules it admits {exposure.describe()}, more than one /{limit} "
                f"(got source {', '.join(rule.sources)}). Set gb300:access.sshSourceRanges to your own CIDRs, "
                "or leave it empty and connect through Bastion; gb300:policy.sshSourceLimitPrefix sets the limit.",
            )


# Address ranges a VNet can use (RFC 1918 and shared address space): sources there arrive through the VNet.
_VNET_RANGES = tuple(
    ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
)
# Every public IPv4 address: what a union covering all of IPv4 counts once the VNet ranges are taken out.
_PUBLIC_V4 = 2**32 - sum(n.num_addresses for n in _VNET_RANGES)


def _from_outside(source: str) -> bool:
    """Whether a source admits any address from outside the VNet ranges (a tag other than the VNet's counts)."""
    if source.strip().lower() in _INTERNAL_TAGS:
        return False
    net = network(source)
    return net is None or not any(net.subnet_of(r) for r in _VNET_RANGES)


def _public_ip_configs(nic_configs: Any) -> bool:
    for nic in items(nic_configs):
        nic_props = mapping(mapping(nic).get("properties")) or mapping(nic)
        for ipc in items(nic_props.get("ipConfigurations")):
            ipc_props = mapping(mapping(ipc).get("properties")) or mapping(ipc)
            if ipc_props.get("publicIPAddressConfiguration") or ipc_props.get("publicIPAddress"):
                return True
    return False


def _is_gpu(resource: Resource, size: str | None) -> bool:
    sku = catalog.load().skus.get(size or "")
    tags = mapping(resource.inputs.get("tags"))
    return bool((sku is not None and sku.is_gpu) or gb300_tags.pool_of(tags))


@resource_rule("no-public-ip-on-nodes", security=True)
def no_public_ip_on_nodes(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Report]:
    """GPU nodes have no public IP; a login node may have one only when SSH admits restricted source ranges."""
    exposed: list[tuple[Resource, bool]] = []  # (resource, is a GPU node)
    for resource in resources:
        inputs = resource.inputs
        if inventory.is_scale_set(resource):
            ss = inventory.scale_set(resource)
            nics = mapping(mapping(ss.properties.get("virtualMachineProfile")).get("networkProfile")).get(
                "networkInterfaceConfigurations"
            )
            if _public_ip_configs(nics):
                exposed.append((resource, _is_gpu(resource, ss.vm_size)))
        elif resource.type == VM:
            size = text(mapping(inputs.get("hardwareProfile")).get("vmSize"))
            nics = mapping(inputs.get("networkProfile")).get("networkInterfaceConfigurations")
            if _public_ip_configs(nics):
                exposed.append((resource, _is_gpu(resource, size)))
        elif resource.type == NIC and _public_ip_configs([{"ipConfigurations": inputs.get("ipConfigurations")}]):
            exposed.append((resource, bool(gb300_tags.pool_of(inputs.get("tags")))))
    if not exposed:
        return
    ssh = ssh_rules(resources)
    # Sources reaching a public IP: public ranges or service tags. Private ranges (the Bastion subnet) come
    # through the VNet, so they do not count as sshSourceRanges for a public login node. "Restricted" means
    # some SSH rule admits public sources and no NSG's union of them is wider than the limit.
    wide = any(e.wider_than(source_limit(ctx)) for e in exposures(ssh))
    restricted = not wide and any(r.public_sources for r in ssh)
    for resource, gpu in exposed:
        if gpu:
            yield Report(
                Level.ERROR,
                resource.urn,
                f"{short(resource)}: GPU nodes must have no public IP (got a public IP configuration on its NIC). "
                "Remove publicIPAddressConfiguration; nodes reach the Internet through the NAT gateway and users "
                "reach them through Bastion or the login node.",
            )
        elif not restricted:
            yield Report(
                Level.ERROR,
                resource.urn,
                f"{short(resource)}: a login node may have a public IP only when SSH admits restricted source ranges "
                f"(got {'SSH open to the Internet' if wide else _no_public_sources(ssh)}). "
                "Set gb300:access.sshSourceRanges to your CIDRs, or set gb300:access.loginPublicIp to false.",
            )
