"""``gb300 status``: each deployed rack's nodes as ready, failed (step and reason), booting or missing, live.

Everything comes through azure-mgmt-compute:

* the racks are the deployed rack scale sets of the state file (``pulumi stack export``), with their capacity;
* ``virtualMachineScaleSets/<rack>/virtualMachines?$expand=instanceView`` lists the VMs that exist, with
  Azure's provisioning and power state: a VM short of the capacity is **missing**, a VM whose provisioning
  failed is **failed** at step ``azure`` with Azure's message, a VM not running is **stopped**;
* on each running VM, Run Command (``RunShellScript``) reads what the bootstrap writes: ``/var/lib/gb300/status``
  (``state: ready`` or ``state: failed`` with ``step:`` and ``reason:``) and ``/run/gb300/current-step`` (the
  step in progress). No status file yet means **booting** (with the step in progress, when there is one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from gb300 import tags as gb300_tags
from gb300.azure import inventory
from gb300.node import paths as node_paths
from gb300.ops.rollout import Rack, short_error
from gb300.resources import DeployedResource
from gb300.slurm.hostlist import natural_key

STATUS_FILE = node_paths.STATUS
CURRENT_STEP = "/run/gb300/current-step"
SCRIPT = [
    f"if [ -r {STATUS_FILE} ]; then cat {STATUS_FILE}; else echo 'state: booting'; fi",
    f'if [ -r {CURRENT_STEP} ]; then echo "current: $(cat {CURRENT_STEP})"; fi',
]
READY, FAILED, BOOTING, STOPPED, MISSING = "ready", "failed", "booting", "stopped", "missing"


@dataclass(frozen=True)
class NodeStatus:
    """One node of a rack: its state and, when failed or booting, the step and why."""

    host: str
    state: str
    step: str = ""
    reason: str = ""
    latest_model: bool = True  # Azure's latestModelApplied: False means an old node configuration until rolled out


def deployed_racks(deployed: Sequence[DeployedResource]) -> list[Rack]:
    """The deployed rack scale sets (tag :data:`gb300.tags.RACK`) in pool and rack order, with their capacity."""
    out = []
    for d in deployed:
        if not inventory.is_scale_set(d):
            continue
        tags = _mapping(d.inputs.get("tags"))
        rack = gb300_tags.rack_of(tags) or ""
        if not rack.isdigit():
            continue
        sku = _mapping(d.inputs.get("sku"))
        subscription, group, name = inventory.arm_address(d.id, d.inputs, d.name)
        out.append(
            Rack(
                pool=gb300_tags.pool_of(tags) or "",
                index=int(rack),
                name=name,
                subscription_id=subscription,
                resource_group=group,
                vms=int(sku.get("capacity") or 0),
            )
        )
    return sorted(out, key=lambda r: (r.pool, r.index, natural_key(r.name)))


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def parse_status(text: str) -> tuple[str, str, str]:
    """(state, step, reason) from the Run Command's output of :data:`SCRIPT`."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in {"state", "step", "reason", "current"}:
            fields.setdefault(key.strip(), value.strip())
    state = fields.get("state", "")
    if state == READY:
        return READY, "", ""
    if state == FAILED:
        return FAILED, fields.get("step", "?"), fields.get("reason", "")
    return BOOTING, fields.get("current", ""), ""


def _stdout(result: Any) -> str:
    """The ``[stdout]`` part of a Linux Run Command result (``value[0].message``)."""
    message = ""
    for item in getattr(result, "value", None) or []:
        message += str(getattr(item, "message", "") or "")
    if "[stdout]" in message:
        message = message.split("[stdout]", 1)[1]
    return message.split("[stderr]", 1)[0]


class FleetStatus:
    """Reads racks through ``client_for(subscription) -> ComputeManagementClient``; ``workers`` Run Commands at once."""

    def __init__(self, client_for: Callable[[str], Any], workers: int = 16) -> None:
        self._client_for = client_for
        self.workers = workers

    def rack(self, rack: Rack) -> list[NodeStatus]:
        client = self._client_for(rack.subscription_id)
        vms = list(client.virtual_machine_scale_set_vms.list(rack.resource_group, rack.name, expand="instanceView"))
        out: list[NodeStatus] = []
        running = []
        for vm in vms:
            host = str(getattr(getattr(vm, "os_profile", None), "computer_name", None) or vm.name)
            codes = {}
            for s in getattr(getattr(vm, "instance_view", None), "statuses", None) or []:
                kind, _, value = str(s.code or "").partition("/")
                codes[kind] = (value.lower(), str(s.message or s.display_status or ""))
            provisioning = codes.get("ProvisioningState", (str(vm.provisioning_state or "").lower(), ""))
            if provisioning[0] == "failed":
                out.append(NodeStatus(host, FAILED, "azure", provisioning[1] or "provisioning failed"))
            elif codes.get("PowerState", ("running", ""))[0] != "running":
                out.append(NodeStatus(host, STOPPED, "", f"power state {codes['PowerState'][0]}"))
            else:
                running.append((host, vm))

        old = {
            str(getattr(getattr(vm, "os_profile", None), "computer_name", None) or vm.name)
            for vm in vms
            if getattr(vm, "latest_model_applied", True) is False
        }

        def read(item: tuple[str, Any]) -> NodeStatus:
            host, vm = item
            try:
                result = client.virtual_machine_scale_set_vms.begin_run_command(
                    rack.resource_group,
                    rack.name,
                    vm.instance_id,
                    {"commandId": "RunShellScript", "script": SCRIPT},
                ).result()
            except Exception as exc:  # noqa: BLE001 - a node that cannot answer is reported, not fatal
                return NodeStatus(host, BOOTING, "", f"Run Command failed: {short_error(exc, 160)}")
            state, step, reason = parse_status(_stdout(result))
            return NodeStatus(host, state, step, reason)

        with ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            out.extend(pool.map(read, running))
        out = [replace(n, latest_model=n.host not in old) for n in out]
        out.sort(key=lambda n: natural_key(n.host))
        for i in range(rack.vms - len(vms)):
            out.append(NodeStatus(f"({i + 1} of {rack.vms - len(vms)})", MISSING, "", "no VM in the scale set"))
        return out


def lines(rows: Iterable[tuple[Rack, list[NodeStatus]]]) -> tuple[list[str], bool]:
    """The table (one row per rack, then one line per node that is not ready) and whether all are ready."""
    rows = list(rows)
    width = max([len(r.name) for r, _ in rows] + [4])
    head = f"{'RACK':<{width}}  {'READY':>7}  {'FAILED':>6}  {'BOOTING':>7}  {'STOPPED':>7}  {'MISSING':>7}"
    out = [f"{head}  {'OLD MODEL':>9}"]
    details = []
    all_ready = True
    for rack, nodes in rows:
        count = {s: sum(1 for n in nodes if n.state == s) for s in (READY, FAILED, BOOTING, STOPPED, MISSING)}
        total = max(rack.vms, len(nodes))
        out.append(
            f"{rack.name:<{width}}  {count[READY]:>3}/{total:<3}  {count[FAILED]:>6}  {count[BOOTING]:>7}  "
            f"{count[STOPPED]:>7}  {count[MISSING]:>7}  {sum(1 for n in nodes if not n.latest_model):>9}"
        )
        if count[READY] != total:
            all_ready = False
        for n in nodes:
            if n.state == FAILED:
                details.append(f"{rack.name}: {n.host}: failed at {n.step}: {n.reason}")
            elif n.state == BOOTING:
                step = f" (step {n.step})" if n.step else ""
                why = f": {n.reason}" if n.reason else ""
                details.append(f"{rack.name}: {n.host}: booting{step}{why}")
            elif n.state in (STOPPED, MISSING):
                details.append(f"{rack.name}: {n.host}: {n.state}: {n.reason}")
    ready = sum(1 for _, nodes in rows for n in nodes if n.state == READY)
    total_vms = sum(max(r.vms, len(n)) for r, n in rows)
    summary = [f"{ready:,} of {total_vms:,} node(s) ready in {len(rows)} rack(s)"]
    stale = [r.name for r, nodes in rows if any(not n.latest_model for n in nodes)]
    if stale:
        summary.append(
            f"{len(stale)} rack(s) run an old node configuration (Azure: latestModelApplied false): "
            f"{', '.join(stale[:5])}{', ...' if len(stale) > 5 else ''}; roll them out with `gb300 rollout`"
        )
    return [*out, *details, *summary], all_ready
