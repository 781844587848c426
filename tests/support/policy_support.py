"""Builders for rule tests: resources shaped as the program registers them (camelCase inputs)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Sequence
from typing import Any

from google.protobuf import struct_pb2

from gb300 import rules
from gb300.azure.quota import QuotaSnapshot
from gb300.components import compute_package
from gb300.config import PolicySettings
from gb300.findings import Finding
from gb300.resources import ResourceRecord

SUB = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/t-rg/providers"
GB300 = "Standard_ND128isr_GB300_v6"
H100 = "Standard_ND96isr_H100_v5"
GB_IMAGE = {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2404-gb", "version": "latest"}
TAGS = {"owner": "ml", "gb300-cluster": "t", "managed-by": "gb300"}


def record(typ: str, name: str, inputs: dict[str, Any]) -> ResourceRecord:
    """A resource as the plan records it."""
    urn = f"urn:pulumi:t::gb300::{typ}::{name}"
    return ResourceRecord(urn, typ, name, None, False, f"{SUB}/x/{name}", inputs)


def subnet_id(name: str = "gpu", vnet: str = "t-vnet") -> str:
    return f"{SUB}/Microsoft.Network/virtualNetworks/{vnet}/subnets/{name}"


def scale_set(
    name: str = "t-train-r0001",
    *,
    size: str = GB300,
    capacity: int = 18,
    pool: str = "train",
    zone: str | None = "1",
    group: str | None = "ig-train",
    subnet: str | None = None,
    image: dict[str, Any] | None = None,
    custom_data: str = "I2Nsb3VkLWNvbmZpZwo=",
    public_ip: bool = False,
    single_placement_group: bool = False,
    reservation: str | None = None,
    location: str = "eastus2",
) -> ResourceRecord:
    """A GPU scale set as gb300's rack registers it (azure-native's compute 2026-03-01 package, inputs flattened)."""
    ipconfig: dict[str, Any] = {"name": "ip", "primary": True, "subnet": {"id": subnet or subnet_id()}}
    if public_ip:
        ipconfig["publicIPAddressConfiguration"] = {"name": "pip"}
    network_profile: dict[str, Any] = {
        "networkInterfaceConfigurations": [{"name": "eth0", "primary": True, "ipConfigurations": [ipconfig]}]
    }
    if group:
        group_id = group if group.startswith("(") else f"{SUB}/Microsoft.Network/interconnectGroups/{group}"
        network_profile["interconnectGroupProfile"] = {"interconnectGroup": {"id": group_id}}
    profile: dict[str, Any] = {
        "osProfile": {"computerNamePrefix": name, "adminUsername": "azureuser", "customData": custom_data},
        "storageProfile": {"imageReference": image or GB_IMAGE},
        "networkProfile": network_profile,
    }
    if reservation:
        profile["capacityReservation"] = {"capacityReservationGroup": {"id": reservation}}
    tags = {**TAGS, "gb300-pool": pool}
    return record(
        compute_package.SCALE_SET_TOKEN,
        name,
        {
            "resourceGroupName": "t-rg",
            "vmScaleSetName": name,
            "location": location,
            **({"zones": [zone]} if zone else {}),
            "sku": {"name": size, "tier": "Standard", "capacity": capacity},
            "tags": tags,
            "singlePlacementGroup": single_placement_group,
            "virtualMachineProfile": profile,
        },
    )


def vnet(prefixes: Sequence[str] = ("10.40.0.0/16",), name: str = "t-vnet") -> ResourceRecord:
    return record(
        "azure-native:network:VirtualNetwork",
        name,
        {
            "virtualNetworkName": name,
            "location": "eastus2",
            "tags": TAGS,
            "addressSpace": {"addressPrefixes": list(prefixes)},
        },
    )


def subnet(name: str, prefix: str, vnet_name: str = "t-vnet") -> ResourceRecord:
    return record(
        "azure-native:network:Subnet",
        f"t-{name}",
        {"subnetName": name, "virtualNetworkName": vnet_name, "addressPrefix": prefix},
    )


def nsg(*rules_: dict[str, Any], name: str = "t-head-nsg") -> ResourceRecord:
    return record(
        "azure-native:network:NetworkSecurityGroup",
        name,
        {"networkSecurityGroupName": name, "location": "eastus2", "tags": TAGS, "securityRules": list(rules_)},
    )


def ssh_rule(source: str = "203.0.113.0/24", **extra: Any) -> dict[str, Any]:
    return {
        "name": "allow-ssh-0",
        "priority": 100,
        "direction": "Inbound",
        "access": "Allow",
        "protocol": "Tcp",
        "sourceAddressPrefix": source,
        "sourcePortRange": "*",
        "destinationAddressPrefix": "*",
        "destinationPortRange": "22",
        **extra,
    }


def lustre(
    sku: str | None = "AMLFS-Durable-Premium-500", capacity: Any = 128, zones: Any = ("1",), **extra: Any
) -> ResourceRecord:
    inputs: dict[str, Any] = {"amlFilesystemName": "t-lustre", "location": "eastus2", "tags": TAGS, **extra}
    if sku is not None:
        inputs["sku"] = {"name": sku}
    if capacity is not None:
        inputs["storageCapacityTiB"] = capacity
    if zones is not None:
        inputs["zones"] = list(zones)
    return record("azure-native:storagecache:AmlFilesystem", "t-lustre", inputs)


SECURE_ACCOUNT = {
    "allowBlobPublicAccess": False,
    "allowSharedKeyAccess": False,
    "minimumTlsVersion": "TLS1_2",
    "publicNetworkAccess": "Disabled",
}


def account(**inputs: Any) -> ResourceRecord:
    body = {"accountName": "tdata", "location": "eastus2", "tags": TAGS, "kind": "StorageV2", **inputs}
    return record("azure-native:storage:StorageAccount", "t-data", {k: v for k, v in body.items() if v is not None})


def run(
    rule_id: str,
    resources: Iterable[ResourceRecord],
    policy: PolicySettings | None = None,
    quota: QuotaSnapshot | None = None,
) -> list[Finding]:
    """Call one rule directly, as both front ends do."""
    ctx = rules.RuleContext(policy=policy or PolicySettings(), quota=quota)
    return list(rules.RULES[rule_id](list(resources), ctx))


def levels(findings: Iterable[Finding]) -> list[str]:
    return sorted(f.level.label for f in findings)


def assert_findings(found: list[Finding], expected: list[str], words: Iterable[str]) -> None:
    """``found`` has exactly the ``expected`` levels (sorted), and their messages together hold every word."""
    assert levels(found) == expected
    text = " ".join(f.message for f in found)
    for word in words:
        assert word in text, f"{word!r} not in {text!r}"


def with_inputs(rec: ResourceRecord, **changes: Any) -> ResourceRecord:
    """A copy of a recorded resource with some top-level inputs replaced."""
    inputs = copy.deepcopy(rec.inputs)
    inputs.update(changes)
    return ResourceRecord(rec.urn, rec.type, rec.name, rec.parent, rec.protect, rec.id, inputs)


def struct(props: dict[str, Any]) -> struct_pb2.Struct:
    """Properties as the engine sends them over gRPC (a protobuf Struct)."""
    out = struct_pb2.Struct()
    out.update(json.loads(json.dumps(props)))
    return out
