"""Run the real Pulumi program on the SDK's mock monitor and collect what it would build."""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import settings
from pulumi.runtime.rpc import is_rpc_secret
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from gb300 import config, cost, paths, rules
from gb300.azure import credential as azure_credential
from gb300.azure import images_live, inventory, lustre_live, vnet_live
from gb300.azure import quota as quotas
from gb300.config import StackConfig
from gb300.cost.estimate import prometheus_samples
from gb300.errors import ConfigError, Gb300Error
from gb300.facts import catalog
from gb300.findings import Finding, Report
from gb300.plan import glance, summary
from gb300.plan.mocks import AzureMocks, RecordingMonitor, Registration
from gb300.plan.state import added, deployed_subscription
from gb300.resources import DeployedResource, ResourceRecord
from gb300.rules import destroy, network, reimage
from gb300.rules.base import StackIdentity

PROJECT = "gb300"


class DuplicateUrnError(Gb300Error):
    """The program registers two resources with one URN: the Pulumi engine refuses it, so the plan does too."""

    def __init__(self, urns: Sequence[str]) -> None:
        self.urns = tuple(dict.fromkeys(urns))
        super().__init__(
            "\n".join(
                f"Duplicate resource URN '{urn}'; try giving it a unique name (pulumi up would fail the same way)"
                for urn in self.urns
            )
        )


YOUNG_GC_THRESHOLD = 10_000  # net allocations between collections of the youngest generation while registering
# Young collections before the middle generation is collected: the objects that survive a young collection are the
# SDK's futures and outputs, alive until the program ends, so re-walking them every 50 young collections (the
# default) found nothing to free and cost about 0.6 s of a 1,388-rack plan's CPU with the same peak (docs/scale.md).
MIDDLE_GC_THRESHOLD = 1_000
SECRET = "[secret]"  # noqa: S105 - how the plan shows a secret input; its value never reaches the plan or its JSON


@dataclass
class PlanResult:
    """Everything the plan learned: the config, the resources, the findings and a summary."""

    stack: str
    config: StackConfig
    resources: list[ResourceRecord]
    findings: list[Finding] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    suppressed: list[SuppressedRule] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "resources": [r.as_json() for r in self.resources],
            "findings": [f.as_json() for f in self.findings],
            "suppressed": [s.as_json() for s in self.suppressed],
            "summary": self.summary,
        }


@dataclass(frozen=True)
class SuppressedRule:
    """A rule ``gb300:policy.suppress`` switched off, why, and the findings it would have reported."""

    rule: str
    reason: str | None
    hidden: tuple[Finding, ...]

    def as_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "reason": self.reason, "hidden": [f.as_json() for f in self.hidden]}


ASSET_SIG = "4dabf18193072939515e22adb298388d"
"""The key Pulumi marks an asset with in a resource's inputs and state (sdk/go/common/resource/sig)."""
ASSET_SIG_VALUE = "c44067f5952c0a294b673a41bacd8c17"


def _asset(value: pulumi.FileAsset) -> dict[str, str]:
    """A file asset as Pulumi's state keeps it: its path and the sha256 of its content, never the content."""
    path = Path(str(value.path))
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
    return {ASSET_SIG: ASSET_SIG_VALUE, "hash": digest, "path": str(path)}


def _plain(value: Any) -> Any:
    """Protobuf carries every number as a double; give whole numbers back as ints, as they were written.

    Strings go first: a 1,388-rack plan converts about 150,000 values, most of them strings.
    """
    if type(value) is str:
        return value
    if isinstance(value, dict):
        return SECRET if is_rpc_secret(value) else {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, pulumi.FileAsset):
        return _asset(value)
    return value


def _record(reg: Registration) -> ResourceRecord:
    return ResourceRecord(
        reg.urn,
        reg.type,
        reg.name,
        reg.parent,
        reg.protect,
        reg.id,
        _plain(reg.inputs),
        retain_on_delete=reg.retain_on_delete,
        replace_on_changes=reg.replace_on_changes,
        delete_before_replace=reg.delete_before_replace,
        dependencies=reg.dependencies,
        package=reg.package,
        custom_timeouts=reg.custom_timeouts,
        provider=reg.provider,
    )


_GC_PAUSED: list[bool] = []  # one entry per open gc_paused block (the collector is process-wide); the outermost acts


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Collect only young garbage while a plan runs (reference counting frees the rest).

    The SDK allocates a web of futures and outputs per resource that live until the program ends, so a full
    collection re-walks a growing heap: about a third of the CPU of a 1,389-rack plan (bench/README.md), and,
    once registration is over, a full collection inside the rules cost them as much as their own work. With the
    collector off, though, the short-lived cycles the SDK's tasks leave behind pile up until the end: about
    40 MiB of a 1,388-rack plan's peak (docs/scale.md). So everything alive before the program runs is frozen
    (never scanned again), and only the youngest generation is collected, every :data:`YOUNG_GC_THRESHOLD`
    allocations: the cycles go, the long-lived heap is not re-walked. :func:`run_plan` keeps it so through the
    rules and the summary; the heap is unfrozen when the plan is done. A collector switched off stays off; a
    block inside another leaves the collector as the outer one set it.
    """
    enabled = gc.isenabled() and not _GC_PAUSED
    thresholds = gc.get_threshold()
    if enabled:
        gc.collect()
        gc.freeze()
        gc.set_threshold(YOUNG_GC_THRESHOLD, MIDDLE_GC_THRESHOLD, 1000)
    _GC_PAUSED.append(enabled)
    try:
        yield
    finally:
        _GC_PAUSED.pop()
        if enabled:
            gc.set_threshold(*thresholds)
            gc.unfreeze()


def _declared_then_frozen(program: Callable[[], None]) -> Callable[[], None]:
    """``program`` with the collector off while it declares its resources, and what it built then frozen.

    A gb300 program declares every resource before the SDK registers any (its constructors only queue the
    registrations), and what it builds lives until the plan ends: the resources, their outputs and futures. The
    young collections would scan all of it once for nothing; frozen, it is never scanned, which took about 0.8 s
    off a 1,388-rack plan's CPU for at most 8 MiB more peak (docs/scale.md). The registrations that follow run with
    the collector as :func:`gc_paused` sets it.
    """

    def declare() -> None:
        if not (_GC_PAUSED and _GC_PAUSED[0]):  # not in a gc_paused block that acts: the collector was off already
            program()
            return
        gc.disable()
        try:
            program()
        finally:
            gc.freeze()
            gc.enable()

    return declare


def register(
    stack: str,
    raw: Mapping[str, Any],
    program: Callable[[], None] | None = None,
    *,
    mocks: AzureMocks | None = None,
    cfg: StackConfig | None = None,
    subscription: str | None = None,
) -> list[ResourceRecord]:
    """Run ``program`` (default: :func:`gb300.program.main`) under ``mocks`` (default: :class:`AzureMocks`) with
    ``raw`` as the stack's config. ``cfg``: ``raw`` already parsed, handed to the default program so that one plan
    parses the stack once (the program still reads ``raw`` from the engine's config when run by Pulumi).
    ``subscription``: the deployer's subscription the default mocks answer (default: theirs, ``SUBSCRIPTION_ID``).

    The mocks are installed before the program module is imported, as the SDK requires.
    """
    mocks = mocks or AzureMocks(subscription_id=subscription)
    monitor = RecordingMonitor(mocks)
    settings.reset_options(project=PROJECT, stack=stack, preview=True)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=True, monitor=monitor)
    pulumi.runtime.set_all_config(config.to_pulumi_config(raw))
    if program is None:
        main = importlib.import_module("gb300.program").main
        program = functools.partial(main, cfg)
    with gc_paused():
        _sync_await(run_pulumi_func(_declared_then_frozen(program)))
    if monitor.duplicates:
        raise DuplicateUrnError(monitor.duplicates)
    records = [_record(r) for r in monitor.registrations]
    records.sort(key=lambda r: r.urn)
    return records


def plan_subscription(stack_file: Path | None, deployed: Sequence[DeployedResource] | None) -> str | None:
    """The subscription the plan's program runs in: the stack file's ``azure-native:subscriptionId`` (what the
    provider deploys to), else the one the deployed state's ids name, else None (the mocks' own).

    The payload and data storage accounts are named from a hash of the subscription (``gb300.components.storage``,
    ``node_payload``): planned in another subscription than the deployed one, every account and the head, whose
    custom data names the payload account, read as replaced. An encrypted stack value cannot be read offline:
    the state's is used then.
    """
    if stack_file is not None:
        try:
            found = azure_credential.stack_subscription(stack_file)
        except azure_credential.CredentialError:
            found = None
        if found:
            return found
    return deployed_subscription(deployed) if deployed else None


def _lustre_live(cfg: StackConfig, resources: Sequence[ResourceRecord], **live: Any) -> list[Report]:
    """With the plan gone live, Azure's own Lustre subnet size against the storage subnet (lustre-subnet-size)."""
    lustre = cfg.storage.lustre
    if lustre is None:
        return []
    storage = [
        r.inputs.get("addressPrefix")
        for r in resources
        if r.type == "azure-native:network:Subnet" and r.inputs.get("subnetName") == "storage"
    ]
    if len(storage) != 1 or not isinstance(storage[0], str):
        return []
    answer = lustre_live.ask(lustre.sku, float(lustre.capacity_ti_b), **live)
    reserved = int(catalog.load().limit("subnetReservedAddresses"))
    return lustre_live.findings(answer, storage[0], reserved, sku=lustre.sku, capacity_tib=lustre.capacity_ti_b)


def _vnet_live(cfg: StackConfig) -> list[Report]:
    """With the plan gone live and an existing VNet, the carved space against the VNet Azure has (subnet-fits-pool)."""
    vnet, vnet_id = cfg.network.existing_vnet, cfg.network.existing_vnet_id
    if vnet is None or vnet_id is None:
        return []
    from gb300.components import network as network_component  # noqa: PLC0415 - the plan's carve, as build() does

    storage = cfg.storage.lustre
    carved = network_component.plan_subnets(
        cfg.network.address_space,
        gpu_vms=sum(p.vms for p in cfg.gpu_pools) + sum(p.count for p in cfg.cpu_pools),
        bastion=cfg.network.bastion,
        storage_prefix=storage.subnet_prefix if storage is not None else None,
        gpu_prefix=cfg.network.gpu_subnet_prefix_length,
    )
    return vnet_live.findings(vnet_live.fetch(vnet), vnet_id, cfg.network.address_space, carved)


def run_plan(
    stack: str,
    raw: Mapping[str, Any],
    *,
    quota: str | None = None,
    deployed: Sequence[DeployedResource] | None = None,
    prices: str | None = None,
    stack_file: Path | None = None,
    siblings: Sequence[StackIdentity] = (),
) -> PlanResult:
    """Validate ``raw`` (raises ConfigError), register the program's resources, then evaluate and summarise.

    ``quota`` (``live`` or a usage file; default ``gb300:policy.quota``) is where ``quota-sufficient`` reads Azure's
    usage; with neither, quota is not checked and an info finding says so. ``live`` also asks Azure for the Lustre
    subnet size (``lustre-subnet-size``) and whether each image version exists (``image-version-exists``).
    ``deployed`` is the stack's current state (:mod:`gb300.plan.state`); with it the plan also reports changes that
    would replace or delete stateful storage (``storage-data-loss``) and machines, containers or subnets
    (``destroys-deployed``). ``prices`` picks what the cost is read from: None the shipped table
    (``data/prices.yaml``), ``live`` Azure's Retail Prices API, else a price table file (:mod:`gb300.cost`).
    ``stack_file``: gone live, its ``azure-native:subscriptionId`` (when set) is the subscription asked, as for the
    provider; the summary's ``azureSubscription`` names the one asked and where its id came from.
    ``siblings`` are the project's other stacks (``stack-identity`` refuses their cluster name and signing key).
    The program runs in the subscription :func:`plan_subscription` names, so that the names gb300 derives from it
    (the storage accounts, the custom data naming the payload account) are the ones deployed there.
    """
    cfg = config.parse(raw)
    unknown = rules.unknown_suppressions(cfg.policy)
    if unknown:
        raise ConfigError(unknown)
    # One block, not a helper function: every resource records the call stack it was declared from, one frame
    # deeper per level (docs/scale.md). The rules and the summary read each resource's views once.
    with gc_paused(), inventory.shared_reads():
        return _assess(
            stack,
            cfg,
            register(stack, raw, cfg=cfg, subscription=plan_subscription(stack_file, deployed)),
            quota=quota,
            deployed=deployed,
            prices=prices,
            stack_file=stack_file,
            siblings=siblings,
        )


def _assess(
    stack: str,
    cfg: StackConfig,
    resources: list[ResourceRecord],
    *,
    quota: str | None,
    deployed: Sequence[DeployedResource] | None,
    prices: str | None = None,
    stack_file: Path | None = None,
    siblings: Sequence[StackIdentity] = (),
) -> PlanResult:
    """The registered ``resources`` evaluated by the rules and summarised (see :func:`run_plan`)."""
    result = PlanResult(stack=stack, config=cfg, resources=resources)
    source = quota or cfg.policy.quota
    live = bool(source) and str(source).strip().lower() == quotas.LIVE
    # Gone live, every call asks the stack's azure-native:subscriptionId when it sets one (as the provider does).
    stack_subscription = azure_credential.stack_subscription(stack_file) if live and stack_file else None
    asks: dict[str, Any] = {"subscription_id": stack_subscription} if stack_subscription else {}
    snapshot = quotas.fetch(source, resources, base=paths.REPO_ROOT, **asks) if source else None
    # Gone live, Azure also says whether each image version the stack boots exists (image-version-exists).
    images = images_live.fetch_live(images_live.used_images(cfg), **asks) if live else None
    ctx = rules.RuleContext(
        policy=cfg.policy,
        quota=snapshot,
        config=cfg,
        deployed=deployed,
        images=images,
        stack=stack,
        siblings=tuple(siblings),
    )
    assessed = rules.assess(resources, ctx)
    findings, hidden = assessed.findings, assessed.hidden
    if live:
        lustre = network.lustre_subnet_size.named(_lustre_live(cfg, resources, **asks))
        if network.lustre_subnet_size.id in cfg.policy.suppressed:
            hidden.setdefault(network.lustre_subnet_size.id, []).extend(lustre)
        else:
            findings += lustre
        vnet = network.subnet_fits_pool.named(_vnet_live(cfg))
        if network.subnet_fits_pool.id in cfg.policy.suppressed:
            hidden.setdefault(network.subnet_fits_pool.id, []).extend(vnet)
        else:
            findings += vnet
    result.suppressed = [
        SuppressedRule(s.rule, s.reason, tuple(sorted(hidden.get(s.rule, []), key=lambda f: (-f.level, f.resource))))
        for s in cfg.policy.suppress
    ]
    result.findings = rules.sort_findings(findings)
    result.summary = summary.summarise(cfg, resources)
    if deployed is not None:
        result.summary["needsReimage"] = {g: len(n) for g, n in reimage.changed(resources, deployed).items()}
        result.summary["replacesVms"] = reimage.replaced(resources, deployed)
        result.summary["destroys"] = destroy.summary(resources, deployed)
        result.summary["adds"] = added(resources, deployed)
        result.summary["changes"] = glance.state_changes(resources, deployed)
    result.summary["cost"] = _cost(cfg, resources, deployed, prices)
    if live and snapshot is not None:
        asked = snapshot.subscription
        result.summary["azureSubscription"] = {"id": asked.id, "from": asked.source} if asked else None
    return result


def _cost(
    cfg: StackConfig,
    resources: Sequence[ResourceRecord],
    deployed: Sequence[DeployedResource] | None,
    prices: str | None,
) -> dict[str, Any]:
    """The plan's cost (``summary.cost``); with the deployed state, also the change (``summary.cost.change``)."""
    wanted = {line.meter for line in cost.lines(resources)} | {line.meter for line in cost.lines(deployed or ())}
    book = cost.book(
        prices,
        region=cfg.cluster.location,
        currency=cfg.cost.currency,
        reservation=cfg.cost.reservation,
        savings_plan=cfg.cost.savings_plan,
        meters=wanted,
    )
    discount, term = cfg.cost.discount_percent, cfg.cost.reservation
    planned = cost.estimate(resources, book, discount_percent=discount, reservation_term=term)
    doc = planned.as_json()
    if cfg.monitoring.prometheus.enabled:  # usage the plan's own numbers bound: labelled as an estimate
        gpu_vms = sum(ss.capacity for ss in inventory.scale_sets(resources))
        gpus = max((pool.sku.gpus for pool in cfg.gpu_pools), default=0)
        interval = cfg.monitoring.prometheus.scrape_interval_seconds
        doc["usageEstimates"] = [prometheus_samples(gpu_vms, gpus, interval)]
    if deployed is not None:
        before = cost.estimate(deployed, book, discount_percent=discount, reservation_term=term)
        doc["change"] = cost.change(planned, before)
    return doc
