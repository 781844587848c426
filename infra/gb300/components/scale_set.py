"""The ARM body of a GPU scale set, built as data.

The scale set is a :class:`~gb300.compute_resource.ComputeResource` at the fabric model's Compute
API version (``fabricModels`` in ``data/skus.yaml``): pulumi-azure-native's typed class lacks the interconnect
fields and its generic resource lacks ``zones``. The body is camelCase ARM, exactly what Azure receives, and
``tests/azure/test_contract.py`` checks every key of it against Azure's SDK models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from gb300.facts.catalog import FabricModel, Sku


@dataclass(frozen=True)
class ScaleSetSpec:
    """What one scale set holds: size, count, image, access and where it attaches."""

    sku: Sku
    fabric: FabricModel
    capacity: int
    computer_name_prefix: str
    image: str
    os_disk_size_gb: int
    admin_username: str
    ssh_public_key: str
    subnet_id: pulumi.Input[str]
    custom_data: pulumi.Input[str]
    interconnect_group_id: pulumi.Input[str] | None = None
    interconnect_block_id: pulumi.Input[str] | None = None
    capacity_reservation_group_id: str | None = None
    extensions: tuple[dict[str, Any], ...] = ()  # ARM extensionProfile entries (e.g. the Azure Monitor Agent)


def image_reference(image: str) -> dict[str, str]:
    """A marketplace URN ``publisher:offer:sku:version`` or an image id, as ARM's imageReference."""
    if image.startswith("/"):
        return {"id": image}
    publisher, offer, sku, version = image.split(":")
    return {"publisher": publisher, "offer": offer, "sku": sku, "version": version}


def properties(spec: ScaleSetSpec) -> dict[str, Any]:
    """The scale set's ``properties``: SSH-only Linux, accelerated networking, no public IP, manual upgrades."""
    network_profile: dict[str, Any] = {
        "networkInterfaceConfigurations": [
            {
                "name": "eth0",
                "properties": {
                    "primary": True,
                    "enableAcceleratedNetworking": True,
                    "ipConfigurations": [
                        {
                            "name": "ipconfig",
                            "properties": {"primary": True, "subnet": {"id": spec.subnet_id}},
                        }
                    ],
                },
            }
        ]
    }
    if spec.interconnect_group_id is not None:
        # Azure's InterconnectGroupProfile: {"interconnectGroup": {"id": ...}, "subgroups": [...]}; subgroups are
        # optional (Azure assigns one). A bare {"id": ...} is no property Azure knows.
        network_profile["interconnectGroupProfile"] = {"interconnectGroup": {"id": spec.interconnect_group_id}}
    vm_profile: dict[str, Any] = {
        "osProfile": {
            "computerNamePrefix": spec.computer_name_prefix,
            "adminUsername": spec.admin_username,
            "customData": spec.custom_data,
            "linuxConfiguration": {
                "disablePasswordAuthentication": True,
                "provisionVMAgent": True,
                "ssh": {
                    "publicKeys": [
                        {
                            "path": f"/home/{spec.admin_username}/.ssh/authorized_keys",
                            "keyData": spec.ssh_public_key,
                        }
                    ]
                },
            },
        },
        "storageProfile": {
            "imageReference": image_reference(spec.image),
            "osDisk": {
                "createOption": "FromImage",
                "caching": "ReadWrite",
                "diskSizeGB": spec.os_disk_size_gb,
                "managedDisk": {"storageAccountType": "Premium_LRS"},
            },
        },
        "networkProfile": network_profile,
        # Standard, not Trusted Launch: the Lustre client's kernel module must load (secure boot refuses it).
        "securityProfile": {"securityType": "Standard"},
    }
    if spec.extensions:
        vm_profile["extensionProfile"] = {"extensions": list(spec.extensions)}
    if spec.interconnect_block_id is not None:
        vm_profile["interconnectBlockProfile"] = {"interconnectBlock": {"id": spec.interconnect_block_id}}
    if spec.capacity_reservation_group_id:
        vm_profile["capacityReservation"] = {"capacityReservationGroup": {"id": spec.capacity_reservation_group_id}}
    return {
        "orchestrationMode": "Uniform",
        "singlePlacementGroup": spec.fabric.single_placement_group,
        "overprovision": False,
        "platformFaultDomainCount": 1,
        # Manual: a changed custom data never silently reimages a training rack; the plan says which need one.
        "upgradePolicy": {"mode": "Manual"},
        "virtualMachineProfile": vm_profile,
    }


def sku(spec: ScaleSetSpec) -> dict[str, Any]:
    return {"name": spec.sku.name, "tier": "Standard", "capacity": spec.capacity}
