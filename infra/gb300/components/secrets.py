"""Cluster secrets: a Key Vault (RBAC, purge protection, private endpoint only) holding the munge key.

The munge key is generated at deploy time (pulumi-random) and never appears in custom data: nodes read it
from the vault with their managed identity, which holds ``Key Vault Secrets User`` on this vault only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_random as random
from pulumi_azure_native import keyvault, network, privatedns

from gb300 import roles

MUNGE_SECRET_NAME = "munge-key"  # noqa: S105 - the name of the secret, not its value
MUNGE_KEY_BYTES = 1024  # munge's own `mungekey` default


@dataclass(frozen=True)
class ClusterSecretsArgs:
    """Inputs of :class:`ClusterSecrets`."""

    cluster_name: str
    resource_group_name: pulumi.Input[str]
    location: str
    tenant_id: pulumi.Input[str]
    vnet_id: pulumi.Input[str]
    endpoints_subnet_id: pulumi.Input[str]
    node_principal_id: pulumi.Input[str]
    tags: dict[str, str] = field(default_factory=dict)


class ClusterSecrets(pulumi.ComponentResource):
    """The vault, the munge key in it, its private endpoint and DNS, and the nodes' read access."""

    vault_name: pulumi.Output[str]
    vault_id: pulumi.Output[str]
    munge_secret_name: str

    def __init__(self, name: str, args: ClusterSecretsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gb300:secrets:ClusterSecrets", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        suffix = random.RandomString(
            f"{name}-kv-suffix", length=6, special=False, upper=False, numeric=True, opts=child
        )
        vault = keyvault.Vault(
            f"{name}-kv",
            vault_name=suffix.result.apply(lambda s: f"{args.cluster_name}-kv-{s}"),
            resource_group_name=args.resource_group_name,
            location=args.location,
            properties=keyvault.VaultPropertiesArgs(
                tenant_id=args.tenant_id,
                sku=keyvault.SkuArgs(family="A", name=keyvault.SkuName.STANDARD),
                enable_rbac_authorization=True,
                enable_purge_protection=True,
                enable_soft_delete=True,
                soft_delete_retention_in_days=90,
                public_network_access="Disabled",
                network_acls=keyvault.NetworkRuleSetArgs(default_action="Deny", bypass="AzureServices"),
            ),
            tags=args.tags,
            opts=child,
        )
        munge = random.RandomBytes(f"{name}-munge-key", length=MUNGE_KEY_BYTES, opts=child)
        keyvault.Secret(
            f"{name}-munge-key",
            secret_name=MUNGE_SECRET_NAME,
            vault_name=vault.name,
            resource_group_name=args.resource_group_name,
            properties=keyvault.SecretPropertiesArgs(
                value=pulumi.Output.secret(munge.base64), content_type="application/base64"
            ),
            tags=args.tags,
            opts=child,
        )
        zone = privatedns.PrivateZone(
            f"{name}-kv-dns",
            private_zone_name="privatelink.vaultcore.azure.net",
            resource_group_name=args.resource_group_name,
            location="Global",
            tags=args.tags,
            opts=child,
        )
        privatedns.VirtualNetworkLink(
            f"{name}-kv-dns-link",
            virtual_network_link_name=f"{name}-kv-dns-link",
            private_zone_name=zone.name,
            resource_group_name=args.resource_group_name,
            location="Global",
            registration_enabled=False,
            virtual_network=privatedns.SubResourceArgs(id=args.vnet_id),
            tags=args.tags,
            opts=child,
        )
        endpoint = network.PrivateEndpoint(
            f"{name}-kv-pe",
            private_endpoint_name=f"{name}-kv-pe",
            resource_group_name=args.resource_group_name,
            location=args.location,
            subnet=network.SubnetArgs(id=args.endpoints_subnet_id),
            private_link_service_connections=[
                network.PrivateLinkServiceConnectionArgs(
                    name="vault", private_link_service_id=vault.id, group_ids=["vault"]
                )
            ],
            tags=args.tags,
            opts=child,
        )
        network.PrivateDnsZoneGroup(
            f"{name}-kv-pe-dns",
            private_dns_zone_group_name="vault",
            private_endpoint_name=endpoint.name,
            resource_group_name=args.resource_group_name,
            private_dns_zone_configs=[network.PrivateDnsZoneConfigArgs(name="vault", private_dns_zone_id=zone.id)],
            opts=child,
        )
        roles.assign(
            f"{name}-nodes-read-secrets",
            role="Key Vault Secrets User",
            scope=vault.id,
            principal_id=args.node_principal_id,
            parent=self,
        )
        self.vault_name = vault.name
        self.vault_id = vault.id
        self.munge_secret_name = MUNGE_SECRET_NAME
        self.register_outputs({"vaultName": vault.name, "vaultId": vault.id})
