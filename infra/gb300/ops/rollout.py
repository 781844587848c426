"""Roll a changed bootstrap out rack by rack: drain in Slurm, wait for jobs, bring the VMs to the scale set's
latest model, reimage, health gate, resume.

Which racks: Azure says, not the state. ``pulumi up`` writes the new custom data into each scale set's model, and
under ``upgradePolicy: Manual`` "nothing happens to existing VMs": every rack scale set with a VM whose
``latestModelApplied`` is false runs an old node configuration (:mod:`gb300.azure.instances`, asked live or read
from a saved ``az vmss list-instances``). The deployed state (``pulumi stack export``) gives the racks' addresses
and their order (pool, then rack number), and the plan checks that ``pulumi up`` has run: a deployed scale set
whose custom data hash tag (:data:`gb300.tags.CUSTOM_DATA_HASH`) differs from the stack's has not received the new
model yet (:func:`gb300.rules.reimage.stale`), and rolling it out would reimage into the old one.

What Azure requires (MicrosoftDocs/azure-docs
``articles/virtual-machine-scale-sets/virtual-machine-scale-sets-upgrade-scale-set.md`` at commit
00982c446582e040c27b7c7e0faa2b611aed9f1c, "How to bring VMs up-to-date with the latest scale set model"): under
Manual "you must do a 'manual upgrade' of each existing VM" (``POST .../manualupgrade``, ``updateInstances``), which
makes the VM's own model the scale set's; and changes to the OS profile, where custom data lives, "only apply to VMs
created after the change ... To bring existing VMs up-to-date, you must do a 'reimage'". The manual upgrade alone
reruns no custom data (cloud-init runs it at provisioning), and a reimage is an operation on the OS disk that
nothing we read says moves the VM to the latest model (REST ``VirtualMachineScaleSets_Reimage``: "If exact version
is not provided, the OS disk is reimaged to the existing version"; inferred, not observed), so each batch does both,
in this order, and every VM ends on the latest model, running it:

1. the rack's VMs from Azure (``virtualMachineScaleSets/<rack>/virtualMachines``): computer names, which are the
   Slurm dynamic nodes' names and survive a reimage, and each VM's ``latestModelApplied``;
2. ``scontrol update nodename=<hosts> state=drain reason="gb300-rollout: ..."``, leaving out hosts someone else
   drained (a person, Scheduled Events, the remediation loop's ``gb300-heal:``): they are reimaged with the rack
   but never resumed by the rollout;
3. wait until ``squeue -w <hosts>`` lists no job (bounded: ``job_timeout_s``);
4. ``POST .../virtualMachineScaleSets/<rack>/manualupgrade`` with the instance ids not on the latest model
   (``begin_update_instances``), waited for: their models now hold the new custom data;
5. ``POST .../virtualMachineScaleSets/<rack>/reimage`` (every instance's OS disk), waited for: cloud-init runs the
   new custom data;
6. the health gate: every host registered again with a boot time after the reimage started, not down, and not
   drained by ``gb300-health-check`` (whose reasons start with ``gb300:``) (bounded: ``health_timeout_s``);
7. ``scontrol update nodename=<hosts> state=resume`` (the hosts it drained).

The first rack that fails stops the rollout; it stays drained, and the report names it and why. Racks of the
same batch that passed are resumed. A rack whose reimage failed after step 4 reports the latest model while it
still runs the old OS disk, so its failure line says to run again with ``--rack`` (:attr:`Rack.force`), which
rolls a rack whatever Azure reports. Slurm is reached through :class:`Slurm`, which runs ``scontrol`` and
``squeue`` through a command prefix (empty on the head itself, ``ssh admin@head`` from elsewhere); the Azure
calls go through azure-mgmt-compute's ``ComputeManagementClient``, signed in with gb300's Azure credential
(:mod:`gb300.azure.credential`), checked before the first rack is touched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gb300 import tags as gb300_tags
from gb300.azure import credential as azure_credential
from gb300.azure import instances, inventory
from gb300.errors import UsageError
from gb300.resources import DeployedResource, Resource
from gb300.rules import reimage
from gb300.slurm.client import DRAIN_PREFIX, HEALTH_PREFIX, Slurm, SlurmNode
from gb300.slurm.hostlist import compress, natural_key

_DOWN = {"DOWN", "NOT_RESPONDING", "NO_RESPOND", "POWERED_DOWN", "POWER_DOWN", "FAIL", "UNKNOWN", "FUTURE"}


@dataclass(frozen=True)
class Rack:
    """One deployed rack scale set, where it lives in Azure, and (once Azure answered) how many of its VMs run an old
    model; ``force`` rolls it whatever Azure reports (``--rack``)."""

    pool: str
    index: int
    name: str
    subscription_id: str
    resource_group: str
    vms: int
    old: int = 0
    force: bool = False

    def label(self) -> str:
        why = f"{self.old} on an old model" if self.old else "named by --rack"
        return f"{self.name} (pool {self.pool}, rack {self.index}, {self.vms} VMs, {why})"


def _tags(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
    tags = inputs.get("tags")
    return tags if isinstance(tags, Mapping) else {}


def deployed_scale_sets(deployed: Sequence[DeployedResource]) -> list[Rack]:
    """Every deployed node scale set (racks and classic pools: the ones carrying the custom data hash tag), with its
    Azure address from the state, by pool then rack number."""
    out = []
    for d in deployed:
        tags = _tags(d.inputs)
        if not inventory.is_scale_set(d) or gb300_tags.custom_data_hash(tags) is None:
            continue
        subscription, group, name = inventory.arm_address(d.id, d.inputs, d.name)
        sku = d.inputs.get("sku") if isinstance(d.inputs.get("sku"), Mapping) else {}
        rack = gb300_tags.rack_of(tags) or "0"
        out.append(
            Rack(
                pool=gb300_tags.pool_of(tags) or d.name,
                index=int(rack) if rack.isdigit() else 0,
                name=name,
                subscription_id=subscription,
                resource_group=group,
                vms=int(sku.get("capacity") or 0) if isinstance(sku, Mapping) else 0,
            )
        )
    return sorted(out, key=lambda r: (r.pool, r.index, natural_key(r.name)))


def not_applied(resources: Sequence[Resource], deployed: Sequence[DeployedResource]) -> list[str]:
    """Deployed scale sets whose model does not hold the stack's custom data yet (their hash tag in the state differs
    from the plan's): ``pulumi up`` has not run, and a reimage would bring back the old configuration."""
    return sorted(r.name for r in reimage.stale(resources, deployed) if inventory.is_scale_set(r))


def racks_to_roll(racks: Sequence[Rack], answer: instances.Answer, force: Iterable[str] = ()) -> list[Rack]:
    """The racks with a VM that Azure reports on an old model, plus the ones named in ``force``, in order.

    A rack the answer does not cover raises :class:`UsageError`: gb300 cannot know what it runs.
    """
    unknown = instances.missing(answer, [r.name for r in racks])
    if unknown:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        raise UsageError(
            f"--azure {answer.source}: no VM listed for {len(unknown)} deployed rack(s) ({shown}); gb300 cannot know "
            f"which node configuration they run. Save every rack (`{instances.SAVE_HINT}`) or use --azure live"
        )
    forced = {name.lower() for name in force}
    out = []
    for rack in racks:
        vms = answer.of(rack.name) or ()
        old = sum(1 for vm in vms if not vm.latest_model)
        if old or rack.name.lower() in forced:
            out.append(replace(rack, old=old, force=rack.name.lower() in forced))
    return out


def batches(racks: Sequence[Rack], concurrency: int) -> list[list[Rack]]:
    """Racks in groups of ``concurrency``, in order: each group is drained, reimaged and resumed together."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1 (got {concurrency})")
    return [list(racks[i : i + concurrency]) for i in range(0, len(racks), concurrency)]


def dry_run_lines(racks: Sequence[Rack], concurrency: int, stack: str) -> list[str]:
    """The plan, one line per batch, as ``gb300 rollout --dry-run`` prints it."""
    groups = batches(racks, concurrency)
    lines = [
        f"gb300 rollout: stack {stack}: {len(racks)} rack(s) to reimage, concurrency {concurrency}, "
        f"{len(groups)} batch(es)"
    ]
    width = len(str(len(groups)))
    for number, group in enumerate(groups, 1):
        lines.append(f"batch {number:>{width}}: " + ", ".join(r.label() for r in group))
    return lines


def nothing_line(racks: Sequence[Rack], source: str) -> str:
    """What the rollout says when Azure reports every VM of every deployed rack on the latest model."""
    return (
        f"nothing to roll out: Azure ({source}) reports every VM of the {len(racks)} deployed rack scale set(s) on "
        "the scale set's latest model"
    )


# ---------------------------------------------------------------------------------------------------------
# Slurm


# ---------------------------------------------------------------------------------------------------------
# Azure


class Azure:
    """The rack's hosts and its reimage, through azure-mgmt-compute (one client per subscription)."""

    def __init__(self, client_for: Callable[[str], Any]) -> None:
        self._client_for = client_for

    def instances(self, rack: Rack) -> tuple[instances.Instance, ...]:
        """The rack's VMs now: computer names (the Slurm node names) and whether each runs the latest model."""
        return instances.list_live(self._client_for(rack.subscription_id), rack.resource_group, rack.name)

    def begin_update(self, rack: Rack, instance_ids: Sequence[str]) -> Any:
        """Start the manual upgrade of ``instance_ids`` to the scale set's latest model; returns the poller."""
        return self._client_for(rack.subscription_id).virtual_machine_scale_sets.begin_update_instances(
            rack.resource_group, rack.name, {"instanceIds": list(instance_ids)}
        )

    def begin_reimage(self, rack: Rack) -> Any:
        """Start reimaging every VM of the rack (OS disk, its model's custom data); returns the poller."""
        return self._client_for(rack.subscription_id).virtual_machine_scale_sets.begin_reimage(
            rack.resource_group, rack.name
        )


def azure_client_factory(credential: Any = None, **client_kwargs: Any) -> Callable[[str], Any]:
    """``subscription id -> ComputeManagementClient``; gb300's own credential unless one is given.

    gb300's own is signed in here, before any rack is drained: none raises
    :class:`~gb300.azure.credential.CredentialError` (the CLI exits 2 and says how to sign in).
    """
    from azure.mgmt.compute import ComputeManagementClient  # noqa: PLC0415 - the SDK loads only when live

    if credential is None:
        credential = azure_credential.signed_in()
    clients: dict[str, Any] = {}

    def client_for(subscription_id: str) -> Any:
        if subscription_id not in clients:
            clients[subscription_id] = ComputeManagementClient(credential, subscription_id, **client_kwargs)
        return clients[subscription_id]

    return client_for


# ---------------------------------------------------------------------------------------------------------
# The rollout


@dataclass
class RackFailure:
    """Why a rack stopped the rollout, and at which step."""

    rack: Rack
    step: str
    reason: str


@dataclass
class Report:
    """What the rollout did: racks done, the rack that failed (if any), racks not started."""

    done: list[Rack] = field(default_factory=list)
    failed: list[RackFailure] = field(default_factory=list)
    not_started: list[Rack] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed


@dataclass
class _Seen:
    """What one batch learnt of its racks: each rack's hosts, its VMs not on the latest model (instance ids), and
    the hosts someone else drained (left alone)."""

    hosts: dict[str, list[str]] = field(default_factory=dict)
    stale: dict[str, list[str]] = field(default_factory=dict)
    held: dict[str, set[str]] = field(default_factory=dict)

    def mine(self, rack: Rack) -> list[str]:
        """The rack's hosts the rollout drains and resumes: all but the held ones."""
        return [h for h in self.hosts[rack.name] if h not in self.held.get(rack.name, set())]


@dataclass
class Rollout:
    """Drives the batches; ``log`` receives one line per step, ``sleep``/``now`` are the clock (tests fake it)."""

    azure: Azure
    slurm: Slurm
    job_timeout_s: float
    health_timeout_s: float
    poll_s: float = 30.0
    log: Callable[[str], None] = print
    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], float] = time.time

    def run(self, racks: Sequence[Rack], concurrency: int) -> Report:
        report = Report()
        groups = batches(racks, concurrency)
        for number, group in enumerate(groups, 1):
            self.log(f"batch {number}/{len(groups)}: {', '.join(r.name for r in group)}")
            failed = self._batch(group, report)
            if failed:
                report.not_started = [r for g in groups[number:] for r in g]
                break
        return report

    def _held(self, names: Sequence[str]) -> set[str]:
        """Hosts someone else drained (a person, Scheduled Events, the remediation loop): never drained over or
        resumed by the rollout. The health gate's own ``gb300:`` drains are not held: the reimage may cure them."""
        return {
            n.name
            for n in self.slurm.nodes(names).values()
            if n.drain_reason and not n.drain_reason.startswith((DRAIN_PREFIX, HEALTH_PREFIX))
        }

    def _batch(self, group: list[Rack], report: Report) -> bool:
        """Drain, wait for jobs, update, reimage, wait for health and resume one batch; True when a rack failed."""
        seen = _Seen()

        def fail(rack: Rack, step: str, reason: str) -> None:
            report.failed.append(RackFailure(rack, step, reason))
            self.log(f"  {rack.name}: FAILED at {step}: {reason}")

        live = [rack for rack in group if self._drain(rack, seen, fail)]
        live = self._wait_jobs(live, seen.hosts, fail)
        live = self._update(live, seen.stale, fail)
        started = self.now()
        reimaged = self._reimage(live, seen.stale, fail)
        for rack in self._wait_health(reimaged, seen.hosts, started, fail):
            if self._resume(rack, seen, fail):
                report.done.append(rack)
        return any(f.rack in group for f in report.failed)

    def _drain(self, rack: Rack, seen: _Seen, fail: Callable[[Rack, str, str], None]) -> bool:
        """List the rack's VMs and drain its nodes but those someone else holds; False when the rack failed."""
        try:
            vms = self.azure.instances(rack)
        except Exception as exc:  # noqa: BLE001 - any Azure error stops at this rack with its message
            fail(rack, "list", short_error(exc))
            return False
        seen.hosts[rack.name] = [vm.host for vm in vms]
        seen.stale[rack.name] = [vm.instance_id for vm in vms if not vm.latest_model]
        if not seen.hosts[rack.name]:
            fail(rack, "list", "the scale set has no VM")
            return False
        try:
            seen.held[rack.name] = self._held(seen.hosts[rack.name])
            mine = seen.mine(rack)
            if mine:
                self.slurm.drain(mine, f"{DRAIN_PREFIX} reimage {rack.name}")
        except Exception as exc:  # noqa: BLE001
            fail(rack, "drain", short_error(exc))
            return False
        self.log(f"  {rack.name}: drained {compress(mine)}")
        if seen.held[rack.name]:
            self.log(f"  {rack.name}: left to their owners' drains: {compress(sorted(seen.held[rack.name]))}")
        return True

    def _reimage(
        self, racks: list[Rack], stale: Mapping[str, list[str]], fail: Callable[[Rack, str, str], None]
    ) -> list[Rack]:
        """Reimage every rack at once; the racks whose reimage finished."""
        pollers = {}
        for rack in racks:
            try:
                pollers[rack.name] = self.azure.begin_reimage(rack)
            except Exception as exc:  # noqa: BLE001
                fail(rack, "reimage", short_error(exc))
        reimaged = []
        for rack in racks:
            if rack.name not in pollers:
                continue
            try:
                pollers[rack.name].result()
            except Exception as exc:  # noqa: BLE001
                again = f"; its VMs now report the latest model, so run again with --rack {rack.name}"
                fail(rack, "reimage", short_error(exc) + (again if stale.get(rack.name) else ""))
                continue
            self.log(f"  {rack.name}: reimaged")
            reimaged.append(rack)
        return reimaged

    def _resume(self, rack: Rack, seen: _Seen, fail: Callable[[Rack, str, str], None]) -> bool:
        """Resume the healthy rack's nodes the rollout drained; False when the rack failed."""
        try:
            mine = seen.mine(rack)
            if mine:
                self.slurm.resume(mine)
        except Exception as exc:  # noqa: BLE001
            fail(rack, "resume", short_error(exc))
            return False
        self.log(f"  {rack.name}: resumed {len(mine)} node(s)")
        return True

    def _update(
        self, racks: list[Rack], stale: Mapping[str, list[str]], fail: Callable[[Rack, str, str], None]
    ) -> list[Rack]:
        """Bring each rack's out-of-date VMs to the scale set's latest model (manual upgrade), all racks at once."""
        pollers = {}
        for rack in racks:
            if not stale.get(rack.name):
                continue  # already on the latest model (a rack named by --rack): only the reimage is left
            try:
                pollers[rack.name] = self.azure.begin_update(rack, stale[rack.name])
            except Exception as exc:  # noqa: BLE001
                fail(rack, "update to the latest model", short_error(exc))
        updated = []
        for rack in racks:
            if rack.name in pollers:
                try:
                    pollers[rack.name].result()
                except Exception as exc:  # noqa: BLE001
                    fail(rack, "update to the latest model", short_error(exc))
                    continue
                self.log(f"  {rack.name}: {len(stale[rack.name])} VM(s) updated to the latest model")
            elif stale.get(rack.name):
                continue  # its update could not start
            updated.append(rack)
        return updated

    def _wait_jobs(
        self, racks: list[Rack], hosts: Mapping[str, list[str]], fail: Callable[[Rack, str, str], None]
    ) -> list[Rack]:
        deadline = self.now() + self.job_timeout_s
        waiting = list(racks)
        ready: list[Rack] = []
        while True:
            still: list[Rack] = []
            for rack in waiting:
                try:
                    jobs = self.slurm.jobs(hosts[rack.name])
                except Exception as exc:  # noqa: BLE001
                    fail(rack, "wait for jobs", short_error(exc))
                    continue
                if not jobs:
                    self.log(f"  {rack.name}: no job left")
                    ready.append(rack)
                elif self.now() >= deadline:
                    fail(
                        rack,
                        "wait for jobs",
                        f"{len(jobs)} job(s) still running after {self.job_timeout_s:.0f}s "
                        f"({', '.join(jobs[:5])}); the rack stays drained",
                    )
                else:
                    still.append(rack)
            if not still:
                return [r for r in racks if r in ready]
            waiting = still
            self.sleep(self.poll_s)

    def _wait_health(
        self,
        racks: list[Rack],
        hosts: Mapping[str, list[str]],
        started: float,
        fail: Callable[[Rack, str, str], None],
    ) -> list[Rack]:
        deadline = self.now() + self.health_timeout_s
        waiting = list(racks)
        ready: list[Rack] = []
        while waiting:
            still: list[Rack] = []
            for rack in waiting:
                names = hosts[rack.name]
                try:
                    nodes = self.slurm.nodes(names)
                except Exception as exc:  # noqa: BLE001
                    fail(rack, "health gate", short_error(exc))
                    continue
                bad = [n for n in nodes.values() if n.drain_reason.startswith(HEALTH_PREFIX)]
                if bad:
                    first = bad[0]
                    fail(
                        rack, "health gate", f"{len(bad)} node(s) failed the health check; {first.name}: {first.reason}"
                    )
                    continue
                pending = [h for h in names if not _back(nodes.get(h), started)]
                if not pending:
                    self.log(f"  {rack.name}: {len(names)}/{len(names)} node(s) passed the health gate")
                    ready.append(rack)
                elif self.now() >= deadline:
                    fail(
                        rack,
                        "health gate",
                        f"{len(pending)} of {len(names)} node(s) not back after {self.health_timeout_s:.0f}s: "
                        f"{compress(pending)}",
                    )
                else:
                    still.append(rack)
            waiting = still
            if waiting:
                self.sleep(self.poll_s)
        return [r for r in racks if r in ready]


def _back(node: SlurmNode | None, started: float) -> bool:
    """The node registered again after the reimage started and is up (drained by the rollout is fine)."""
    return node is not None and node.boot_time >= started and not (node.states & _DOWN)


def short_error(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def report_lines(report: Report) -> list[str]:
    """The closing summary: racks done, the failure with its step and reason, racks not started."""
    lines = [f"rollout: {len(report.done)} rack(s) reimaged and resumed"]
    for failure in report.failed:
        lines.append(
            f"rollout stopped: rack {failure.rack.name} (pool {failure.rack.pool}, rack {failure.rack.index}) "
            f"failed at {failure.step}: {failure.reason}"
        )
    if report.not_started:
        names: Iterable[str] = (r.name for r in report.not_started)
        lines.append(f"not started ({len(report.not_started)}): {', '.join(names)}")
    return lines
