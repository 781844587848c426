"""The login nodes (``gb300:login``): CPU VMs where users sign in with Microsoft Entra ID and submit jobs.

Each login VM sits in the head subnet (Bastion reaches it as it reaches the head), has no public address, runs as the
node identity and, for Entra sign-in, a system-assigned identity too (``AADSSHLoginForLinux`` fails without one,
``data/entra.yaml``). It carries the extension, and each Entra group of ``gb300:access.entra`` holds its login role
(``Virtual Machine User Login`` or ``Virtual Machine Administrator Login``) on that VM alone: no role on the
resource group, the head or the GPU nodes. The login node's own payload (mounts, ``sackd``, per-user limits) is the
custom data the program hands in.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import compute, network

from gb300 import tags as gb300_tags
from gb300.components.node_common import NodeCommon
from gb300.components.scale_set import image_reference
from gb300.facts import entra, roles

USER_ROLE = "Virtual Machine User Login"
ADMIN_ROLE = "Virtual Machine Administrator Login"


@dataclass(frozen=True)
class LoginPoolArgs:
    """Inputs of :class:`LoginPool`; the VMs go in the scope's ``head`` subnet."""

    node: NodeCommon
    vm_size: str
    count: int
    image: str
    os_disk_size_gb: int
    custom_data: pulumi.Input[str]
    custom_data_sha256: str
    user_groups: tuple[str, ...]
    admin_groups: tuple[str, ...] = ()
    zones: list[str] | None = None
    """The login VMs' zone (``gb300:login.zone``, else the cluster's); None: no zone."""


class LoginPool(pulumi.ComponentResource):
    """``count`` login VMs ``<name>-<i>``, each with its NIC, the Entra extension and its groups' login roles."""

    vm_names: list[str]
    vm_ids: list[pulumi.Output[str]]
    private_ips: list[pulumi.Output[str]]

    def __init__(self, name: str, args: LoginPoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gb300:access:LoginPool", name, None, opts)
        self.vm_names, self.vm_ids, self.private_ips = [], [], []
        for i in range(args.count):
            vm_name = f"{name}-{i}"
            nic = self._nic(vm_name, args)
            vm = self._vm(vm_name, args, nic)
            self._sign_in(vm_name, vm, args)
            if args.node.monitoring is not None:
                args.node.monitoring.attach_vm(vm_name, vm.id, args.node.identity_id)
            self.vm_names.append(vm_name)
            self.vm_ids.append(vm.id)
            self.private_ips.append(
                nic.ip_configurations.apply(lambda cfgs: (cfgs[0].private_ip_address or "") if cfgs else "")
            )
        self.register_outputs({"vmNames": self.vm_names, "vmIds": self.vm_ids, "privateIps": self.private_ips})

    def _nic(self, vm_name: str, args: LoginPoolArgs) -> network.NetworkInterface:
        """The login VM's NIC in the head subnet, without a public address."""
        scope = args.node.scope
        return network.NetworkInterface(
            f"{vm_name}-nic",
            network_interface_name=f"{vm_name}-nic",
            resource_group_name=scope.resource_group_name,
            location=scope.location,
            enable_accelerated_networking=True,
            ip_configurations=[
                network.NetworkInterfaceIPConfigurationArgs(
                    name="ipconfig",
                    primary=True,
                    subnet=network.SubnetArgs(id=scope.subnet_id("head")),
                    private_ip_allocation_method=network.IPAllocationMethod.DYNAMIC,
                )
            ],
            tags=gb300_tags.login(args.node.tags, args.custom_data_sha256),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _vm(self, vm_name: str, args: LoginPoolArgs, nic: network.NetworkInterface) -> compute.VirtualMachine:
        """The login VM: the node identity plus a system-assigned one (Entra sign-in needs it), SSH keys only."""
        node = args.node
        return compute.VirtualMachine(
            vm_name,
            vm_name=vm_name,
            resource_group_name=node.scope.resource_group_name,
            location=node.scope.location,
            zones=args.zones,
            hardware_profile=compute.HardwareProfileArgs(vm_size=args.vm_size),
            identity=compute.VirtualMachineIdentityArgs(
                type=compute.ResourceIdentityType.SYSTEM_ASSIGNED_USER_ASSIGNED,
                user_assigned_identities=[node.identity_id],
            ),
            os_profile=compute.OSProfileArgs(
                computer_name=vm_name,
                admin_username=node.admin_username,
                custom_data=args.custom_data,
                linux_configuration=compute.LinuxConfigurationArgs(
                    disable_password_authentication=True,
                    # Azure needs one key for a Linux VM without a password; the login payload's sshd settings
                    # refuse it unless gb300:login.adminKey is true (docs/access.md#what-gb300-builds).
                    ssh=compute.SshConfigurationArgs(
                        public_keys=[
                            compute.SshPublicKeyArgs(
                                path=f"/home/{node.admin_username}/.ssh/authorized_keys",
                                key_data=node.ssh_public_key,
                            )
                        ]
                    ),
                ),
            ),
            storage_profile=compute.StorageProfileArgs(
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
            ),
            network_profile=compute.NetworkProfileArgs(
                network_interfaces=[compute.NetworkInterfaceReferenceArgs(id=nic.id, primary=True)]
            ),
            tags=gb300_tags.login(node.tags, args.custom_data_sha256),
            # A login VM keeps nothing of its own (homes are on shared storage): a new payload or image replaces it.
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=list(node.boot_dependencies),
                replace_on_changes=["osProfile.customData", "storageProfile.imageReference"],
                delete_before_replace=True,
            ),
        )

    def _sign_in(self, vm_name: str, vm: compute.VirtualMachine, args: LoginPoolArgs) -> None:
        """The Entra extension on the VM, and each group's login role scoped to that VM only."""
        facts = entra.load()
        compute.VirtualMachineExtension(
            f"{vm_name}-entra",
            vm_extension_name=facts.type,
            # Derived from the VM's id so the extension waits for the VM (a plain name carries no dependency).
            vm_name=vm.id.apply(lambda _: vm_name),
            resource_group_name=args.node.scope.resource_group_name,
            location=args.node.scope.location,
            publisher=facts.publisher,
            type=facts.type,
            type_handler_version=facts.type_handler_version,
            auto_upgrade_minor_version=True,
            tags=args.node.scope.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        grants = [(USER_ROLE, g) for g in args.user_groups] + [(ADMIN_ROLE, g) for g in args.admin_groups]
        for role, group in grants:
            kind = "admin" if role == ADMIN_ROLE else "user"
            roles.assign(
                f"{vm_name}-{kind}-{group}",
                role=role,
                scope=vm.id,
                principal_id=group,
                parent=self,
                principal_type="Group",
            )
