"""``gb300:access.entra`` and ``gb300:login``: who signs in with their Entra identity, and the login nodes they sign in
to (docs/access.md).

Login nodes are CPU VMs apart from the Slurm controller: users sign in there with Microsoft Entra ID (the
``AADSSHLoginForLinux`` extension, ``data/entra.yaml``), submit jobs, and reach the GPU nodes only through Slurm. What
needs the rest of the stack (Bastion, the sign-in groups) is :class:`gb300.config.models.StackConfig`'s.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field

from gb300.config.accounts import EntraGroup
from gb300.config.base import Checks, ConfigModel
from gb300.config.checks import PathError, check_image, check_size
from gb300.config.fields import AzureName, ImageReference, Zone
from gb300.facts import catalog, entra

__all__ = ["EntraSettings", "LoginSettings", "UserLimits"]


class EntraSettings(ConfigModel):
    """``gb300:access.entra``: the Entra ID groups whose members sign in to the login nodes with their own identity
    (`az network bastion ssh --auth-type AAD`, `az ssh vm`); no shared key."""

    user_groups: Annotated[list[EntraGroup], Field(min_length=1, max_length=32)]
    """Object IDs (GUIDs) of the Entra groups whose members sign in as themselves, without sudo: each is granted
    `Virtual Machine User Login` on each login VM, and on nothing else."""
    admin_groups: Annotated[list[EntraGroup], Field(max_length=32)] = Field(default_factory=list)
    """Object IDs (GUIDs) of the Entra groups whose members sign in with sudo: each is granted `Virtual Machine
    Administrator Login` on each login VM, and on nothing else."""

    def check_no_group_twice(self) -> None:
        """No group is listed twice, nor as both a user and an administrator group."""
        seen: dict[str, tuple[str | int, ...]] = {}
        for key, groups in (("userGroups", self.user_groups), ("adminGroups", self.admin_groups)):
            for i, group in enumerate(groups):
                loc = ("access", "entra", key, i)
                if group in seen:
                    first = seen[group]
                    raise PathError(loc, f"repeats {first[2]}[{first[3]}] (got {group!r}); list each group once")
                seen[group] = loc

    CHECKS: ClassVar[Checks] = (check_no_group_twice,)


class UserLimits(ConfigModel):
    """``gb300:login.userLimits``: what one user's processes on a login node may take together (systemd's per-user
    slice, `user-<uid>.slice`, a cgroup)."""

    cpus: Annotated[int, Field(ge=1, le=64, strict=True)] = 4
    """CPUs' worth of time per user (systemd `CPUQuota=`, 100% per CPU)."""
    memory_percent: Annotated[int, Field(ge=1, le=90, strict=True)] = 25
    """Share of the VM's memory per user (systemd `MemoryMax=`); past it the kernel reclaims, then kills within the
    user's own processes only."""
    tasks: Annotated[int, Field(ge=64, le=65536, strict=True)] = 4096
    """Processes and threads per user (systemd `TasksMax=`)."""


class LoginSettings(ConfigModel):
    """``gb300:login``: the login nodes, CPU VMs where users sign in and submit jobs. They mount the shared home,
    Lustre and Blob as the GPU nodes do, run no slurmd and no jobs, and read Slurm's configuration from the
    controller (`sackd`, configless): nothing to copy (docs/access.md)."""

    vm_size: Annotated[AzureName, AfterValidator(check_size)] = "Standard_D16ds_v5"
    """A CPU size in the catalog (x86_64: the architecture Entra sign-in is documented for, data/entra.yaml)."""
    count: Annotated[int, Field(ge=1, le=10, strict=True)] = 2
    """How many login VMs (`<cluster>-login-0`, `-1`, ...); each is a Bastion target of its own."""
    zone: Zone | None = None
    """Availability zone of the login VMs; unset: gb300:cluster.zone."""
    image: Annotated[ImageReference, AfterValidator(check_image)] = "canonical:ubuntu-24_04-lts:server:latest"
    """Marketplace URN or image id (Ubuntu 24.04)."""
    os_disk_size_gb: Annotated[int, Field(ge=64, le=4095, strict=True)] = Field(128, alias="osDiskSizeGB")
    """OS disk size in GB."""
    admin_key: bool = False
    """Whether the break-glass admin key (gb300:access.sshPublicKey) logs in on the login nodes too. Off: sshd on the
    login nodes refuses public keys for the admin user (Azure still places the key: a Linux VM needs one); the admin
    reaches them with an Entra administrator group, and the head with the key."""
    user_limits: UserLimits = Field(default_factory=UserLimits)
    """What each user's processes may take together on a login node (a cgroup per user)."""

    def check_sign_in_supported(self) -> None:
        """The login size's architecture is one the Entra extension is documented and verified for."""
        arch = catalog.load().skus[self.vm_size].cpu_arch
        row = entra.load().supports("ubuntu-24.04", arch)
        if row is None or not row.usable:
            raise PathError(
                ("login", "vmSize"),
                f"must be an x86_64 size (got {self.vm_size!r}, {arch}): Microsoft documents Entra sign-in "
                "(AADSSHLoginForLinux) for no other architecture (data/entra.yaml)",
            )

    CHECKS: ClassVar[Checks] = (check_sign_in_supported,)
