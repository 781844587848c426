"""Cluster secrets: a Key Vault (RBAC, purge protection, private endpoint only) holding the munge key.

The munge key is generated at deploy time (pulumi-random) and never appears in custom data: nodes read it
from the vault with their managed identity, which holds ``Key Vault Secrets User`` on that one secret (Key Vault
RBAC scopes a role to a single secret), so a secret added to the vault later is not readable by nodes unless it
is granted too.

The vault and the secret are ``retain_on_delete``: Pulumi never deletes them. azure-native creates and updates
a Key Vault secret through Azure Resource Manager but deletes it through the vault's data plane
(pulumi/pulumi-azure-native ``provider/pkg/resources/customresources/custom_keyvault.go``, ``keyVaultSecret``:
"DELETE is implemented via the KeyVault data plane API, because it isn't available via ARM"), which the closed
vault (no public network access) and the deploy identity (no data role) refuse; a deleted secret would also stay
soft-deleted under purge protection and block a new secret of the same name. Retained, a new key (a replaced
``RandomBytes``) is a new version of the same secret (an ARM update), a replaced vault leaves the old one with
its key, and ``pulumi destroy`` leaves both to the resource group's deletion (an ARM call, which soft-deletes the
vault, recoverable for ``keyVaultSoftDelete.days`` of ``data/storage.yaml``). A re-created stack draws a new vault
suffix, so its vault never collides with a soft-deleted one (docs/day2.md, tearing a cluster down).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_random as random
from pulumi_azure_native import keyvault

from gb300.components.private_link import PrivateLinkArgs, private_endpoint
from gb300.components.scope import ClusterScope
from gb300.config import resource_ids
from gb300.facts import roles, storage_facts
from gb300.resources import MUNGE_SECRET_NAME

KEY_VAULT_ZONE = resource_ids.VAULT_ZONE  # Azure private DNS zone of the vault sub-resource
MUNGE_KEY_BYTES = 1024  # munge's own `mungekey` default


@dataclass(frozen=True)
class ClusterSecretsArgs:
    """Inputs of :class:`ClusterSecrets`: the scope (with its network: the vault's endpoint goes in the endpoints
    subnet, and joins the hub's ``privatelink.vaultcore.azure.net`` zone when the scope names one) and who reads."""

    scope: ClusterScope
    node_principal_id: pulumi.Input[str]


class ClusterSecrets(pulumi.ComponentResource):
    """The vault, the munge key in it, its private endpoint and DNS, and the nodes' read access."""

    vault_name: pulumi.Output[str]
    vault_id: pulumi.Output[str]
    munge_secret_name: str
    boot_dependencies: tuple[pulumi.Resource, ...]
    """What a node's first boot reads: the munge secret, the nodes' read access to it, the vault's private DNS."""

    def __init__(self, name: str, args: ClusterSecretsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gb300:secrets:ClusterSecrets", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        scope = args.scope
        vault = self._vault(name, scope)
        munge = random.RandomBytes(f"{name}-munge-key", length=MUNGE_KEY_BYTES, opts=child)
        secret = keyvault.Secret(
            f"{name}-munge-key",
            secret_name=MUNGE_SECRET_NAME,
            vault_name=vault.name,
            resource_group_name=scope.resource_group_name,
            properties=keyvault.SecretPropertiesArgs(
                value=pulumi.Output.secret(munge.base64), content_type="application/base64"
            ),
            tags=scope.tags,
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True),  # deleting it is a data-plane call
        )
        link = private_endpoint(
            f"{name}-vault",
            PrivateLinkArgs(group="vault", zone_name=KEY_VAULT_ZONE, service_id=vault.id, scope=scope),
            parent=self,
        )
        read_access = roles.assign(
            f"{name}-nodes-read-munge-key",
            role="Key Vault Secrets User",
            scope=secret.id,
            principal_id=args.node_principal_id,
            parent=self,
        )
        self.vault_name = vault.name
        self.vault_id = vault.id
        self.munge_secret_name = MUNGE_SECRET_NAME
        self.boot_dependencies = (secret, read_access, link.zone_group)
        self.register_outputs({"vaultName": vault.name, "vaultId": vault.id})

    def _vault(self, name: str, scope: ClusterScope) -> keyvault.Vault:
        """The vault, named ``<cluster>-kv-<6 random characters>``: RBAC, purge protection, no public access."""
        child = pulumi.ResourceOptions(parent=self)
        suffix = random.RandomString(
            f"{name}-kv-suffix", length=6, special=False, upper=False, numeric=True, opts=child
        )
        return keyvault.Vault(
            f"{name}-kv",
            vault_name=suffix.result.apply(lambda s: f"{scope.cluster_name}-kv-{s}"),
            resource_group_name=scope.resource_group_name,
            location=scope.location,
            properties=keyvault.VaultPropertiesArgs(
                tenant_id=scope.tenant_id,
                sku=keyvault.SkuArgs(family=keyvault.SkuFamily.A, name=keyvault.SkuName.STANDARD),
                enable_rbac_authorization=True,
                enable_purge_protection=True,
                enable_soft_delete=True,
                soft_delete_retention_in_days=storage_facts.key_vault_soft_delete_days(),
                public_network_access="Disabled",
                network_acls=keyvault.NetworkRuleSetArgs(
                    default_action=keyvault.NetworkRuleAction.DENY,
                    bypass=keyvault.NetworkRuleBypassOptions.AZURE_SERVICES,
                ),
            ),
            tags=scope.tags,
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True),
        )
