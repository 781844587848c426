"""The head node: Slurm controller and login node in the head subnet, running as the node identity.

No public IP unless ``gb300:access.loginPublicIp`` asks for one (the rules then demand restricted
``sshSourceRanges``). Password login is off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_azure_native import compute, network

from gb300 import tags as gb300_tags
from gb300.components.node_common import NodeCommon
from gb300.components.scale_set import image_reference

STATE_DISK_LUN = 0  # the head step finds it as /dev/disk/azure/scsi1/lun0 (Azure's udev rules)


@dataclass(frozen=True)
class HeadNodeArgs:
    """Inputs of :class:`HeadNode`; the head goes in the scope's ``head`` subnet."""

    node: NodeCommon
    vm_size: str
    image: str
    os_disk_size_gb: int
    custom_data: pulumi.Input[str]
    custom_data_sha256: str
    state_disk_size_gb: int
    public_ip: bool = False
    # gb300:remediation.enabled: the remediation identity (attached besides the node identity) and its client id,
    # put in the VM's tag gb300.tags.HEAL_CLIENT_ID for gb300-heal (docs/self-healing.md#permissions).
    heal_identity_id: pulumi.Input[str] | None = None
    heal_client_id: pulumi.Input[str] | None = None


class HeadNode(pulumi.ComponentResource):
    """One VM that runs slurmctld (and optionally slurmdbd) and takes user logins."""

    private_ip: pulumi.Output[str]
    hostname: str
    vm_name: str
    vm_id: pulumi.Output[str]

    def __init__(self, name: str, args: HeadNodeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gb300:scheduler:HeadNode", name, None, opts)
        node = args.node
        tags = gb300_tags.head(node.tags, args.custom_data_sha256)
        nic = self._nic(name, args, tags)
        # Slurm's state and the accounting database live here, not on the OS disk (docs/day2.md): protected and
        # retained, and attached with deleteOption Detach, so replacing or deleting the VM leaves it to the next one.
        scope = node.scope
        state_disk = compute.Disk(
            f"{name}-state",
            disk_name=f"{name}-state",
            resource_group_name=scope.resource_group_name,
            location=scope.location,
            zones=scope.zones,
            sku=compute.DiskSkuArgs(name=compute.DiskStorageAccountTypes.PREMIUM_LRS),
            creation_data=compute.CreationDataArgs(create_option=compute.DiskCreateOption.EMPTY),
            disk_size_gb=args.state_disk_size_gb,
            tags=gb300_tags.head_state(node.tags),
            opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True),
        )
        self.hostname = name
        self.vm_name = name
        vm = self._vm(name, args, tags, nic, state_disk)
        self.vm_id = vm.id
        if node.monitoring is not None:
            node.monitoring.attach_vm(name, vm.id, node.identity_id)
        self.private_ip = nic.ip_configurations.apply(lambda cfgs: (cfgs[0].private_ip_address or "") if cfgs else "")
        self.register_outputs({"hostname": name, "privateIp": self.private_ip})

    def _nic(self, name: str, args: HeadNodeArgs, tags: dict[str, Any]) -> network.NetworkInterface:
        """The head's NIC in the head subnet, with a public IP only when ``public_ip`` asks for one."""
        scope = args.node.scope
        child = pulumi.ResourceOptions(parent=self)
        public_ip = None
        if args.public_ip:
            pip = network.PublicIPAddress(
                f"{name}-ip",
                public_ip_address_name=f"{name}-ip",
                resource_group_name=scope.resource_group_name,
                location=scope.location,
                sku=network.PublicIPAddressSkuArgs(name=network.PublicIPAddressSkuName.STANDARD),
                public_ip_allocation_method=network.IPAllocationMethod.STATIC,
                zones=scope.zones,
                tags=tags,
                opts=child,
            )
            public_ip = network.PublicIPAddressArgs(id=pip.id)
        return network.NetworkInterface(
            f"{name}-nic",
            network_interface_name=f"{name}-nic",
            resource_group_name=scope.resource_group_name,
            location=scope.location,
            enable_accelerated_networking=True,
            ip_configurations=[
                network.NetworkInterfaceIPConfigurationArgs(
                    name="ipconfig",
                    primary=True,
                    subnet=network.SubnetArgs(id=scope.subnet_id("head")),
                    private_ip_allocation_method=network.IPAllocationMethod.DYNAMIC,
                    public_ip_address=public_ip,
                )
            ],
            tags=tags,
            opts=child,
        )

    def _vm(
        self,
        name: str,
        args: HeadNodeArgs,
        tags: dict[str, Any],
        nic: network.NetworkInterface,
        state_disk: compute.Disk,
    ) -> compute.VirtualMachine:
        """The head VM: the node identity (and the remediation identity when the loop is on), SSH keys only."""
        node = args.node
        return compute.VirtualMachine(
            name,
            vm_name=name,
            resource_group_name=node.scope.resource_group_name,
            location=node.scope.location,
            zones=node.scope.zones,
            hardware_profile=compute.HardwareProfileArgs(vm_size=args.vm_size),
            identity=compute.VirtualMachineIdentityArgs(
                type=compute.ResourceIdentityType.USER_ASSIGNED,
                user_assigned_identities=[node.identity_id]
                if args.heal_identity_id is None
                else [node.identity_id, args.heal_identity_id],
            ),
            os_profile=_os_profile(name, args),
            storage_profile=_storage_profile(args, state_disk),
            network_profile=compute.NetworkProfileArgs(
                network_interfaces=[compute.NetworkInterfaceReferenceArgs(id=nic.id, primary=True)]
            ),
            # No securityProfile: at the Compute API pulumi-azure-native pins (2024-11-01) an explicit securityType
            # "Standard" is refused unless the subscription registered Microsoft.Compute/UseStandardSecurityType.
            # Left out, Azure creates the same Standard VM (no Secure Boot: the Lustre client's module loads).
            # docs/azure-resources.md
            tags=tags if args.heal_client_id is None else {**tags, gb300_tags.HEAL_CLIENT_ID: args.heal_client_id},
            # Azure keeps a VM's custom data from its creation, and refuses a new image reference for an existing VM
            # (PropertyChangeNotAllowed): either needs a new VM, and the fixed name means the old one goes first.
            # With --state the plan says so (rules custom-data-changed and destroys-deployed).
            # (The VM's tags: the head's, plus the remediation identity's client id when the loop is on.)
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=list(node.boot_dependencies),
                replace_on_changes=["osProfile.customData", "storageProfile.imageReference"],
                delete_before_replace=True,
            ),
        )


def _os_profile(name: str, args: HeadNodeArgs) -> compute.OSProfileArgs:
    """The head's OS profile: its custom data, the admin user, SSH keys only (no password)."""
    node = args.node
    return compute.OSProfileArgs(
        computer_name=name,
        admin_username=node.admin_username,
        custom_data=args.custom_data,
        linux_configuration=compute.LinuxConfigurationArgs(
            disable_password_authentication=True,
            ssh=compute.SshConfigurationArgs(
                public_keys=[
                    compute.SshPublicKeyArgs(
                        path=f"/home/{node.admin_username}/.ssh/authorized_keys",
                        key_data=node.ssh_public_key,
                    )
                ]
            ),
        ),
    )


def _storage_profile(args: HeadNodeArgs, state_disk: compute.Disk) -> compute.StorageProfileArgs:
    """The head's image and OS disk, and the state disk attached at :data:`STATE_DISK_LUN` (detached on delete)."""
    return compute.StorageProfileArgs(
        image_reference=compute.ImageReferenceArgs(**image_reference(args.image)),
        os_disk=compute.OSDiskArgs(
            create_option=compute.DiskCreateOptionTypes.FROM_IMAGE,
            caching=compute.CachingTypes.READ_WRITE,
            disk_size_gb=args.os_disk_size_gb,
            managed_disk=compute.ManagedDiskParametersArgs(
                storage_account_type=compute.StorageAccountTypes.PREMIUM_LRS
            ),
            delete_option=compute.DiskDeleteOptionTypes.DELETE,
        ),
        data_disks=[
            compute.DataDiskArgs(
                lun=STATE_DISK_LUN,
                create_option=compute.DiskCreateOptionTypes.ATTACH,
                managed_disk=compute.ManagedDiskParametersArgs(id=state_disk.id),
                caching=compute.CachingTypes.READ_ONLY,
                delete_option=compute.DiskDeleteOptionTypes.DETACH,
            )
        ],
    )
