"""The Pulumi program: typed config -> components -> resources.

``infra/__main__.py`` calls :func:`main` under the Pulumi engine; ``gb300 plan`` calls it under the SDK's
mock monitor. Both read the same config and declare the same resources.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
from pulumi_azure_native import authorization, resources

from gb300 import access, config, floors, pools, rules
from gb300 import tags as gb300_tags
from gb300.access import first_login_outputs
from gb300.components import (
    ClusterScope,
    Identity,
    IdentityArgs,
    Network,
    NetworkArgs,
    compute_package,
)
from gb300.components import lustre as lustre_component
from gb300.components import monitoring as monitoring_component
from gb300.components import network as network_component
from gb300.components import storage as storage_component
from gb300.components.head import HeadNode, HeadNodeArgs
from gb300.components.node_common import NodeCommon
from gb300.components.node_payload import NodePayloadArgs, NodePayloads, PayloadSpec
from gb300.components.secrets import ClusterSecrets, ClusterSecretsArgs
from gb300.config import StackConfig, netplan
from gb300.config import secrets as config_secrets
from gb300.errors import ConfigError
from gb300.facts import alerts, egress
from gb300.node import context as node_context
from gb300.node.context import head_hostname
from gb300.node.custom_data import CustomData, render_stack


def keeps_data(cfg: StackConfig) -> bool:
    """Whether the resource group holds a store that is retained (Lustre or the account not in allowReplace)."""
    storage = cfg.storage
    lustre = storage.lustre is not None and "lustre" not in storage.allow_replace
    account = storage.blob is not None and "account" not in storage.allow_replace
    return lustre or account


def build(cfg: StackConfig) -> dict[str, pulumi.Output[str]]:
    """Declare every resource of the cluster described by ``cfg``; returns the stack outputs.

    The placement is said once (:func:`cluster_scope`) and handed to every component; each section below turns
    one part of the config into one component's ``...Args``, in the order the engine registers them.
    """
    scope, deployer_object_id = cluster_scope(cfg)
    subnets = _subnet_plan(cfg)
    net = _network(cfg, scope, subnets)
    scope = scope.with_network(net.ids)
    name = scope.cluster_name
    identity = Identity(f"{name}-node", IdentityArgs(scope))
    secrets = ClusterSecrets(name, ClusterSecretsArgs(scope, node_principal_id=identity.principal_id))
    rendered = render_stack(cfg)
    head_data, pool_data = rendered.head, rendered.pools
    outputs: dict[str, pulumi.Output[str]] = {}
    blob = _blob_store(cfg, scope, identity)
    if cfg.storage.blob is not None:
        outputs["storageAccountName"] = blob.name
    lustre = _lustre(cfg, scope, subnets, blob)
    if lustre is not None:
        outputs["lustreMgsAddress"] = lustre.mgs_address
    payloads = _node_payloads(
        cfg,
        scope,
        identity=identity,
        deployer_object_id=deployer_object_id,
        blob=blob,
        rendered=rendered.all,
    )
    outputs["nodePayloadUrl"] = payloads.url
    monitoring = _monitoring(cfg, scope, identity)
    if monitoring.remote_write_url is not None:
        outputs["prometheusRemoteWriteUrl"] = monitoring.remote_write_url
    node = _node_common(
        cfg, scope, identity=identity, secrets=secrets, payloads=payloads, monitoring=monitoring, outputs=outputs
    )
    head = _head(cfg, node, payloads, head_data)
    compute_provider = compute_package.provider_from_stack(f"{name}-compute")
    pools.gpu_pools(cfg, node, payloads, pool_data, compute_provider)
    pools.cpu_pools(cfg, node, payloads, rendered.cpu_pools, compute_provider)
    login = access.login_pool(cfg, node, payloads, rendered.login)
    if login is not None:
        outputs.update(access.login_outputs(login, scope.resource_group_name, net.bastion_name))
    return {
        **first_login_outputs(cfg, scope.resource_group_name, net.bastion_name, head.vm_id),
        "resourceGroupName": pulumi.Output.from_input(scope.resource_group_name),
        "vnetId": net.vnet_id,
        "nodeIdentityId": identity.id,
        "keyVaultName": secrets.vault_name,
        "headPrivateIp": head.private_ip,
        "nodeIdentityClientId": identity.client_id,
        **outputs,
    }


def cluster_scope(cfg: StackConfig) -> tuple[ClusterScope, pulumi.Output[str]]:
    """The cluster's resource group and the scope every component is placed in (its network comes later:
    :meth:`ClusterScope.with_network`); and the deployer's object id."""
    name = cfg.cluster.name
    # Deleting a resource group deletes everything in it, retained stores included: while it holds one, the group
    # is protected and retained too, so neither `pulumi destroy` nor a replacement of the group deletes it.
    keep = keeps_data(cfg)
    rg = resources.ResourceGroup(
        f"{name}-rg",
        resource_group_name=f"{name}-rg",
        location=cfg.cluster.location,
        tags=cfg.tags,
        opts=pulumi.ResourceOptions(protect=keep, retain_on_delete=keep),
    )
    # The deployer's tenant, subscription and object id.
    client = authorization.get_client_config_output()
    scope = ClusterScope(
        cluster_name=name,
        resource_group_name=rg.name,
        resource_group_id=rg.id,
        location=cfg.cluster.location,
        subscription_id=client.subscription_id,
        tenant_id=client.tenant_id,
        zone=cfg.cluster.zone,
        tags=cfg.tags,
        hub_zone_ids=cfg.network.private_dns_zones.ids(),
    )
    return scope, client.object_id


def _subnet_plan(cfg: StackConfig) -> list[netplan.SubnetPlan]:
    """The subnets carved from ``gb300:network.addressSpace`` for the stack's GPU VMs (and CPU pools' VMs, in the same
    subnet)."""
    lustre = cfg.storage.lustre
    return network_component.plan_subnets(
        cfg.network.address_space,
        gpu_vms=sum(p.vms for p in cfg.gpu_pools) + node_context.cpu_vms(cfg),
        bastion=cfg.network.bastion,
        storage_prefix=lustre.subnet_prefix if lustre is not None else None,
        gpu_prefix=cfg.network.gpu_subnet_prefix_length,
    )


def _network(cfg: StackConfig, scope: ClusterScope, subnets: list[netplan.SubnetPlan]) -> Network:
    """``gb300:network`` and ``gb300:access.sshSourceRanges``: the VNet (or the landing zone's), subnets, egress."""
    gpu_vms = sum(p.vms for p in cfg.gpu_pools) + node_context.cpu_vms(cfg)
    return Network(
        scope.cluster_name,
        NetworkArgs(
            scope=scope,
            address_space=cfg.network.address_space,
            subnets=subnets,
            ssh_source_ranges=list(cfg.access.ssh_source_ranges),
            nat_gateway=cfg.network.egress_via == "nat-gateway",
            # The pools' nodes and the head egress through the gateway (Lustre's few flows are Azure's own).
            nat_public_ips=egress.nat_sizing().gateway_ips(gpu_vms + 1),
            bastion=cfg.network.bastion,
            existing_vnet=_existing_vnet(cfg),
            firewall_ip=cfg.network.egress.next_hop_ip if cfg.network.egress_via == "firewall" else None,
        ),
    )


def _blob_settings(cfg: StackConfig) -> config.BlobSettings:
    """``gb300:storage.blob``, or its defaults for the data account every stack has."""
    return cfg.storage.blob if cfg.storage.blob is not None else config.BlobSettings()


def _blob_store(cfg: StackConfig, scope: ClusterScope, identity: Identity) -> storage_component.BlobStore:
    """The data account every stack has (closed; with ``gb300:storage.blob`` it holds the data containers): its blob
    zone serves the payload account's private endpoint too."""
    storage = cfg.storage
    blob_cfg = storage.blob
    settings = _blob_settings(cfg)
    tie = storage.lustre_tie
    return storage_component.BlobStore(
        f"{scope.cluster_name}-blob",
        storage_component.BlobStoreArgs(
            scope=scope,
            account_name=settings.account_name,
            containers=[storage_component.ContainerAccess(c.name, c.access) for c in blob_cfg.containers]
            if blob_cfg is not None
            else [],
            node_principal_id=identity.principal_id,
            soft_delete_days=settings.soft_delete_days,
            hierarchical_namespace=settings.hierarchical_namespace,
            versioning=settings.versioning,
            previous_version_retention_days=settings.previous_version_retention_days,
            # Without gb300:storage.blob the account holds nothing that cannot be made again.
            allow_replace="account" in storage.allow_replace or blob_cfg is None,
            allow_replace_containers="containers" in storage.allow_replace,
            lustre=storage_component.LustreServiceAccess(
                principal_id=tie.service_principal_id or "", logging_container=tie.logging_container
            )
            if tie is not None
            else None,
        ),
    )


def _lustre(
    cfg: StackConfig, scope: ClusterScope, subnets: list[netplan.SubnetPlan], blob: storage_component.BlobStore
) -> lustre_component.Lustre | None:
    """``gb300:storage.lustre`` (with its checkpoint sizing and its tie to Blob), or None."""
    storage = cfg.storage
    if storage.lustre is None:
        return None
    checkpoint = storage.checkpoint
    tie = storage.lustre_tie
    return lustre_component.Lustre(
        f"{scope.cluster_name}-lustre",
        lustre_component.LustreArgs(
            scope=scope,
            sku=storage.lustre.sku,
            capacity_tib=storage.lustre.capacity_ti_b,
            maintenance_day=storage.lustre.maintenance_window.day_of_week,
            maintenance_time_utc=storage.lustre.maintenance_window.time_of_day_utc,
            allow_replace="lustre" in storage.allow_replace,
            trusted_client_cidrs=tuple(s.prefix for s in subnets if s.role in netplan.LUSTRE_CLIENT_ROLES),
            checkpoint_parameters=checkpoint.parameters if checkpoint else None,
            checkpoint_minutes=checkpoint.budget_minutes if checkpoint else None,
            checkpoint_bytes_per_parameter=checkpoint.bytes_per_parameter if checkpoint else None,
            checkpoint_interval_minutes=checkpoint.interval_minutes if checkpoint else None,
            blob=lustre_component.LustreBlobArgs(
                container_id=blob.container_ids[tie.container],
                logging_container_id=blob.container_ids[tie.logging_container],
                import_prefix=tie.import_prefix,
                export_prefix=tie.export_prefix,
                ready=tuple(blob.lustre_ready),
            )
            if tie is not None
            else None,
        ),
    )


def _node_payloads(
    cfg: StackConfig,
    scope: ClusterScope,
    *,
    identity: Identity,
    deployer_object_id: pulumi.Output[str],
    blob: storage_component.BlobStore,
    rendered: Sequence[CustomData],
) -> NodePayloads:
    """``gb300:storage.nodePayload``: the payload account, and the upload of every role's rendered payload."""
    settings = cfg.storage.node_payload
    return NodePayloads(
        f"{scope.cluster_name}-payload",
        NodePayloadArgs(
            scope=scope,
            container=settings.container,
            payloads=[PayloadSpec(d.name, d.payload.sha256, d.role) for d in rendered],
            node_principal_id=identity.principal_id,
            deployer_principal_id=deployer_object_id,
            deployer_principal_type=None
            if settings.deployer_principal_type == "none"
            else settings.deployer_principal_type,
            blob_zone_id=blob.zone_ids["blob"],
            soft_delete_days=_blob_settings(cfg).soft_delete_days,
            upload_source_ranges=tuple(settings.upload_source_ranges),
            public=settings.is_public(landing_zone=cfg.network.existing_vnet_id is not None),
        ),
    )


def _monitoring(cfg: StackConfig, scope: ClusterScope, identity: Identity) -> monitoring_component.Monitoring:
    """``gb300:monitoring``: logs, Prometheus, Grafana and alerts, each as the stack turns it on."""
    mon = cfg.monitoring
    return monitoring_component.Monitoring(
        f"{scope.cluster_name}-mon",
        monitoring_component.MonitoringArgs(
            scope=scope,
            node_principal_id=identity.principal_id,
            logs=mon.logs.enabled,
            retention_days=mon.logs.retention_days,
            prometheus=mon.prometheus.enabled,
            grafana=mon.grafana.enabled,
            alerts=mon.alerts.enabled,
            alert_emails=tuple(mon.alerts.emails),
            # Secrets, always: a webhook URL carries its receiver's token (gb300.config.secrets).
            alert_webhooks=tuple(config_secrets.as_secret_input(url) for url in mon.alerts.webhooks),
            bootstrap_alert_severity=mon.logs.bootstrap_alert.severity if mon.logs.bootstrap_alert.enabled else None,
            existing_workspace=_existing_workspace(cfg),
            existing_monitor_workspace_id=mon.prometheus.existing_workspace_id,
            grafana_shared_read=mon.grafana.shared_workspace_read,
            rule_values=mon.alerts.goodput.rule_values(max((p.sku.gpus for p in cfg.gpu_pools), default=0)),
            left_out_rule_groups=frozenset() if mon.alerts.goodput.enabled else frozenset({alerts.GOODPUT_ALERTS}),
        ),
    )


def _node_common(
    cfg: StackConfig,
    scope: ClusterScope,
    *,
    identity: Identity,
    secrets: ClusterSecrets,
    payloads: NodePayloads,
    monitoring: monitoring_component.Monitoring,
    outputs: Mapping[str, pulumi.Output[str]],
) -> NodeCommon:
    """What every VM shares: the login, the identity, the node tags, what first boot reads, where logs go."""
    # Nodes learn deploy-time values from their own tags (IMDS), so custom data holds no secret and does not
    # change when a generated name does: the vault, the identity, and Lustre, Blob and Prometheus when deployed.
    # The payload account's name is the exception: fetch-payload sends a token there, so it comes from the custom
    # data (deterministic for a deployed stack), never from a tag (docs/node-payload.md).
    node_tags: dict[str, pulumi.Input[str]] = gb300_tags.node(
        scope.tags,
        keyvault=secrets.vault_name,
        node_client_id=identity.client_id,
        lustre_mgs=outputs.get("lustreMgsAddress"),
        blob_account=outputs.get("storageAccountName"),
        prom_write=outputs.get("prometheusRemoteWriteUrl"),
    )
    return NodeCommon(
        scope=scope,
        admin_username=cfg.access.admin_username,
        ssh_public_key=cfg.access.ssh_public_key,
        identity_id=identity.id,
        tags=node_tags,
        boot_dependencies=(*secrets.boot_dependencies, *payloads.boot_dependencies),
        monitoring=monitoring,
    )


def _head(cfg: StackConfig, node: NodeCommon, payloads: NodePayloads, head_data: CustomData) -> HeadNode:
    """``gb300:head`` and ``gb300:access.loginPublicIp``: the head VM, with the remediation identity when the loop
    is on."""
    scope = node.scope
    # gb300:remediation: the loop on the head signs in as an identity of its own, holding only the operator's role.
    heal = None
    if cfg.remediation.enabled and cfg.remediation.role_definition_id is not None:
        heal = Identity(
            f"{scope.cluster_name}-heal",
            IdentityArgs(scope, role_definition_id=cfg.remediation.role_definition_id),
        )
    return HeadNode(
        head_hostname(cfg),
        HeadNodeArgs(
            node=node,
            vm_size=cfg.head.vm_size,
            image=cfg.head.image,
            os_disk_size_gb=cfg.head.os_disk_size_gb,
            state_disk_size_gb=cfg.head.state_disk_size_gb,
            custom_data=payloads.account_name.apply(head_data.for_account),
            custom_data_sha256=head_data.sha256,
            public_ip=cfg.access.login_public_ip,
            heal_identity_id=heal.id if heal is not None else None,
            heal_client_id=heal.client_id if heal is not None else None,
        ),
    )


def _existing_vnet(cfg: StackConfig) -> network_component.ExistingVnet | None:
    """``gb300:network.existingVnetId`` as the network component takes it, or None."""
    vnet, vnet_id = cfg.network.existing_vnet, cfg.network.existing_vnet_id
    if vnet is None or vnet_id is None:
        return None
    return network_component.ExistingVnet(vnet_id, vnet.resource_group, vnet.name)


def _existing_workspace(cfg: StackConfig) -> monitoring_component.ExistingWorkspace | None:
    """``gb300:monitoring.existingLogAnalyticsWorkspaceId`` as the monitoring component takes it, or None."""
    mon = cfg.monitoring
    ws, ws_id = mon.existing_log_analytics_workspace, mon.existing_log_analytics_workspace_id
    if ws is None or ws_id is None:
        return None
    return monitoring_component.ExistingWorkspace(ws_id, ws.resource_group, ws.name)


def read_config() -> StackConfig:
    """The stack's ``gb300`` namespace from the Pulumi engine, validated as ``gb300 plan`` validates it: the
    config itself, and ``gb300:policy.suppress`` against the rule registry (an unknown rule id, or a security rule
    suppressed without a reason, fails ``pulumi preview``/``up`` as it fails the plan)."""
    values: dict[str, str] = {}
    values.update(pulumi.runtime.config.get_config_env())
    values.update(pulumi.runtime.config.CONFIG.get())
    cfg = config.parse(config.from_pulumi_config(values))
    problems = rules.unknown_suppressions(cfg.policy)
    if problems:
        raise ConfigError(problems)
    return cfg


def drop_version_aliases(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
    """A stack transformation that registers every typed azure-native resource without its alias list.

    The typed classes add one alias per older API-version type token (60 for each network resource, 9 for each
    rack's data collection rule association); the SDK turns each into an alias URN as the resource is constructed
    (pulumi/pulumi#10010), after the stack's transformations and before any transform that runs in the engine.
    Kept, they doubled the CPU and memory of a 1,388-rack plan (docs/scale.md). They matter only to a state that
    holds a resource under one of those versioned tokens, and gb300 has only ever declared the unversioned ones.
    Only those version aliases of ``azure-native:`` resources go (an alias that names nothing but another type);
    an alias gb300 gives itself (a rack's logs association keeps its URN from before racks were components:
    another name and parent) stays.
    """
    if not args.opts.aliases or not args.type_.startswith("azure-native:"):
        return None
    kept = [a for a in args.opts.aliases if not _version_alias(a)]
    if len(kept) == len(args.opts.aliases):
        return None
    opts = args.opts._copy()
    opts.aliases = kept or None
    return pulumi.ResourceTransformationResult(args.props, opts)


def _version_alias(alias: object) -> bool:
    """An alias the typed classes add: another type token and nothing else (name, parent, stack, project unset)."""
    unset: tuple[object, ...] = (None, ...)  # pulumi.Alias leaves an unset field as Ellipsis
    fields: dict[str, object] = vars(alias) if isinstance(alias, pulumi.Alias) else {}
    return (
        bool(fields)
        and fields.get("type_") not in unset
        and all(fields.get(k) in unset for k in ("name", "parent", "stack", "project"))
    )


def main(parsed: StackConfig | None = None) -> None:
    """Entry point under the Pulumi engine or the plan's mocks. ``parsed``: the stack config the plan has already
    read and validated from the same values (:func:`gb300.plan.runner.register`), so one plan parses it once."""
    too_old = floors.package_problems()
    if too_old:  # before anything calls an SDK that lacks what gb300 uses (data/floors.yaml)
        raise pulumi.RunError("\n".join(too_old))
    try:
        cfg = read_config() if parsed is None else parsed
    except ConfigError as exc:
        raise pulumi.RunError(f"invalid stack configuration:\n{exc}") from None
    pulumi.runtime.register_stack_transformation(drop_version_aliases)
    for key, value in build(cfg).items():
        pulumi.export(key, value)
