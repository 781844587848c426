"""The Pulumi program: typed config -> components -> resources.

``infra/__main__.py`` calls :func:`main` under the Pulumi engine; ``gb300 plan`` calls it under the SDK's
mock monitor. Both read the same config and declare the same resources.
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import authorization, resources

from gb300 import catalog, config, netplan, nodes
from gb300.components import GpuPool, GpuPoolArgs, Network, NetworkArgs, NodeIdentity, NodeIdentityArgs
from gb300.components.head import HeadNode, HeadNodeArgs
from gb300.components.secrets import ClusterSecrets, ClusterSecretsArgs
from gb300.config import StackConfig
from gb300.errors import ConfigError


def subnet_plan(cfg: StackConfig) -> list[netplan.SubnetPlan]:
    """The subnets carved from ``gb300:network.addressSpace`` for this config."""
    roles: tuple[netplan.Role, ...] = ("gpu", "head", "storage", "endpoints")
    if cfg.network.bastion:
        roles = (*roles, "bastion")
    reserved = catalog.load().limit("subnetReservedAddresses")
    return netplan.carve(
        cfg.network.address_space,
        gpu_vms=sum(p.vms for p in cfg.gpu_pools),
        reserved=reserved,
        roles=roles,
    )


def build(cfg: StackConfig) -> dict[str, pulumi.Output[str]]:
    """Declare every resource of the cluster described by ``cfg``; returns the stack outputs."""
    cat = catalog.load()
    name = cfg.cluster.name
    tags = cfg.tags
    location = cfg.cluster.location

    rg = resources.ResourceGroup(f"{name}-rg", resource_group_name=f"{name}-rg", location=location, tags=tags)
    net = Network(
        name,
        NetworkArgs(
            resource_group_name=rg.name,
            location=location,
            address_space=cfg.network.address_space,
            subnets=subnet_plan(cfg),
            ssh_source_ranges=list(cfg.access.ssh_source_ranges),
            nat_gateway=cfg.network.nat_gateway,
            bastion=cfg.network.bastion,
            zone=cfg.cluster.zone,
            tags=tags,
        ),
    )
    identity = NodeIdentity(f"{name}-node", NodeIdentityArgs(rg.name, location, tags))
    client = authorization.get_client_config_output()
    secrets = ClusterSecrets(
        name,
        ClusterSecretsArgs(
            cluster_name=name,
            resource_group_name=rg.name,
            location=location,
            tenant_id=client.tenant_id,
            vnet_id=net.vnet_id,
            endpoints_subnet_id=net.subnet_ids["endpoints"],
            node_principal_id=identity.principal_id,
            tags=tags,
        ),
    )
    # Nodes learn where their secrets are from their own tags (IMDS), so custom data holds no secret
    # and does not change when the vault's generated name does.
    node_tags: dict[str, pulumi.Input[str]] = {**tags, "gb300-keyvault": secrets.vault_name}
    head_data = nodes.render(nodes.HEAD, cfg)
    head = HeadNode(
        nodes.head_hostname(cfg),
        HeadNodeArgs(
            cluster_name=name,
            vm_size=cfg.head.vm_size,
            image=cfg.head.image,
            os_disk_size_gb=cfg.head.os_disk_size_gb,
            admin_username=cfg.access.admin_username,
            ssh_public_key=cfg.access.ssh_public_key,
            resource_group_name=rg.name,
            location=location,
            subnet_id=net.subnet_ids["head"],
            identity_id=identity.id,
            custom_data=head_data.base64,
            custom_data_sha256=head_data.sha256,
            public_ip=cfg.access.login_public_ip,
            zone=cfg.cluster.zone,
            tags=node_tags,
        ),
    )
    for pool in cfg.gpu_pools:
        sku = pool.sku
        custom = nodes.render(nodes.GPU_NODE, cfg, pool)
        GpuPool(
            f"{name}-{pool.name}",
            GpuPoolArgs(
                cluster_name=name,
                pool_name=pool.name,
                sku=sku,
                fabric=cat.fabric_for(sku),
                racks=pool.racks,
                image=pool.image,
                os_disk_size_gb=pool.os_disk_size_gb,
                admin_username=cfg.access.admin_username,
                ssh_public_key=cfg.access.ssh_public_key,
                resource_group_name=rg.name,
                location=location,
                subnet_id=net.subnet_ids["gpu"],
                identity_id=identity.id,
                custom_data=custom.base64,
                custom_data_sha256=custom.sha256,
                zone=cfg.cluster.zone,
                capacity_reservation_group_id=pool.capacity_reservation_group_id,
                tags=node_tags,
            ),
        )
    return {
        "resourceGroupName": rg.name,
        "vnetId": net.vnet_id,
        "nodeIdentityId": identity.id,
        "keyVaultName": secrets.vault_name,
        "headPrivateIp": head.private_ip,
    }


def read_config() -> StackConfig:
    """The stack's ``gb300`` namespace from the Pulumi engine, validated."""
    values: dict[str, str] = {}
    values.update(pulumi.runtime.config.get_config_env())
    values.update(pulumi.runtime.config.CONFIG.get())
    return config.parse(config.from_pulumi_config(values))


def main() -> None:
    """Entry point under the Pulumi engine or the plan's mocks."""
    try:
        cfg = read_config()
    except ConfigError as exc:
        raise pulumi.RunError(f"invalid stack configuration:\n{exc}") from None
    for key, value in build(cfg).items():
        pulumi.export(key, value)
