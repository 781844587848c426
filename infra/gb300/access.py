"""How people reach the cluster, from the stack config: the admin's first-login outputs (the head, over Bastion with
the break-glass key) and the login nodes users sign in to with Entra ID (``gb300:login``, docs/access.md)."""

from __future__ import annotations

from typing import Any

import pulumi

from gb300.components.login import LoginPool, LoginPoolArgs
from gb300.components.node_common import NodeCommon
from gb300.components.node_payload import NodePayloads
from gb300.config import StackConfig
from gb300.node.custom_data import CustomData

__all__ = ["first_login_outputs", "login_outputs", "login_pool"]


def login_pool(
    cfg: StackConfig, node: NodeCommon, payloads: NodePayloads, rendered: CustomData | None
) -> LoginPool | None:
    """``gb300:login`` and ``gb300:access.entra``: the login VMs, booting the login role's payload, and their sign-in
    grants; None without login nodes."""
    login, entra = cfg.login, cfg.access.entra
    if login is None or entra is None or rendered is None:
        return None
    zone = login.zone or cfg.cluster.zone
    return LoginPool(
        f"{cfg.cluster.name}-login",
        LoginPoolArgs(
            node=node,
            vm_size=login.vm_size,
            count=login.count,
            image=login.image,
            os_disk_size_gb=login.os_disk_size_gb,
            custom_data=payloads.account_name.apply(rendered.for_account),
            custom_data_sha256=rendered.sha256,
            user_groups=tuple(entra.user_groups),
            admin_groups=tuple(entra.admin_groups),
            zones=[zone] if zone is not None else None,
        ),
    )


def login_outputs(
    pool: LoginPool, rg_name: pulumi.Input[str], bastion_name: pulumi.Output[str] | None
) -> dict[str, pulumi.Output[str]]:
    """What a user needs to sign in (docs/access.md): the login VMs' ids and, with gb300's Bastion, the whole
    `az network bastion ssh --auth-type AAD` command to the first one (`pulumi stack output userLoginCommand`)."""
    out: dict[str, pulumi.Output[str]] = {"loginVmIds": pulumi.Output.all(*pool.vm_ids).apply(",".join)}
    if bastion_name is not None:
        out["userLoginCommand"] = pulumi.Output.concat(
            "az network bastion ssh --name ",
            bastion_name,
            " --resource-group ",
            rg_name,
            " --target-resource-id ",
            pool.vm_ids[0],
            " --auth-type AAD",
        )
    return out


def first_login_outputs(
    cfg: StackConfig, rg_name: pulumi.Input[str], bastion_name: pulumi.Output[str] | None, head_vm_id: pulumi.Input[str]
) -> dict[str, Any]:
    """What a new user needs after `pulumi up` to reach a shell on the head (docs/first-login.md): the head's
    resource id, the admin user, and, with Bastion on, the Bastion's name and the whole `az network bastion ssh`
    command (`pulumi stack output loginCommand`). Without Bastion, loginCommand says how to reach the head."""
    user = cfg.access.admin_username
    out: dict[str, Any] = {"headVmId": head_vm_id, "adminUsername": user}
    if bastion_name is None and cfg.network.existing_vnet_id is not None:
        out["loginCommand"] = pulumi.Output.concat(
            "no Bastion of gb300's own (gb300:network.bastion is false): use the hub's Bastion: "
            "az network bastion ssh --name <hub-bastion> --resource-group <hub-bastion-group> --target-resource-id ",
            head_vm_id,
            f" --auth-type ssh-key --username {user} --ssh-key ~/.ssh/id_ed25519 "
            "(docs/landing-zone.md#reaching-the-head)",
        )
        return out
    if bastion_name is None:
        out["loginCommand"] = (
            "no Bastion (gb300:network.bastion is false): ssh to headPrivateIp from inside the VNet, "
            "or set gb300:network.bastion: true and run pulumi up"
        )
        return out
    out["bastionName"] = bastion_name
    out["loginCommand"] = pulumi.Output.concat(
        "az network bastion ssh --name ",
        bastion_name,
        " --resource-group ",
        rg_name,
        " --target-resource-id ",
        head_vm_id,
        f" --auth-type ssh-key --username {user} --ssh-key ~/.ssh/id_ed25519",
    )
    return out
