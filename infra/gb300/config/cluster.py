"""``gb300:cluster``, ``gb300:access`` and ``gb300:network``: the cluster's identity, who logs in, and the address
space gb300 carves its subnets from."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from gb300 import tags as gb300_tags
from gb300.config.base import ConfigModel
from gb300.config.checks import (
    _check_address_space,
    _check_imds_user,
    _check_location,
    _check_ssh_public_key,
    _check_username,
    _PathError,
)
from gb300.config.fields import AzureName, Cidr, Name, TagKey, TagValue, UserName, Zone
from gb300.config.text import text_limit
from gb300.facts import catalog


class ClusterSettings(ConfigModel):
    """``gb300:cluster``: identity, region and tags of the cluster."""

    name: Name
    """1-12 lowercase letters, digits, single hyphens; starts with a letter. Prefixes every Azure name."""
    location: Annotated[AzureName, AfterValidator(_check_location)]
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

    @model_validator(mode="after")
    def _not_gb300_keys(self) -> ClusterSettings:
        own = {k.lower() for k in gb300_tags.ALL}
        for key in self.tags:
            if key.lower() in own or key.lower().startswith(gb300_tags.PREFIX):
                raise _PathError(
                    ("cluster", "tags", key),
                    f"is a tag key gb300 writes itself (got {key!r}; gb300's keys are in infra/gb300/tags.py, and "
                    f"every key starting {gb300_tags.PREFIX!r} is gb300's): the components, rules and nodes read it. "
                    "Choose another key",
                )
        return self

    @model_validator(mode="after")
    def _tag_count(self) -> ClusterSettings:
        limits = catalog.load()
        most = int(limits.limit("maxTagsPerResource")) - int(limits.limit("gb300TagReserve"))
        if len(self.tags) > most:
            raise _PathError(
                ("cluster", "tags"),
                f"must hold at most {most} tags (got {len(self.tags)}): Azure allows "
                f"{limits.limit('maxTagsPerResource')} per resource and gb300 adds up to "
                f"{limits.limit('gb300TagReserve')} of its own",
            )
        return self


class AccessSettings(ConfigModel):
    """``gb300:access``: who may log in, and from where."""

    admin_username: Annotated[UserName, AfterValidator(_check_username)] = "azureuser"
    """Linux admin user; Azure's reserved names (root, admin, ...) are refused."""
    ssh_public_key: Annotated[str, Field(max_length=text_limit("sshPublicKey")), AfterValidator(_check_ssh_public_key)]
    """One OpenSSH public key on one line, `ssh-ed25519` or `ssh-rsa` (2048 bits or more, counted from the modulus); a
    second line, control characters or `authorized_keys` options are refused. Password login is always off.
    """
    ssh_source_ranges: list[Cidr] = Field(default_factory=list)
    """CIDRs that may reach SSH on the login node; empty = only from inside the VNet / Bastion."""
    login_public_ip: bool = False
    """Give the login node a public IP (only allowed together with `sshSourceRanges`)."""
    imds_allowed_users: Annotated[list[Annotated[UserName, AfterValidator(_check_imds_user)]], Field(max_length=16)] = (
        Field(default_factory=list)
    )
    """Service users besides root and the monitoring agents' own users that may reach the instance metadata service,
    hence the node identity's token, on every node: Linux user names, at most 16; root is always allowed
    (docs/security.md, "Node secrets").
    """


class NetworkSettings(ConfigModel):
    """``gb300:network``: the address space the toolkit carves its subnets from."""

    address_space: Annotated[Cidr, AfterValidator(_check_address_space)] = "10.40.0.0/16"
    """A CIDR: the VNet's space; gb300 carves `gpu`, `head`, `storage`, `endpoints` and `AzureBastionSubnet` from it.
    Must be private (RFC 1918 or RFC 6598 `100.64.0.0/10`) and must not overlap 172.16.0.0/16 (Azure's RDMA network).
    """
    bastion: bool = True
    """Azure Bastion (Standard, tunnelling on) for SSH without public IPs."""
    nat_gateway: bool = True
    """NAT gateway for egress of the GPU, head and Lustre (`storage`) subnets; default outbound access is off, and Azure
    Managed Lustre needs to reach Azure services (docs/azure-resources.md#lustre-subnet-egress-and-nsg-rules).
    Its public IPs are sized from the node count, up to 16
    (docs/azure-resources.md#nat-egress-public-ips-sized-from-the-node-count).
    """
    gpu_subnet_prefix_length: Annotated[int, Field(ge=8, le=29, strict=True)] | None = None
    """Size of the GPU subnet, the last block of the space (e.g. `20` = 4,091 VMs); unset = the upper half of the space.
    It never depends on the racks, so adding racks moves no subnet (docs/day2.md); changing it moves the subnet,
    which `gb300 plan --state` refuses.
    """
