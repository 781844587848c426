"""The stack configuration contract (namespace ``gb300``), as typed, validated models.

A stack file's ``config:`` block becomes a :class:`StackConfig`. Every problem is reported at once,
one line per key path (``gb300:gpuPools[0].racks: must be at least 1 (got 0)``), via
:class:`gb300.errors.ConfigError`. Syntax and ranges live here; checks that need the declared
resources (subnet room, quota, rack alignment) are rules in :mod:`gb300.rules`. The storage models are in
:mod:`gb300.config.storage`; every model derives from :class:`gb300.config.base.ConfigModel`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from gb300 import tags as gb300_tags
from gb300.config.base import ConfigModel
from gb300.config.checks import (
    _check_address_space,
    _check_cidr,
    _check_email,
    _check_gpu_size,
    _check_image,
    _check_imds_user,
    _check_location,
    _check_name,
    _check_pool_name,
    _check_reason,
    _check_resource_id,
    _check_size,
    _check_ssh_limit,
    _check_ssh_public_key,
    _check_tag_key,
    _check_username,
    _check_webhook,
    _PathError,
    _suppression_from_text,
    _zone_to_str,
)
from gb300.config.remediation import RemediationSettings
from gb300.config.secrets import StackSecret
from gb300.config.storage import StorageSettings
from gb300.config.text import text_limit
from gb300.facts import catalog

Name = Annotated[str, Field(min_length=1, max_length=12), AfterValidator(_check_name)]
PoolName = Annotated[str, Field(min_length=1, max_length=10), AfterValidator(_check_pool_name)]
Cidr = Annotated[str, Field(max_length=len("255.255.255.255/32")), BeforeValidator(_check_cidr)]
UserName = Annotated[str, Field(max_length=32)]  # Linux's LOGIN_NAME_MAX less the NUL; the checks hold the form
Zone = Annotated[Literal["1", "2", "3"], BeforeValidator(_zone_to_str)]
TagKey = Annotated[str, Field(min_length=1, max_length=512, pattern=r"^[^<>%&\\?/]+$"), AfterValidator(_check_tag_key)]
TagValue = Annotated[str, Field(max_length=256)]
AzureName = Annotated[str, Field(max_length=text_limit("azureName"))]
ImageReference = Annotated[str, Field(max_length=text_limit("imageReference"))]


class ClusterSettings(ConfigModel):
    """``gb300:cluster``: identity, region and tags of the cluster."""

    name: Name
    """1-12 lowercase letters, digits, single hyphens; starts with a letter. Prefixes every Azure name."""
    location: Annotated[AzureName, AfterValidator(_check_location)]
    """Azure region, e.g. `eastus2`; names outside `data/platform.yaml` `azureRegions` are refused with a "did you
    mean". GB300 availability is a question for Azure's Resource SKUs API.
    """
    zone: Zone | None = None
    """Availability zone of NAT, Lustre and the GPU pools' scale sets (their ARM `zones`)."""
    tags: dict[TagKey, TagValue] = Field(default_factory=dict)
    """Tags on every taggable resource, plus gb300's own two: the cluster's name and gb300 as its manager (the keys
    are in `infra/gb300/tags.py`). Azure's limits are checked: at most 36 (50 per resource less 14 for gb300's
    own), names up to 128 characters without the prefixes `azure`, `microsoft`, `windows`, values up to 256. The keys
    gb300 writes itself (every key in `infra/gb300/tags.py`, such as the role and the manager, and any other key
    with the `gb300-` prefix) are refused, compared without case as Azure does: a stack's tag must not say what
    gb300's own tags say.
    """

    @model_validator(mode="after")
    def _not_gb300_keys(self) -> ClusterSettings:
        own = {k.lower() for k in gb300_tags.ALL}
        for key in self.tags:
            if key.lower() in own or key.lower().startswith(gb300_tags.PREFIX):
                raise _PathError(
                    ("cluster", "tags", key),
                    f"is a tag key gb300 writes itself (got {key!r}; gb300's keys are in infra/gb300/tags.py, and "
                    f"every key starting {gb300_tags.PREFIX!r} is gb300's): the components, rules and nodes read it. "
                    "Choose another key",
                )
        return self

    @model_validator(mode="after")
    def _tag_count(self) -> ClusterSettings:
        limits = catalog.load()
        most = int(limits.limit("maxTagsPerResource")) - int(limits.limit("gb300TagReserve"))
        if len(self.tags) > most:
            raise _PathError(
                ("cluster", "tags"),
                f"must hold at most {most} tags (got {len(self.tags)}): Azure allows "
                f"{limits.limit('maxTagsPerResource')} per resource and gb300 adds up to "
                f"{limits.limit('gb300TagReserve')} of its own",
            )
        return self


class AccessSettings(ConfigModel):
    """``gb300:access``: who may log in, and from where."""

    admin_username: Annotated[UserName, AfterValidator(_check_username)] = "azureuser"
    """Linux admin user; Azure's reserved names (root, admin, ...) are refused."""
    ssh_public_key: Annotated[str, Field(max_length=text_limit("sshPublicKey")), AfterValidator(_check_ssh_public_key)]
    """One OpenSSH public key on one line, `ssh-ed25519` or `ssh-rsa` (2048 bits or more, counted from the modulus); a
    second line, control characters or `authorized_keys` options are refused. Password login is always off.
    """
    ssh_source_ranges: list[Cidr] = Field(default_factory=list)
    """CIDRs that may reach SSH on the login node; empty = only from inside the VNet / Bastion."""
    login_public_ip: bool = False
    """Give the login node a public IP (only allowed together with `sshSourceRanges`)."""
    imds_allowed_users: Annotated[list[Annotated[UserName, AfterValidator(_check_imds_user)]], Field(max_length=16)] = (
        Field(default_factory=list)
    )
    """Service users besides root and the monitoring agents' own users that may reach the instance metadata service,
    hence the node identity's token, on every node: Linux user names, at most 16; root is always allowed
    (docs/security.md, "Node secrets").
    """


class NetworkSettings(ConfigModel):
    """``gb300:network``: the address space the toolkit carves its subnets from."""

    address_space: Annotated[Cidr, AfterValidator(_check_address_space)] = "10.40.0.0/16"
    """A CIDR: the VNet's space; gb300 carves `gpu`, `head`, `storage`, `endpoints` and `AzureBastionSubnet` from it.
    Must be private (RFC 1918 or RFC 6598 `100.64.0.0/10`) and must not overlap 172.16.0.0/16 (Azure's RDMA network).
    """
    bastion: bool = True
    """Azure Bastion (Standard, tunnelling on) for SSH without public IPs."""
    nat_gateway: bool = True
    """NAT gateway for egress of the GPU, head and Lustre (`storage`) subnets; default outbound access is off, and Azure
    Managed Lustre needs to reach Azure services (docs/azure-resources.md#lustre-subnet-egress-and-nsg-rules).
    Its public IPs are sized from the node count, up to 16
    (docs/azure-resources.md#nat-egress-public-ips-sized-from-the-node-count).
    """
    gpu_subnet_prefix_length: Annotated[int, Field(ge=8, le=29, strict=True)] | None = None
    """Size of the GPU subnet, the last block of the space (e.g. `20` = 4,091 VMs); unset = the upper half of the space.
    It never depends on the racks, so adding racks moves no subnet (docs/day2.md); changing it moves the subnet,
    which `gb300 plan --state` refuses.
    """


class GpuPool(ConfigModel):
    """One entry of ``gb300:gpuPools``: one InfiniBand fabric of whole NVLink domains (racks)."""

    name: PoolName
    """1-10 lowercase letters/digits; becomes the Slurm partition and part of host names. `head`, `node`, `mon`,
    `lustre`, `blob`, `rg` are refused: gb300 names its own resources so (docs/engine-contract.md).
    """
    vm_size: Annotated[AzureName, AfterValidator(_check_gpu_size)] = "Standard_ND128isr_GB300_v6"
    """A GPU size from the catalog (GB300, GB200, H100, H200)."""
    racks: Annotated[int, Field(ge=1, strict=True)]
    """NVLink domains: NVL72 racks of 18 VMs for GB sizes (VMs = racks x 18); single VMs for H100/H200. At most what
    one InfiniBand fabric spans (`data/skus.yaml` `fabricModels`: `maxRacksPerFabric` racks for GB sizes, the
    on-request `maxVmsPerFabric` VMs for H100/H200), refused before any resource is declared; more is more pools.
    """
    image: Annotated[ImageReference, AfterValidator(_check_image)] = (
        "microsoft-dsvm:ubuntu-hpc:2404-gb:24.04.2026052801"
    )
    """Marketplace URN `publisher:offer:sku:version` or an image resource id. Pin a version
    `infra/gb300/data/images.yaml` knows (rule `image-version-pinned`).
    """
    os_disk_size_gb: Annotated[int, Field(ge=64, le=4095, strict=True)] = Field(256, alias="osDiskSizeGB")
    """OS disk size in GB (Premium SSD)."""
    capacity_reservation_group_id: (
        Annotated[str, Field(max_length=text_limit("resourceId")), AfterValidator(_check_resource_id)] | None
    ) = None
    """Resource id of a capacity reservation group to target; the quota check then skips cores (the reservation holds
    them).
    """
    interconnect_blocks: Annotated[bool, Field(strict=True)] = False
    """Give each rack a zonal `Microsoft.Compute/interconnectBlocks` (its capacity, in the pool's interconnect group)
    that its scale set names; GB sizes only. Must stay `false` for now: whether azure-native's compute 2026-03-01
    package (what racks are declared with) has the interconnect block resource is not verified. Azure's GB300 tests
    say blocks are not needed with dedicated quota (docs/fabric.md).
    """
    retired_racks: list[Annotated[int, Field(ge=1, strict=True)]] = Field(default_factory=list)
    """Rack numbers `1..racks` not deployed: retire a failed rack (`[5]` deletes `<cluster>-<pool>-r0005` only) without
    renumbering the others; GB sizes only (docs/day2.md).
    """

    @model_validator(mode="after")
    def _racks_within_one_fabric(self) -> GpuPool:
        sku = self.sku
        if sku.fabric_model is None:
            return self
        fabric = catalog.load().fabric_for(sku)
        if fabric.max_racks_per_fabric is not None and sku.is_rack_scale:
            most, fact = int(fabric.max_racks_per_fabric.value), fabric.max_racks_per_fabric
            unit = "racks"
        elif fabric.max_vms_per_fabric is not None:
            most = int(fabric.max_vms_on_request or fabric.max_vms_per_fabric.value) // sku.vms_per_nvlink_domain
            fact, unit = fabric.max_vms_per_fabric, "VMs (on request to Azure)"
        else:
            return self
        if self.racks > most:
            raise _PathError(
                ("racks",),
                f"must be at most {most:,} (got {self.racks:,}): one pool is one InfiniBand fabric, and one fabric "
                f"of {sku.name} (model {fabric.name}) spans at most {most:,} {unit} (data/skus.yaml, {fact.status}: "
                f"{fact.source}). Split the racks into several pools, each its own fabric",
                relative=True,
            )
        return self

    @model_validator(mode="after")
    def _blocks_available(self) -> GpuPool:
        fabric = catalog.load().fabric_for(self.sku) if self.interconnect_blocks else None
        if fabric is not None and not fabric.interconnect_blocks_available:
            raise _PathError(
                ("interconnectBlocks",),
                f"must be false: racks are declared at Compute API {fabric.scale_set_api_version.value} through "
                "azure-native's local package, whose interconnect block is not yet verified (got true). Remove the "
                "key; Azure's GB300 tests run without blocks on dedicated quota (docs/fabric.md).",
                relative=True,
            )
        return self

    @model_validator(mode="after")
    def _retired_within_racks(self) -> GpuPool:
        seen: set[int] = set()
        if self.retired_racks and catalog.load().fabric_for(self.sku).scale_set_per != "rack":
            raise _PathError(
                ("retiredRacks",),
                f"applies only to VM sizes with one scale set per rack (GB300, GB200); {self.vm_size} pools are "
                "one scale set: lower racks instead",
                relative=True,
            )
        for i, index in enumerate(self.retired_racks):
            if index > self.racks:
                raise _PathError(
                    ("retiredRacks", i),
                    f"must be a rack number from 1 to racks ({self.racks}) (got {index}); racks counts every "
                    "rack number ever used, retired ones included",
                    relative=True,
                )
            if index in seen:
                raise _PathError(("retiredRacks", i), f"duplicates another entry (got {index})", relative=True)
            seen.add(index)
        if len(seen) >= self.racks:
            raise _PathError(
                ("retiredRacks",), f"must leave at least one rack in service (got all {self.racks})", relative=True
            )
        return self

    @property
    def sku(self) -> catalog.Sku:
        return catalog.load().sku(self.vm_size)

    @property
    def rack_indices(self) -> list[int]:
        """The rack numbers in service: 1..racks without the retired ones (names never renumber)."""
        retired = set(self.retired_racks)
        return [i for i in range(1, self.racks + 1) if i not in retired]

    @property
    def vms(self) -> int:
        return len(self.rack_indices) * self.sku.vms_per_nvlink_domain


class HeadSettings(ConfigModel):
    """``gb300:head``: the Slurm controller and login node."""

    vm_size: Annotated[AzureName, AfterValidator(_check_size)] = "Standard_D16ds_v5"
    """Any size in the catalog, x86_64 or arm64 (the image must match)."""
    image: Annotated[ImageReference, AfterValidator(_check_image)] = "canonical:ubuntu-24_04-lts:server:latest"
    """Marketplace URN or image id."""
    os_disk_size_gb: Annotated[int, Field(ge=64, le=4095, strict=True)] = Field(128, alias="osDiskSizeGB")
    """OS disk size in GB."""
    # The managed data disk that holds slurmctld's state and the accounting database across reimages.
    state_disk_size_gb: Annotated[int, Field(ge=32, le=4095, strict=True)] = Field(64, alias="stateDiskSizeGB")
    """Size in GB of the head's state disk (Premium SSD, protected, retained, detached not deleted with the VM):
    slurmctld's `StateSaveLocation` and the accounting database survive a reimage or replacement
    (docs/day2.md#a-head-that-keeps-its-state).
    """
    slurmdbd: bool = False
    """Job accounting (`sacct`, `sreport`): the head step `gb300-slurmdbd-setup` installs MariaDB and slurmdbd on the
    head node and slurm.conf stores into it. No password anywhere: the database account `slurm`@`localhost` is
    `IDENTIFIED VIA unix_socket`. The database lives on the head's state disk, so it survives a reimage or
    replacement of the head VM (docs/slurm.md#job-accounting-gb300headslurmdbd).
    """


class BootstrapAlertSettings(ConfigModel):
    """``gb300:monitoring.logs.bootstrapAlert``: a log alert (a scheduled query rule on the workspace) for each node
    whose bootstrap fails, from the first step on (docs/lifecycle.md#bootstrap-failures-in-azure-monitor)."""

    enabled: bool = True
    """`false` turns the alert off (it needs `logs.enabled`)."""
    severity: Annotated[int, Field(ge=0, le=4, strict=True)] = 1
    """Azure's alert severity, 0 (critical) to 4 (verbose); the alert notifies the action group of
    `gb300:monitoring.alerts.emails` and `webhooks`."""


class LogsSettings(ConfigModel):
    """``gb300:monitoring.logs``: Log Analytics, the Azure Monitor Agent and the log data collection rules."""

    enabled: bool = True
    """`false` turns logs off."""
    retention_days: Annotated[int, Field(ge=30, le=730, strict=True)] = 30
    """Workspace and table retention, days."""
    bootstrap_alert: BootstrapAlertSettings = Field(default_factory=BootstrapAlertSettings)
    """A log alert for each node whose bootstrap fails (docs/lifecycle.md#bootstrap-failures-in-azure-monitor)."""


class PrometheusSettings(ConfigModel):
    """``gb300:monitoring.prometheus``: Azure Monitor workspace; exporters and a remote-writing agent on nodes."""

    enabled: bool = True
    """`false` turns managed Prometheus off, and with it Grafana and alerts."""
    scrape_interval_seconds: Annotated[int, Field(ge=5, le=300, strict=True)] = 30
    """The agents' scrape interval, seconds."""


class GrafanaSettings(ConfigModel):
    """``gb300:monitoring.grafana``: Azure Managed Grafana over the Azure Monitor workspace."""

    enabled: bool = True
    """Azure Managed Grafana; needs `prometheus.enabled`."""


def _check_webhook_unless_secret(value: str | StackSecret) -> str | StackSecret:
    """A plain URL is checked; a secret's text is unknown offline (rule `stack-secrets` says so)."""
    return value if isinstance(value, StackSecret) else _check_webhook(value)


class AlertSettings(ConfigModel):
    """``gb300:monitoring.alerts``: Prometheus alert rule groups and who is told."""

    enabled: bool = True
    """Alert rules and the action group; need `prometheus.enabled`."""
    emails: list[Annotated[str, Field(max_length=text_limit("emailAddress")), AfterValidator(_check_email)]] = Field(
        default_factory=list
    )
    """Email addresses that are notified."""
    webhooks: list[
        Annotated[
            Annotated[str, Field(max_length=text_limit("url"))] | StackSecret,
            AfterValidator(_check_webhook_unless_secret),
        ]
    ] = Field(default_factory=list)
    """Https URLs called by every alert (common alert schema). Each may be a Pulumi secret (`pulumi config set
    --secret --path 'gb300:monitoring.alerts.webhooks[0]' <url>`): the action group receives every webhook as a
    secret, and `gb300 plan`, which cannot decrypt it, skips its https:// check (rule `stack-secrets`)."""


class MonitoringSettings(ConfigModel):
    """``gb300:monitoring``: Azure Monitor, managed Prometheus and Grafana. Every piece is on unless disabled."""

    logs: LogsSettings = Field(default_factory=LogsSettings)
    """Log Analytics (PerGB2018), the Azure Monitor Agent on every node, syslog/cloud-init/health log collection."""
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    """Azure Monitor workspace; DCGM and node exporters and a remote-writing Prometheus agent on every node."""
    grafana: GrafanaSettings = Field(default_factory=GrafanaSettings)
    """Azure Managed Grafana linked to the workspace."""
    alerts: AlertSettings = Field(default_factory=AlertSettings)
    """Prometheus alert rule groups (`templates/alerts/`) and an action group."""

    @model_validator(mode="after")
    def _needs_prometheus(self) -> MonitoringSettings:
        if not self.prometheus.enabled:
            for key, piece in (("grafana", self.grafana), ("alerts", self.alerts)):
                if piece.enabled:
                    raise _PathError(
                        ("monitoring", key, "enabled"),
                        "needs gb300:monitoring.prometheus.enabled: true (it reads the Azure Monitor workspace); "
                        "set it to false too",
                    )
        return self


class HealthSettings(ConfigModel):
    """``gb300:health``: the GPU node health gate (``gb300-health-check``, see docs/health.md).

    ``softFailuresToDrain``: how many consecutive failures of a soft check (one that can be transient: a service,
    a mount, an IB port, a temperature) drain the node; hardware faults drain on the first failure regardless.
    """

    soft_failures_to_drain: Annotated[int, Field(ge=1, le=20, strict=True)] = 3
    """Failed runs in a row before a soft check (service, mount, IB port, temperature, ...) drains the node; hardware
    faults drain at once.
    """


RuleId = Annotated[str, Field(max_length=64, pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]


class Suppression(ConfigModel):
    """One entry of ``gb300:policy.suppress``: a rule id, and why the stack does not want its findings.

    A plain string is a rule id without a reason, enough for rules that are not about security; a security
    rule (``gb300.rules.SECURITY_RULES``) needs ``{rule: ..., reason: ...}``. Every suppression, with its
    reason and the findings it hides, is printed by every ``gb300 plan`` and in the pull request summary.
    """

    rule: RuleId
    """The rule not to run."""
    reason: Annotated[str, Field(max_length=300), AfterValidator(_check_reason)] | None = None
    """Why, on one line of 10-300 characters without control or format characters (CR, ESC, U+2028, bidi
    overrides: the plan prints it); required for the security rules `no-ssh-from-internet`, `no-public-ip-on-nodes`,
    `storage-no-public-access`, `lustre-root-squash` (a bare id is refused, exit 2).
    """


class PolicySettings(ConfigModel):
    """``gb300:policy``: which findings fail the plan, which rules are suppressed, and what the rules check against.

    ``requiredTags``: tag keys every taggable Azure resource must carry (rule ``required-tags``).
    ``quota``: where ``quota-sufficient`` reads Azure's usage: ``live`` or a saved ``az vm list-usage`` JSON file;
    ``gb300 plan --quota`` overrides it, unset means quota is not checked (an info finding says so).
    ``sshSourceLimitPrefix``: the public SSH sources of one NSG, united, may cover at most one block of this
    prefix length (rule ``no-ssh-from-internet``; default in ``data/skus.yaml`` ``limits``).
    """

    fail_on: Literal["error", "warning", "info"] = "error"
    """The lowest level that makes `gb300 plan` exit 1."""
    suppress: list[Annotated[Suppression, BeforeValidator(_suppression_from_text)]] = Field(default_factory=list)
    """Rules not to run, each a rule id or `{rule, reason}`; every plan, `--quiet` included, and the PR summary list
    each one with its reason and the findings it hides.
    """
    required_tags: list[TagKey] = Field(default_factory=lambda: ["owner", gb300_tags.CLUSTER])
    """Tag keys every taggable Azure resource must carry (rule `required-tags`, a warning)."""
    quota: Annotated[str, Field(min_length=1, max_length=text_limit("filePath"))] | None = None
    """Where `quota-sufficient` reads Azure's usage: `live`, or the path of a saved `az vm list-usage` file (`gb300 plan
    --quota` overrides); unset: quota is not checked, an info says so (docs/rules.md#quota).
    """
    ssh_source_limit_prefix: Annotated[
        int,
        # The schema states the floor _check_ssh_limit holds (the default), which explains itself when refused.
        Field(
            ge=1, le=32, strict=True, json_schema_extra={"minimum": int(catalog.load().limit("sshSourceLimitPrefix"))}
        ),
        AfterValidator(_check_ssh_limit),
    ] = Field(default_factory=lambda: int(catalog.load().limit("sshSourceLimitPrefix")))
    """The public SSH sources of one NSG, united, may cover at most one block of this prefix length (rule
    `no-ssh-from-internet`). It only tightens: the default (`data/platform.yaml` `sshSourceLimitPrefix`) is also the
    loosest value accepted, so the key cannot switch the rule off; wider sources need a suppression of
    `no-ssh-from-internet` with a reason, which every plan shows.
    """

    @property
    def suppressed(self) -> frozenset[str]:
        """The ids of the suppressed rules."""
        return frozenset(s.rule for s in self.suppress)


class AllowDestroy(ConfigModel):
    """One entry of ``gb300:allowDestroy``: consent to one expected deletion or replacement (docs/day2.md)."""

    resource: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._*?\[\]-]+$")]
    """The Pulumi or Azure name of the resource (`ref-train-r0005`), or a glob (`ref-train-r*`)."""
    reason: Annotated[str, Field(min_length=1, max_length=500)]
    """Why; shown in the plan's warning."""


class CostSettings(ConfigModel):
    """``gb300:cost``: how `gb300 plan` prices the cluster (docs/cost.md)."""

    currency: Annotated[str, Field(pattern=r"^[A-Z]{3}$", max_length=3)] = "USD"
    """ISO 4217 currency of the prices. The shipped table is in USD; another currency needs `--prices live` (the Retail
    Prices API's `currencyCode`) or a `--prices FILE` in that currency, else every price is listed as unknown.
    """
    discount_percent: Annotated[float, Field(ge=0, lt=100, allow_inf_nan=False)] = 0
    """Percent off every known price (an enterprise agreement, a savings plan's effective rate); 0 = list prices. Never
    assumed: set it to what your agreement gives.
    """
    reservation_term: Literal["none", "1 Year", "3 Years"] = "none"
    """Price the VMs at a reservation of this term. Only `--prices live` knows reservation prices (the Retail Prices
    API's `Reservation` items, whose price is for the whole term); with the shipped table the VMs are then unknown.
    """

    @property
    def reservation(self) -> str | None:
        """The reservation term, or None for pay-as-you-go."""
        return None if self.reservation_term == "none" else self.reservation_term


class StackConfig(ConfigModel):
    """The whole ``gb300`` namespace of a stack file."""

    cluster: ClusterSettings
    """The cluster's identity: its name, region, zone and tags."""
    access: AccessSettings
    """Who logs in, and from where."""
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    """The VNet gb300 carves its subnets from."""
    gpu_pools: Annotated[list[GpuPool], Field(min_length=1)]
    """GPU pools; each is one InfiniBand fabric of whole NVLink domains (racks)."""
    head: HeadSettings = Field(default_factory=HeadSettings)
    """The Slurm controller and login node: one VM in the head subnet."""
    storage: StorageSettings = Field(default_factory=StorageSettings)
    """Shared storage for datasets and checkpoints: Azure Managed Lustre and a storage account (docs/storage.md)."""
    monitoring: MonitoringSettings = Field(default_factory=MonitoringSettings)
    """Azure Monitor, managed Prometheus, Grafana, alerts; every piece is on unless disabled (docs/monitoring.md)."""
    health: HealthSettings = Field(default_factory=HealthSettings)
    """The GPU node health gate (docs/health.md)."""
    remediation: RemediationSettings = Field(default_factory=RemediationSettings)
    """The self-healing loop: drain, reboot, reimage, replace, revalidate and return nodes (docs/self-healing.md)."""
    policy: PolicySettings = Field(default_factory=PolicySettings)
    """Which findings fail the plan, which rules are suppressed, and what the rules check against
    (docs/rules.md#settings-gb300policy).
    """
    software: dict[
        Annotated[str, Field(max_length=text_limit("componentName"))],
        Annotated[str, Field(max_length=text_limit("componentName"))],
    ] = Field(default_factory=dict)
    """Override pinned node software versions: component name (from `data/versions.yaml`) to version
    (docs/node-bootstrap.md#pinning-software-gb300software).
    """
    cost: CostSettings = Field(default_factory=CostSettings)
    """How `gb300 plan` prices the cluster: currency, discount, reservation term (docs/cost.md)."""
    allow_destroy: list[AllowDestroy] = Field(default_factory=list)
    """Consent to expected deletions, replacements or subnet moves of deployed resources: `gb300 plan --state` reports
    them as warnings instead of `destroys-deployed` errors (docs/day2.md).
    """

    @model_validator(mode="after")
    def _unique_pool_names(self) -> StackConfig:
        seen: dict[str, int] = {}
        for i, pool in enumerate(self.gpu_pools):
            if pool.name in seen:
                raise _PathError(
                    ("gpuPools", i, "name"),
                    f"duplicates gpuPools[{seen[pool.name]}].name (got {pool.name!r}); pool names must be unique",
                )
            seen[pool.name] = i
        return self

    @model_validator(mode="after")
    def _no_mount_over_the_admin_home(self) -> StackConfig:
        # Azure's agent writes the admin's authorized_keys into /home/<adminUsername>/.ssh as root, and the admin
        # may sudo: a container every job can write, mounted there, would hand root on every node to any job.
        home = f"/home/{self.access.admin_username}"
        for loc, path in self.storage.mounts():
            if path == home or path.startswith(home + "/"):
                raise _PathError(
                    loc,
                    f"must not be in {home}, the admin user's home (got {path!r}): Azure writes its authorized_keys "
                    "there as root and the admin may sudo, so whoever writes the storage would log in as root. Use "
                    "a directory of its own such as '/lustre' or '/mnt/data'",
                )
        return self

    @property
    def tags(self) -> dict[str, str]:
        """Tags on every taggable resource: the user's plus the toolkit's own."""
        return gb300_tags.cluster(self.cluster.tags, self.cluster.name)
