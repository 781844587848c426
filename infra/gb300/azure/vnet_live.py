"""A landing zone's VNet as Azure has it, read only when the plan goes live (``gb300 plan --quota live``).

With ``gb300:network.existingVnetId`` the plan cannot see the VNet offline. Live, it reads it with the Azure SDK
(azure-mgmt-network, ``VirtualNetworksOperations.get``: a GET that Reader may make) and checks the carved
``gb300:network.addressSpace`` against it: inside one of the VNet's address prefixes, and overlapping none of the
subnets that are not gb300's (a subnet of one of gb300's names at another prefix is the hub's, and gb300 would take
it over). A VNet that does not exist is an ERROR; a 401/403 or a timeout is a WARNING that says what was not
checked, never a traceback.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gb300.azure import answers
from gb300.azure import credential as azure_credential
from gb300.config.netplan import SubnetPlan
from gb300.config.resource_ids import ResourceId
from gb300.findings import Level, Report

VNET_KEY = "gb300:network.existingVnetId"
SPACE_KEY = "gb300:network.addressSpace"


@dataclass(frozen=True)
class VnetAnswer:
    """The VNet's address prefixes and subnets (name, prefix), or why they are not known."""

    prefixes: tuple[str, ...] = ()
    subnets: tuple[tuple[str, str], ...] = ()
    missing: bool = False
    unverified: str | None = None


def fetch(vnet: ResourceId, *, credential: Any = None, timeout_s: float = 20.0, **client_kwargs: Any) -> VnetAnswer:
    """Read the VNet; every failure is a :class:`VnetAnswer` with ``missing`` or ``unverified`` set."""
    from azure.core.exceptions import (  # noqa: PLC0415 - the Azure SDK loads only when asked to go live
        AzureError,
        ResourceNotFoundError,
    )
    from azure.mgmt.network import NetworkManagementClient  # noqa: PLC0415

    if credential is None:
        credential = azure_credential.signed_in()
    client_kwargs.setdefault("connection_timeout", timeout_s)
    client_kwargs.setdefault("read_timeout", timeout_s)
    client_kwargs.setdefault("retry_total", 1)
    client = NetworkManagementClient(credential, vnet.subscription, **client_kwargs)
    try:
        got = client.virtual_networks.get(vnet.resource_group, vnet.name)
    except ResourceNotFoundError:
        return VnetAnswer(missing=True)
    except AzureError as exc:
        reads = "the VNet (needs Microsoft.Network/virtualNetworks/read on it)"
        return VnetAnswer(unverified=answers.unanswered(exc, reads))
    space = got.address_space
    prefixes = tuple(str(p) for p in ((space.address_prefixes if space else None) or []))
    subnets = tuple(
        (str(s.name), str(s.address_prefix or (s.address_prefixes or [""])[0])) for s in (got.subnets or []) if s.name
    )
    return VnetAnswer(prefixes, subnets)


def _net(prefix: str) -> ipaddress.IPv4Network | None:
    try:
        return ipaddress.IPv4Network(prefix, strict=False)
    except ValueError:
        return None  # an IPv6 prefix or something Azure may add later: not gb300's to judge


def findings(answer: VnetAnswer, vnet_id: str, address_space: str, carved: Sequence[SubnetPlan]) -> list[Report]:
    """The carved space against the VNet Azure has: inside its prefixes, clear of the subnets that are not gb300's."""
    name = vnet_id.rsplit("/", 1)[-1]
    if answer.missing:
        return [
            Report(
                Level.ERROR,
                VNET_KEY,
                f"VNet {name} does not exist (Azure answered 404 for {vnet_id}). The hub team creates it; check the "
                "id, or unset gb300:network.existingVnetId for a VNet of gb300's own (docs/landing-zone.md).",
            )
        ]
    if answer.unverified is not None:
        return [
            Report(
                Level.WARNING,
                VNET_KEY,
                f"VNet {name} could not be read: {answer.unverified}. That gb300:network.addressSpace lies inside it "
                "and clear of its other subnets was not checked (docs/landing-zone.md#what-the-plan-checks).",
            )
        ]
    space = ipaddress.IPv4Network(address_space)
    out: list[Report] = []
    nets = [n for n in (_net(p) for p in answer.prefixes) if n is not None]
    if not any(space.subnet_of(n) for n in nets):
        out.append(
            Report(
                Level.ERROR,
                SPACE_KEY,
                f"must lie inside an address prefix of VNet {name} (got {address_space}; the VNet has "
                f"{', '.join(answer.prefixes) or 'none'}). Ask the hub team for a free range of the VNet.",
            )
        )
    ours = {plan.name.lower(): plan.prefix for plan in carved}
    for sub_name, prefix in answer.subnets:
        net = _net(prefix)
        if net is None or not net.overlaps(space):
            continue
        if ours.get(sub_name.lower()) == str(net):
            continue  # gb300's own subnet, deployed before
        whose = " and has one of gb300's subnet names" if sub_name.lower() in ours else ""
        out.append(
            Report(
                Level.ERROR,
                SPACE_KEY,
                f"must not overlap VNet {name}'s subnet {sub_name} ({prefix}), which is not gb300's{whose} (got "
                f"{address_space}). Choose a range of the VNet no subnet uses.",
            )
        )
    return out
