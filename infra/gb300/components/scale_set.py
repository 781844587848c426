"""The inputs of a pool's scale set (a GPU pool's rack or a CPU pool), built as data.

The scale set is a :class:`~gb300.components.compute_package.VirtualMachineScaleSet`: pulumi-azure-native's compute
module at API 2026-03-01, a parameterized package (the default SDK's class, at 2024-11-01, lacks the interconnect
fields). The inputs are the package's: camelCase, with the ``properties`` envelopes azure-native flattens
flattened (the network and IP configurations' and the extensions'). ``tests/azure/test_contract.py`` rebuilds the
ARM body from them and checks every key against Azure's SDK models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from gb300.facts.catalog import Sku


@dataclass(frozen=True)
class ScaleSetSpec:
    """What one scale set holds: size, count, image, access and where it attaches."""

    sku: Sku
    capacity: int
    computer_name_prefix: str
    image: str
    os_disk_size_gb: int
    admin_username: str
    ssh_public_key: str
    subnet_id: pulumi.Input[str]
    custom_data: pulumi.Input[str]
    interconnect_group_id: pulumi.Input[str] | None = None
    capacity_reservation_group_id: str | None = None
    extensions: tuple[dict[str, Any], ...] = ()  # extensionProfile entries, ARM shape (e.g. the Azure Monitor Agent)
    # Scheduled Events the VMs are told of before Azure acts (ISO 8601 notBeforeTimeout each; data/platform.yaml),
    # so gb300-scheduled-events can drain a node first: deletion/scale-in (Terminate) and reimage/OS upgrade.
    terminate_notification_timeout: str | None = None
    os_image_notification_timeout: str | None = None


def image_reference(image: str) -> dict[str, str]:
    """A marketplace URN ``publisher:offer:sku:version`` or an image id, as ARM's imageReference."""
    if image.startswith("/"):
        return {"id": image}
    publisher, offer, sku, version = image.split(":")
    return {"publisher": publisher, "offer": offer, "sku": sku, "version": version}


def flat_extension(extension: dict[str, Any]) -> dict[str, Any]:
    """An ARM ``extensionProfile.extensions`` entry as azure-native takes it: its ``properties`` flattened."""
    return {"name": extension["name"], **extension.get("properties", {})}


def virtual_machine_profile(spec: ScaleSetSpec) -> dict[str, Any]:
    """The scale set's ``virtualMachineProfile``: SSH-only Linux, accelerated networking, no public IP."""
    network_profile: dict[str, Any] = {
        "networkInterfaceConfigurations": [
            {
                "name": "eth0",
                "primary": True,
                "enableAcceleratedNetworking": True,
                "ipConfigurations": [{"name": "ipconfig", "primary": True, "subnet": {"id": spec.subnet_id}}],
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
    events: dict[str, Any] = {}
    if spec.terminate_notification_timeout:
        events["terminateNotificationProfile"] = {
            "enable": True,
            "notBeforeTimeout": spec.terminate_notification_timeout,
        }
    if spec.os_image_notification_timeout:
        events["osImageNotificationProfile"] = {"enable": True, "notBeforeTimeout": spec.os_image_notification_timeout}
    if events:
        vm_profile["scheduledEventsProfile"] = events
    if spec.extensions:
        vm_profile["extensionProfile"] = {"extensions": [flat_extension(e) for e in spec.extensions]}
    if spec.capacity_reservation_group_id:
        vm_profile["capacityReservation"] = {"capacityReservationGroup": {"id": spec.capacity_reservation_group_id}}
    return vm_profile


def sku(spec: ScaleSetSpec) -> dict[str, Any]:
    return {"name": spec.sku.name, "tier": "Standard", "capacity": spec.capacity}
