"""The head node: Slurm controller and login node in the head subnet, running as the node identity.

No public IP unless ``gb300:access.loginPublicIp`` asks for one (the rules then demand restricted
``sshSourceRanges``). Password login is off.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from gb300 import tags as gb300_tags
from gb300.components.arm_resource import ArmResource, token
from gb300.components.network import SUBNET_POLICY_DEFAULTS
from gb300.components.node_common import NodeCommon
from gb300.components.scale_set import image_reference

STATE_DISK_LUN = 0  # the head step finds it as /dev/disk/azure/scsi1/lun0 (Azure's udev rules)


@dataclass(frozen=True)
class HeadNodeArgs:
    """Inputs of :class:`HeadNode`."""

    node: NodeCommon
    cluster_name: str
    vm_size: str
    image: str
    os_disk_size_gb: int
    subnet_id: pulumi.Input[str]
    custom_data: pulumi.Input[str]
    custom_data_sha256: str
    state_disk_size_gb: int
    public_ip: bool = False


class HeadNode(pulumi.ComponentResource):
    """One VM that runs slurmctld (and optionally slurmdbd) and takes user logins."""

    private_ip: pulumi.Output[str]
    hostname: str
    vm_name: str
    vm_id: pulumi.Output[str]

    def __init__(self, name: str, args: HeadNodeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gb300:scheduler:HeadNode", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        node = args.node
        zones = [node.zone] if node.zone else None
        tags = gb300_tags.head(node.tags, args.custom_data_sha256)
        public_ip = None
        if args.public_ip:
            pip = ArmResource(
                f"{name}-ip",
                {
                    "publicIpAddressName": f"{name}-ip",
                    "resourceGroupName": node.resource_group_name,
                    "location": node.location,
                    "sku": {"name": "Standard"},
                    "publicIPAllocationMethod": "Static",
                    "zones": zones,
                    "tags": tags,
                },
                child,
                type_=token("network", "PublicIPAddress"),
            )
            public_ip = {"id": pip.id}
        ip_configuration = {
            "name": "ipconfig",
            "primary": True,
            # A subnet reference carries the provider schema's subnet policy defaults, as the typed class sends it.
            "subnet": {"id": args.subnet_id, **SUBNET_POLICY_DEFAULTS},
            "privateIPAllocationMethod": "Dynamic",
            "publicIPAddress": public_ip,
        }
        nic = ArmResource(
            f"{name}-nic",
            {
                "networkInterfaceName": f"{name}-nic",
                "resourceGroupName": node.resource_group_name,
                "location": node.location,
                "enableAcceleratedNetworking": True,
                "ipConfigurations": [ip_configuration],
                "tags": tags,
            },
            child,
            type_=token("network", "NetworkInterface"),
        )
        # Slurm's state and the accounting database live here, not on the OS disk (docs/day2.md): protected and
        # retained, and attached with deleteOption Detach, so replacing or deleting the VM leaves it to the next one.
        state_disk = ArmResource(
            f"{name}-state",
            {
                "diskName": f"{name}-state",
                "resourceGroupName": node.resource_group_name,
                "location": node.location,
                "zones": zones,
                "sku": {"name": "Premium_LRS"},
                "creationData": {"createOption": "Empty"},
                "diskSizeGB": args.state_disk_size_gb,
                "tags": gb300_tags.head_state(node.tags),
            },
            pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True),
            type_=token("compute", "Disk"),
        )
        self.hostname = name
        self.vm_name = name
        os_profile = {
            "computerName": name,
            "adminUsername": node.admin_username,
            "customData": args.custom_data,
            "linuxConfiguration": {
                "disablePasswordAuthentication": True,
                "ssh": {
                    "publicKeys": [
                        {"path": f"/home/{node.admin_username}/.ssh/authorized_keys", "keyData": node.ssh_public_key}
                    ]
                },
            },
        }
        storage_profile = {
            "imageReference": image_reference(args.image),
            "osDisk": {
                "createOption": "FromImage",
                "caching": "ReadWrite",
                "diskSizeGB": args.os_disk_size_gb,
                "managedDisk": {"storageAccountType": "Premium_LRS"},
                "deleteOption": "Delete",
            },
            "dataDisks": [
                {
                    "lun": STATE_DISK_LUN,
                    "createOption": "Attach",
                    "managedDisk": {"id": state_disk.id},
                    "caching": "ReadOnly",
                    "deleteOption": "Detach",
                }
            ],
        }
        vm = ArmResource(
            name,
            {
                "vmName": name,
                "resourceGroupName": node.resource_group_name,
                "location": node.location,
                "zones": zones,
                "hardwareProfile": {"vmSize": args.vm_size},
                "identity": {"type": "UserAssigned", "userAssignedIdentities": [node.identity_id]},
                "osProfile": os_profile,
                "storageProfile": storage_profile,
                "networkProfile": {"networkInterfaces": [{"id": nic.id, "primary": True}]},
                # No securityProfile: at the Compute API pulumi-azure-native pins (2024-11-01) an explicit
                # securityType "Standard" is refused unless the subscription registered
                # Microsoft.Compute/UseStandardSecurityType. Left out, Azure creates the same Standard VM (no Secure
                # Boot: the Lustre client's module loads). docs/azure-resources.md
                "tags": tags,
            },
            # Azure keeps a VM's custom data from its creation: a new bootstrap needs a new VM, and the fixed
            # name means the old one goes first. The plan warns with --state (rule custom-data-changed).
            pulumi.ResourceOptions(
                parent=self,
                depends_on=list(node.boot_dependencies),
                replace_on_changes=["osProfile.customData"],
                delete_before_replace=True,
            ),
            type_=token("compute", "VirtualMachine"),
        )
        self.vm_id = vm.id
        if node.monitoring is not None:
            node.monitoring.attach_vm(
                name, vm.id, node.identity_id, location=node.location, resource_group_name=node.resource_group_name
            )
        self.private_ip = nic.output("ipConfigurations").apply(
            lambda cfgs: str(cfgs[0].get("privateIPAddress") or "") if cfgs else ""
        )
        self.register_outputs({"hostname": name, "privateIp": self.private_ip})
