"""``gb300:cluster``, ``gb300:access`` and ``gb300:network``: the cluster's identity, who logs in, and the address
space gb300 carves its subnets from."""

from __future__ import annotations

import ipaddress
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field

from gb300 import tags as gb300_tags
from gb300.config.base import Checks, ConfigModel
from gb300.config.checks import (
    PathError,
    check_address_space,
    check_imds_user,
    check_location,
    check_ssh_public_key,
    check_username,
)
from gb300.config.fields import AzureName, Cidr, Name, TagKey, TagValue, UserName, Zone
from gb300.config.login import EntraSettings
from gb300.config.resource_ids import DNS_ZONE, VNET, ResourceId, check, parse, zone_names
from gb300.config.text import text_limit
from gb300.facts import catalog


class ClusterSettings(ConfigModel):
    """``gb300:cluster``: identity, region and tags of the cluster."""

    name: Name
    """1-12 lowercase letters, digits, single hyphens; starts with a letter. Prefixes every Azure name."""
    location: Annotated[AzureName, AfterValidator(check_location)]
    """Azure region, e.g. `eastus2`; names outside `data/platform.yaml` `azureRegions` are refused with a "did you
    mean". GB300 availability is a question for Azure's Resource SKUs API.
    """
    zone: Zone | None = None
    """Availability zone of NAT, Lustre and the GPU pools' scale sets (their ARM `zones`)."""
    tags: dict[TagKey, TagValue] = Field(default_factory=dict)
    """Tags on every taggable resource, plus gb300's own two: the cluster's name and gb300 as its manager (the keys
    are in `infra/gb300/tags.py`). Azure's limits are checked: at most 36 (50 per resource less 14 for gb300's
    own), names up to 128 characters without the prefixes `azure`, `microsoft`, `windows`, values up to 256. The keys
    gb300 writes itself (every key in `infra/gb300/tags.py`, such as the role and the manager, and any other key
    with the `gb300-` prefix) are refused, compared without case as Azure does: a stack's tag must not say what
    gb300's own tags say.
    """

    def check_not_gb300_keys(self) -> None:
        """No user tag is a key gb300 writes itself (compared without case, as Azure does)."""
        own = {k.lower() for k in gb300_tags.ALL}
        for key in self.tags:
            if key.lower() in own or key.lower().startswith(gb300_tags.PREFIX):
                raise PathError(
                    ("cluster", "tags", key),
                    f"is a tag key gb300 writes itself (got {key!r}; gb300's keys are in infra/gb300/tags.py, and "
                    f"every key starting {gb300_tags.PREFIX!r} is gb300's): the components, rules and nodes read it. "
                    "Choose another key",
                )

    def check_tag_count(self) -> None:
        """The user's tags leave room for gb300's own within Azure's limit per resource."""
        limits = catalog.load()
        most = int(limits.limit("maxTagsPerResource")) - int(limits.limit("gb300TagReserve"))
        if len(self.tags) > most:
            raise PathError(
                ("cluster", "tags"),
                f"must hold at most {most} tags (got {len(self.tags)}): Azure allows "
                f"{limits.limit('maxTagsPerResource')} per resource and gb300 adds up to "
                f"{limits.limit('gb300TagReserve')} of its own",
            )

    CHECKS: ClassVar[Checks] = (check_not_gb300_keys, check_tag_count)


class AccessSettings(ConfigModel):
    """``gb300:access``: who may log in, and from where."""

    admin_username: Annotated[UserName, AfterValidator(check_username)] = "azureuser"
    """Linux admin user; Azure's reserved names (root, admin, ...) are refused."""
    ssh_public_key: Annotated[str, Field(max_length=text_limit("sshPublicKey")), AfterValidator(check_ssh_public_key)]
    """One OpenSSH public key on one line, `ssh-ed25519` or `ssh-rsa` (2048 bits or more, counted from the modulus); a
    second line, control characters or `authorized_keys` options are refused. Password login is always off.
    """
    ssh_source_ranges: list[Cidr] = Field(default_factory=list)
    """CIDRs that may reach SSH on the login node; empty = only from inside the VNet / Bastion."""
    login_public_ip: bool = False
    """Give the login node a public IP (only allowed together with `sshSourceRanges`)."""
    imds_allowed_users: Annotated[list[Annotated[UserName, AfterValidator(check_imds_user)]], Field(max_length=16)] = (
        Field(default_factory=list)
    )
    """Service users besides root and the monitoring agents' own users that may reach the instance metadata service,
    hence the node identity's token, on every node: Linux user names, at most 16; root is always allowed
    (docs/security.md, "Node secrets").
    """
    entra: EntraSettings | None = None
    """Sign-in with Microsoft Entra ID on the login nodes (gb300:login): the groups whose members sign in as themselves
    or with sudo. The admin key stays the break-glass path to the head (docs/access.md)."""


EgressVia = Literal["nat-gateway", "firewall", "none"]


def _check_next_hop(value: str) -> str:
    try:
        address = ipaddress.IPv4Address(value)
    except ValueError:
        raise ValueError(
            f"must be an IPv4 address such as '10.0.0.4', the firewall's private address (got {value!r})"
        ) from None
    if not address.is_private:
        raise ValueError(f"must be a private address, the firewall's in the hub (got {value!r})")
    return value


class EgressSettings(ConfigModel):
    """``gb300:network.egress``: how the GPU, head and storage subnets reach the Internet and Azure services."""

    via: EgressVia = "nat-gateway"
    """`nat-gateway`: a NAT gateway of gb300's own; `firewall`: a route table sends `0.0.0.0/0` to the hub's firewall
    at `nextHopIp` (no NAT gateway); `none`: gb300 adds neither, the hub already routes the subnets (a landing zone's
    propagated routes). The firewall must allow the destinations in docs/landing-zone.md#egress-through-the-firewall.
    """
    next_hop_ip: Annotated[str, Field(max_length=15), AfterValidator(_check_next_hop)] | None = None
    """The firewall's private IPv4 address, the next hop of `0.0.0.0/0`; required with `via: firewall`, refused
    otherwise."""

    def check_next_hop_with_firewall(self) -> None:
        """Egress through a firewall names the firewall's private address."""
        if self.via == "firewall" and self.next_hop_ip is None:
            raise PathError(
                ("network", "egress", "nextHopIp"),
                "is required with egress.via: firewall: the firewall's private address, such as '10.0.0.4'",
            )
        if self.via != "firewall" and self.next_hop_ip is not None:
            raise PathError(
                ("network", "egress", "nextHopIp"),
                f"is only used with egress.via: firewall (got via: {self.via}); remove it",
            )

    CHECKS: ClassVar[Checks] = (check_next_hop_with_firewall,)


def _zone_id(group: str) -> AfterValidator:
    return AfterValidator(check(DNS_ZONE, zone_names()[group]))


ZoneId = Annotated[str, Field(max_length=text_limit("resourceId"))]


class PrivateDnsZoneSettings(ConfigModel):
    """``gb300:network.privateDnsZones``: the hub's `privatelink.*` zones. For each one given, gb300's private
    endpoints join it through their zone groups, and gb300 declares no zone and no VNet link of that name (the hub
    links its zones to the VNet, docs/landing-zone.md#what-the-hub-team-provides)."""

    blob: Annotated[ZoneId, _zone_id("blob")] | None = None
    """Id of the hub's `privatelink.blob.core.windows.net` zone (the data and payload accounts' blob endpoints)."""
    dfs: Annotated[ZoneId, _zone_id("dfs")] | None = None
    """Id of the hub's `privatelink.dfs.core.windows.net` zone (the data account's dfs endpoint, with
    `gb300:storage.blob.hierarchicalNamespace` only)."""
    vault: Annotated[ZoneId, _zone_id("vault")] | None = None
    """Id of the hub's `privatelink.vaultcore.azure.net` zone (the Key Vault's endpoint)."""

    def ids(self) -> dict[str, str]:
        """Sub-resource (``blob``, ``dfs``, ``vault``) -> the hub zone's id, for the zones given."""
        given = {"blob": self.blob, "dfs": self.dfs, "vault": self.vault}
        return {group: zone for group, zone in given.items() if zone is not None}


class NetworkSettings(ConfigModel):
    """``gb300:network``: the address space the toolkit carves its subnets from, in a VNet of its own or in an
    existing one (docs/landing-zone.md)."""

    existing_vnet_id: Annotated[str, Field(max_length=text_limit("resourceId")), AfterValidator(check(VNET))] | None = (
        None
    )
    """Id of an existing VNet (a landing zone's spoke, in the deployment's subscription and region) to carve the
    subnets in: gb300 then declares no VNet and touches none of its other subnets. Unset: gb300 declares its own VNet.
    Switching a deployed stack between the two moves every subnet, which `gb300 plan --state` refuses.
    """

    address_space: Annotated[Cidr, AfterValidator(check_address_space)] = "10.40.0.0/16"
    """A CIDR: the VNet's space; gb300 carves `gpu`, `head`, `storage`, `endpoints` and `AzureBastionSubnet` from it.
    With `existingVnetId`, the part of that VNet's space gb300 carves from (free of its other subnets). Must be private
    (RFC 1918 or RFC 6598 `100.64.0.0/10`) and must not overlap 172.16.0.0/16 (Azure's RDMA network).
    """
    bastion: bool = True
    """Azure Bastion (Standard, tunnelling on) for SSH without public IPs; `false` in a landing zone whose hub Bastion
    serves the head (the `loginCommand` output says so)."""
    egress: EgressSettings = Field(default_factory=EgressSettings)
    """How the GPU, head and storage subnets get out: a NAT gateway (the default), the hub's firewall, or routes the
    hub already has (docs/landing-zone.md#egress-through-the-firewall)."""
    private_dns_zones: PrivateDnsZoneSettings = Field(default_factory=PrivateDnsZoneSettings)
    """The hub's `privatelink.*` zones; with `existingVnetId`, one is required for each endpoint gb300 creates
    (`blob` and `vault`, and `dfs` with a hierarchical namespace)."""
    nat_gateway: bool = True
    """NAT gateway for egress of the GPU, head and Lustre (`storage`) subnets; default outbound access is off, and Azure
    Managed Lustre needs to reach Azure services (docs/azure-resources.md#lustre-subnet-egress-and-nsg-rules).
    Its public IPs are sized from the node count, up to 16
    (docs/azure-resources.md#nat-egress-public-ips-sized-from-the-node-count). `false` is `egress.via: none`; with
    `egress` set, leave it out.
    """
    gpu_subnet_prefix_length: Annotated[int, Field(ge=8, le=29, strict=True)] | None = None
    """Size of the GPU subnet, the last block of the space (e.g. `20` = 4,091 VMs); unset = the upper half of the space.
    It never depends on the racks, so adding racks moves no subnet (docs/day2.md); changing it moves the subnet,
    which `gb300 plan --state` refuses.
    """

    def check_one_egress_key(self) -> None:
        """``egress`` and the older ``natGateway`` are not both set."""
        if "egress" in self.model_fields_set and "nat_gateway" in self.model_fields_set:
            raise PathError(
                ("network", "natGateway"),
                f"must not be set together with egress (got natGateway: {str(self.nat_gateway).lower()} and "
                f"egress.via: {self.egress.via}); remove natGateway, egress.via says it",
            )

    CHECKS: ClassVar[Checks] = (check_one_egress_key,)

    @property
    def egress_via(self) -> EgressVia:
        """How the subnets get out: ``egress.via``, or ``none`` when the older ``natGateway: false`` says so."""
        if "egress" not in self.model_fields_set and not self.nat_gateway:
            return "none"
        return self.egress.via

    @property
    def existing_vnet(self) -> ResourceId | None:
        """The parsed ``existingVnetId``, or None."""
        return parse(self.existing_vnet_id) if self.existing_vnet_id is not None else None
