"""Security rules: no SSH from the Internet, no public IP on a GPU node, a login node's public IP only
behind restricted SSH source ranges."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gb300 import catalog, inventory
from gb300.findings import Finding, Level
from gb300.inventory import Resource
from gb300.rules.base import OPEN_SOURCES, RuleContext, items, mapping, network, short, text
from gb300.rules.network import _subnet_key

NSG = "azure-native:network:NetworkSecurityGroup"
SECURITY_RULE = "azure-native:network:SecurityRule"
NIC = "azure-native:network:NetworkInterface"
VM = "azure-native:compute:VirtualMachine"
SSH_PORT = 22


@dataclass(frozen=True)
class SshRule:
    """An inbound Allow rule that reaches port 22, with the sources it admits."""

    owner: Resource
    name: str
    sources: tuple[str, ...]

    @property
    def open(self) -> bool:
        return any(s.strip().lower() in OPEN_SOURCES for s in self.sources)


def _covers_ssh(port_range: str) -> bool:
    spec = port_range.strip()
    if spec in ("*", "Any", "any"):
        return True
    low, _, high = spec.partition("-")
    try:
        return int(low) <= SSH_PORT <= int(high or low)
    except ValueError:
        return False


def _ssh_rule(owner: Resource, rule: Mapping[str, Any]) -> SshRule | None:
    body = mapping(rule.get("properties")) or rule
    if str(body.get("direction", "")).lower() != "inbound" or str(body.get("access", "")).lower() != "allow":
        return None
    if str(body.get("protocol", "*")).lower() not in ("tcp", "*", "any"):
        return None
    ports = [p for p in [body.get("destinationPortRange"), *items(body.get("destinationPortRanges"))] if p]
    if not any(isinstance(p, str) and _covers_ssh(p) for p in ports):
        return None
    sources = [s for s in [body.get("sourceAddressPrefix"), *items(body.get("sourceAddressPrefixes"))] if s]
    name = text(rule.get("name")) or text(body.get("securityRuleName")) or "unnamed"
    return SshRule(owner, name, tuple(str(s) for s in sources))


def ssh_rules(resources: Sequence[Resource]) -> list[SshRule]:
    """Every inbound Allow rule reaching port 22, in NSGs and as standalone security rules."""
    out: list[SshRule] = []
    for nsg in inventory.of_type(resources, NSG):
        for rule in items(nsg.inputs.get("securityRules")):
            found = _ssh_rule(nsg, mapping(rule))
            if found is not None:
                out.append(found)
    for rule_resource in inventory.of_type(resources, SECURITY_RULE):
        found = _ssh_rule(rule_resource, rule_resource.inputs)
        if found is not None:
            out.append(found)
    return out


def no_ssh_from_internet(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Finding]:
    """No NSG rule allows port 22 from the Internet (Internet, 0.0.0.0/0, * or Any)."""
    del ctx
    for rule in ssh_rules(resources):
        if rule.open:
            yield Finding(
                "no-ssh-from-internet",
                Level.ERROR,
                rule.owner.urn,
                f"NSG {short(rule.owner)} rule {rule.name}: must not allow SSH (port 22) from the Internet "
                f"(got source {', '.join(rule.sources)}). Set gb300:access.sshSourceRanges to your own CIDRs, "
                "or leave it empty and connect through Bastion.",
            )


# Address ranges a VNet can use (RFC 1918 and shared address space): sources there arrive through the VNet.
_VNET_RANGES = tuple(
    ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
)


def _from_outside(source: str) -> bool:
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


def _subnet_refs(nic_configs: Any) -> list[str]:
    """The subnet ids the IP configurations of these NICs attach to."""
    refs: list[str] = []
    for nic in items(nic_configs):
        nic_props = mapping(mapping(nic).get("properties")) or mapping(nic)
        for ipc in items(nic_props.get("ipConfigurations")):
            ipc_props = mapping(mapping(ipc).get("properties")) or mapping(ipc)
            ref = text(mapping(ipc_props.get("subnet")).get("id"))
            if ref:
                refs.append(ref)
    return refs


def _guarding(resources: Sequence[Resource], nic_configs: Any) -> set[str] | None:
    """Names (lowercase) of the NSGs on the subnets these NICs attach to; None when that cannot be told.

    An NSG on another subnet (the Lustre subnet's rule from Azure Monitor, say) admits nothing to this node.
    """
    by_key: dict[tuple[str, str], Resource] = {}
    for sub in inventory.of_type(resources, inventory.SUBNET):
        vnet_name = text(sub.inputs.get("virtualNetworkName"))
        name = text(sub.inputs.get("subnetName")) or sub.name
        if vnet_name:
            by_key[(vnet_name.lower(), name.lower())] = sub
    names: set[str] = set()
    for ref in _subnet_refs(nic_configs):
        key = _subnet_key(ref)
        attached = by_key.get(key) if key else None
        nsg_id = text(mapping(attached.inputs.get("networkSecurityGroup")).get("id")) if attached else None
        if not nsg_id:
            return None
        names.add(nsg_id.rstrip("/").rsplit("/", 1)[-1].lower())
    return names or None


def _reaching(rules: list[SshRule], guarding: set[str] | None) -> list[SshRule]:
    """The SSH rules of the NSGs in ``guarding`` (all of them when unknown)."""
    if guarding is None:
        return rules
    return [r for r in rules if _nsg_name(r.owner) in guarding]


def _nsg_name(owner: Resource) -> str:
    return (text(owner.inputs.get("networkSecurityGroupName")) or owner.name).lower()


def _is_gpu(resource: Resource, size: str | None) -> bool:
    sku = catalog.load().skus.get(size or "")
    tags = mapping(resource.inputs.get("tags"))
    return bool((sku is not None and sku.is_gpu) or tags.get("gb300-pool"))


def no_public_ip_on_nodes(resources: Sequence[Resource], ctx: RuleContext) -> Iterator[Finding]:
    """GPU nodes have no public IP; a login node may have one only when SSH admits restricted source ranges."""
    del ctx
    exposed: list[tuple[Resource, bool, Any]] = []  # (resource, is a GPU node, its NIC configurations)
    for resource in resources:
        inputs = resource.inputs
        if inventory.is_scale_set(resource):
            ss = inventory.scale_set(resource)
            nics = mapping(mapping(ss.properties.get("virtualMachineProfile")).get("networkProfile")).get(
                "networkInterfaceConfigurations"
            )
            if _public_ip_configs(nics):
                exposed.append((resource, _is_gpu(resource, ss.vm_size), nics))
        elif resource.type == VM:
            size = text(mapping(inputs.get("hardwareProfile")).get("vmSize"))
            nics = mapping(inputs.get("networkProfile")).get("networkInterfaceConfigurations")
            if _public_ip_configs(nics):
                exposed.append((resource, _is_gpu(resource, size), nics))
        elif resource.type == NIC:
            nics = [{"ipConfigurations": inputs.get("ipConfigurations")}]
            if _public_ip_configs(nics):
                exposed.append((resource, bool(mapping(inputs.get("tags")).get("gb300-pool")), nics))
    if not exposed:
        return
    all_ssh = ssh_rules(resources)
    for resource, gpu, nics in exposed:
        ssh = _reaching(all_ssh, _guarding(resources, nics))
        # Sources reaching a public IP: specific public ranges or service tags. Private ranges (the Bastion
        # subnet) come through the VNet, so they do not count as sshSourceRanges for a public login node.
        restricted = [r for r in ssh if not r.open and any(_from_outside(s) for s in r.sources)]
        if gpu:
            yield Finding(
                "no-public-ip-on-nodes",
                Level.ERROR,
                resource.urn,
                f"{short(resource)}: GPU nodes must have no public IP (got a public IP configuration on its NIC). "
                "Remove publicIPAddressConfiguration; nodes reach the Internet through the NAT gateway and users "
                "reach them through Bastion or the login node.",
            )
        elif not restricted or any(r.open for r in ssh):
            yield Finding(
                "no-public-ip-on-nodes",
                Level.ERROR,
                resource.urn,
                f"{short(resource)}: a login node may have a public IP only when SSH admits restricted source ranges "
                f"(got {'SSH open to the Internet' if any(r.open for r in ssh) else 'no SSH source ranges'}). "
                "Set gb300:access.sshSourceRanges to your CIDRs, or set gb300:access.loginPublicIp to false.",
            )
