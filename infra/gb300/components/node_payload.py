"""The node payloads: a storage account of their own, and the upload that fills it (docs/node-payload.md).

The payload account holds nothing but signed node payloads, so it may face the deploy job: the shipped deploy
jobs run on hosted runners outside the VNet (GitHub-hosted, Azure DevOps hosted agents), which no private endpoint
serves. It takes Entra ID only (``allowSharedKeyAccess: false``, ``defaultToOAuthAuthentication``), no anonymous
access, TLS 1.2; its public endpoint accepts any address (default action Allow), or the addresses of
``gb300:storage.nodePayload.uploadSourceRanges`` only; in a landing zone (or with ``publicAccess: false``) it is
closed and the deploy job reaches the account through its private endpoint. Nodes reach it through a blob private
endpoint in the VNet, resolved by the ``privatelink.blob`` zone the data account's endpoint already links, and read
the payload container only (Storage Blob Data Reader); the deployer writes it (Storage Blob Data Contributor).

The upload is not azure-native's ``storage:Blob``: that resource signs every data-plane call with the account key
it fetches by ListKeys (pulumi/pulumi-azure-native ``provider/pkg/resources/customresources/
custom_storage_azidentity.go``: ``newBlobClient`` -> ``blobClientDependencies`` -> ``newSharedKeyCredential`` ->
``NewClientWithSharedKeyCredential``), which an account without shared keys refuses. It is a pulumi-command
``local.Command`` running ``gb300 payload publish`` with the project's own credential (the ``ARM_*`` variables
azure-native reads, :mod:`gb300.azure.credential`) and the signing key from the engine's environment (the command
provider runs it with ``os.Environ()`` plus its ``environment``: pulumi/pulumi-command
``provider/pkg/provider/local/commandOutputs.go``). Its command line holds only deterministic values (stack name,
account URL, each payload's name and sha256), so it runs again exactly when a payload changes (``triggers``): the
uploader renders the payloads from the same stack file and refuses to publish bytes whose sha256 differs.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
from pulumi_azure_native import storage
from pulumi_command import local

from gb300 import paths
from gb300 import tags as gb300_tags
from gb300.components.private_link import PrivateLinkArgs, endpoint_in_zone
from gb300.components.scope import ClusterScope
from gb300.components.storage import ip_rules, soft_deleting_blob_service, storage_account
from gb300.config import stacks
from gb300.facts import roles, storage_facts

READER = "Storage Blob Data Reader"
WRITER = "Storage Blob Data Contributor"


@dataclass(frozen=True)
class PayloadSpec:
    """One payload to publish: its name (``head``, ``gpu-<pool>``), its archive's sha256 and the role it boots."""

    name: str
    sha256: str
    role: str


def payload_account_name(cluster_name: str, location: str, subscription_id: str) -> str:
    """``<cluster>pl<8 hex>`` (<= 24 chars): from the subscription, cluster name and region, as the data account's
    name is, so it is the same on every run of one stack in one subscription and differs between subscriptions."""
    seed = f"gb300/{subscription_id.lower()}/{cluster_name}/{location}/node-payload"
    return f"{cluster_name.replace('-', '')}pl{hashlib.sha256(seed.encode()).hexdigest()[:8]}"


def network_access(ranges: Sequence[str], *, public: bool = True) -> storage.NetworkRuleSetArgs:
    """The payload account's public endpoint: any address, or ``ranges`` only; none when not ``public``. Entra ID is
    required either way."""
    if not public:
        return storage.NetworkRuleSetArgs(default_action=storage.DefaultAction.DENY, bypass="None")
    if not ranges:
        return storage.NetworkRuleSetArgs(default_action=storage.DefaultAction.ALLOW, bypass="None")
    return storage.NetworkRuleSetArgs(
        default_action=storage.DefaultAction.DENY, bypass="None", ip_rules=ip_rules(tuple(ranges))
    )


def publish_command(stack: str, account_url: str, container: str, payloads: Sequence[PayloadSpec]) -> str:
    """The uploader's command line: deterministic, free of secrets. pulumi-command runs it with ``/bin/sh -c`` in
    its provider's working directory, which the engine sets to the program's directory (Pulumi.yaml's ``main``:
    ``infra/``, :func:`gb300.paths.engine_pwd`), not the repository root; so the project's Python (Pulumi.yaml's
    ``virtualenv``) and the stack file are named relative to that directory (``../.venv/bin/python``,
    ``../stacks/Pulumi.<stack>.yaml``), never absolute (the command line is stored in the state)."""
    venv = paths.project_virtualenv()
    python = paths.from_engine_pwd(venv / "bin" / "python") if venv else "python3"
    stack_file = paths.from_engine_pwd(stacks.stack_file(stack))
    words = [python, "-m", "gb300.cli", "payload", "publish", "--stack-file", stack_file]
    words += ["--account-url", account_url, "--container", container]
    for payload in payloads:
        words += ["--expect", f"{payload.name}={payload.sha256}"]
    return shlex.join(words)


@dataclass(frozen=True)
class NodePayloadArgs:
    """Inputs of :class:`NodePayloads`: the scope (with its network: the nodes' endpoint goes in its endpoints subnet)
    and what to publish."""

    scope: ClusterScope
    container: str
    payloads: Sequence[PayloadSpec]
    node_principal_id: pulumi.Input[str]
    deployer_principal_id: pulumi.Input[str]
    deployer_principal_type: str | None
    """``User`` or ``ServicePrincipal``: who runs ``pulumi up``; None grants the deployer nothing."""
    blob_zone_id: pulumi.Input[str]
    """The VNet's ``privatelink.blob`` zone (the data account's component declares it)."""
    soft_delete_days: int
    """Blob and container soft delete (``gb300:storage.blob.softDeleteDays``): a deleted payload is recoverable."""
    upload_source_ranges: Sequence[str] = ()
    public: bool = True
    """The public endpoint is open (Entra ID only); False: public network access disabled, private endpoint only."""
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)


class NodePayloads(pulumi.ComponentResource):
    """The payload account, its container, private endpoint and role assignments, and the upload."""

    account_name: pulumi.Output[str]
    url: pulumi.Output[str]
    upload: local.Command
    reader: pulumi.Resource

    @property
    def boot_dependencies(self) -> tuple[pulumi.Resource, ...]:
        """What a node's first boot reads here: the published payloads and the nodes' read grant."""
        return (self.upload, self.reader)

    def __init__(self, name: str, args: NodePayloadArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gb300:compute:NodePayloads", name, None, opts)
        scope = args.scope
        account_name = pulumi.Output.from_input(scope.subscription_id).apply(
            lambda sub: payload_account_name(scope.cluster_name, scope.location, sub)
        )
        container = self._account(name, args, account_name)
        self.reader = roles.assign(
            f"{name}-nodes", role=READER, scope=container.id, principal_id=args.node_principal_id, parent=self
        )
        uploads_after = self._deployer_access(name, args, container)
        # The name as computed, not the resource's output: known in a preview before the account exists, so the custom
        # data (and the size and reimage rules that read it) is known too. The upload waits for the account through
        # its dependencies.
        self.account_name = account_name
        account_url = account_name.apply(storage_facts.blob_account_url)
        self.url = pulumi.Output.concat(account_url, "/", args.container)
        stack = pulumi.get_stack()
        self.upload = local.Command(
            f"{name}-publish",
            create=account_url.apply(lambda url: publish_command(stack, url, args.container, args.payloads)),
            triggers=[p.sha256 for p in args.payloads],
            opts=pulumi.ResourceOptions(parent=self, depends_on=uploads_after),
        )
        self.register_outputs({"url": self.url, "accountName": self.account_name})

    def _account(self, name: str, args: NodePayloadArgs, account_name: pulumi.Output[str]) -> storage.BlobContainer:
        """The payload account, its blob service, the nodes' private endpoint to it; returns the payload container."""
        scope = args.scope
        account = storage_account(
            f"{name}-account",
            account_name=account_name,
            scope=scope,
            purpose=gb300_tags.STORAGE_PURPOSE_NODE_PAYLOAD,
            public_network_access="Enabled" if args.public else "Disabled",
            network_rule_set=network_access(args.upload_source_ranges, public=args.public),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on)),
        )
        service = soft_deleting_blob_service(
            f"{name}-blob-service", account, scope, args.soft_delete_days, pulumi.ResourceOptions(parent=self)
        )
        container = storage.BlobContainer(
            f"{name}-container",
            container_name=args.container,
            account_name=account.name,
            resource_group_name=scope.resource_group_name,
            public_access=storage.PublicAccess.NONE,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[service]),
        )
        endpoint_in_zone(
            f"{name}-blob",
            PrivateLinkArgs(
                group="blob", zone_name=storage_facts.private_link_zones()["blob"], service_id=account.id, scope=scope
            ),
            args.blob_zone_id,
            parent=self,
        )
        return container

    def _deployer_access(
        self, name: str, args: NodePayloadArgs, container: storage.BlobContainer
    ) -> list[pulumi.Resource]:
        """The deployer's write access to the container (unless ``deployer_principal_type`` is None); returns what
        the upload waits for: the container and that access."""
        uploads_after: list[pulumi.Resource] = [container]
        if args.deployer_principal_type is not None:
            uploads_after.append(
                roles.assign(
                    f"{name}-deployer",
                    role=WRITER,
                    scope=container.id,
                    principal_id=args.deployer_principal_id,
                    parent=self,
                    principal_type=args.deployer_principal_type,
                )
            )
        return uploads_after
