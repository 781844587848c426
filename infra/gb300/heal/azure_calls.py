"""Every Azure call the remediation loop makes, through azure-mgmt-compute, and the role that allows exactly them.

Calls (the SDK method, then the permission it needs):

* ``virtual_machine_scale_set_vms.list``: ``Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read``
  (a rack's computer names, which are the Slurm node names, and their instance ids);
* ``begin_restart``: ``.../virtualMachines/restart/action`` (rung ``reboot``);
* ``begin_reimage``: ``.../virtualMachines/reimage/action`` (rung ``reimage``: a fresh OS disk from the model);
* ``begin_redeploy``: ``.../virtualMachines/redeploy/action`` (rung ``replace``: the SDK documents it as "shuts down
  the virtual machine in the virtual machine scale set, moves it to a new node, and powers it back on"; the VM
  keeps its name, instance id and model, so no permission on the scale set's model is needed);
* ``get_instance_view``: ``.../virtualMachines/instanceView/read`` (after a head restart, whether a call the loop
  meant to make reached Azure: the VM's ``ProvisioningState/<state>`` status and its time; while a node is not back
  after a call ARM accepted, whether the operation failed: ``ProvisioningState/failed/<code>``);
* a Guest Health Report, ``PUT /subscriptions/{id}/providers/Microsoft.Impact/workloadImpacts/{name}`` sent
  through the same client's pipeline: ``Microsoft.Impact/workloadImpacts/write`` (subscription scope), and its
  insights read back, ``GET .../workloadImpacts/{name}/insights``: ``Microsoft.Impact/workloadImpacts/insights/read``.

No call needs ``Microsoft.Compute/virtualMachineScaleSets/write``: that permission rewrites the model, custom
data included, which is root on every node. Operations are started with ``polling=False``: the loop waits for
the node to register with Slurm again, which is what it needs, and reads the VM's instance view, not the operation
record, for an operation that failed after ARM accepted it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from azure.core.rest import HttpRequest

from gb300.slurm.hostlist import natural_key

VMS = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"
REPAIR_ACTIONS: tuple[str, ...] = (
    f"{VMS}/read",
    f"{VMS}/instanceView/read",
    f"{VMS}/restart/action",
    f"{VMS}/reimage/action",
    f"{VMS}/redeploy/action",
)
"""Actions on the GPU resource group: the role ``gb300 remediation``."""
REPORT_ACTIONS: tuple[str, ...] = (
    "Microsoft.Impact/workloadImpacts/write",
    "Microsoft.Impact/workloadImpacts/insights/read",
)
"""Actions at subscription scope, only with ``gb300:remediation.guestHealthReport``: ``gb300 guest health report``."""
RUNG_CALLS: Mapping[str, str] = {"reboot": "begin_restart", "reimage": "begin_reimage", "replace": "begin_redeploy"}


@dataclass(frozen=True)
class RackRef:
    """One rack's scale set in Azure."""

    name: str
    subscription_id: str
    resource_group: str


@dataclass(frozen=True)
class Instance:
    """A VM of a rack: its Slurm node name, instance id and ARM id."""

    host: str
    rack: RackRef
    instance_id: str
    resource_id: str
    vm_id: str = ""  # the VM's unique id (vmId): a Guest Health Report's VmUniqueId


class AzureRepairs:
    """The loop's Azure side; ``client_for(subscription)`` gives an azure-mgmt-compute ``ComputeManagementClient``."""

    def __init__(self, client_for: Callable[[str], Any], ghr_api_version: str) -> None:
        self._client_for = client_for
        self._ghr_api_version = ghr_api_version

    def instances(self, rack: RackRef) -> list[Instance]:
        client = self._client_for(rack.subscription_id)
        out = []
        for vm in client.virtual_machine_scale_set_vms.list(rack.resource_group, rack.name):
            profile = getattr(vm, "os_profile", None)
            host = str(getattr(profile, "computer_name", None) or vm.name)
            out.append(Instance(host, rack, str(vm.instance_id), str(vm.id), str(getattr(vm, "vm_id", None) or "")))
        return sorted(out, key=lambda i: natural_key(i.host))

    def repair(self, rung: str, instance: Instance) -> None:
        """Start ``rung`` (reboot, reimage, replace) on one VM; raises the SDK's error when Azure refuses."""
        operations = self._client_for(instance.rack.subscription_id).virtual_machine_scale_set_vms
        start = getattr(operations, RUNG_CALLS[rung])
        start(instance.rack.resource_group, instance.rack.name, instance.instance_id, polling=False)

    def operation_state(self, instance: Instance) -> tuple[bool, float | None]:
        """Whether an operation holds the VM now (``ProvisioningState/updating`` or ``creating``...), and when its
        provisioning state last changed (the ``time`` of that status, epoch seconds), from the VM's instance view."""
        state, _, when = self.provisioning(instance)
        return state not in ("", "succeeded", "failed", "canceled"), when

    def provisioning(self, instance: Instance) -> tuple[str, str | None, float | None]:
        """The VM's provisioning state from its instance view (``succeeded``, ``updating``, ``failed``...; empty when
        the view has none), the error code of a failed operation (``ProvisioningState/failed/AllocationFailed``:
        ARM accepted the call with 202 and the operation failed later) and when the state last changed."""
        operations = self._client_for(instance.rack.subscription_id).virtual_machine_scale_set_vms
        view = operations.get_instance_view(instance.rack.resource_group, instance.rack.name, instance.instance_id)
        for status in getattr(view, "statuses", None) or []:
            code = str(getattr(status, "code", "") or "")
            if code.startswith("ProvisioningState/"):
                parts = code.split("/")
                when = getattr(status, "time", None)
                failure = parts[2] if len(parts) > 2 and parts[2] else None
                return parts[1].lower(), failure, when.timestamp() if when is not None else None
        return "", None, None

    def guest_health_report(
        self, instance: Instance, *, category: str, description: str, physical_host: str, started: str
    ) -> str:
        """File a Guest Health Report for the host ``instance`` ran on; returns the report's name."""
        # One name per VM, host and fault: a PUT repeated after a head restart replaces the same report (ARM's PUT is
        # idempotent), it never files a second one.
        name = f"gb300-{uuid.uuid5(uuid.NAMESPACE_URL, f'{instance.resource_id}|{physical_host}|{started}')}"
        body = {
            "properties": {
                "startDateTime": started,
                "impactCategory": category,
                "impactDescription": description[:200],
                "impactedResourceId": instance.resource_id,
                "additionalProperties": {"PhysicalHostName": physical_host, "VmUniqueId": instance.vm_id},
            }
        }
        request = HttpRequest(
            "PUT",
            f"/subscriptions/{instance.rack.subscription_id}/providers/Microsoft.Impact/workloadImpacts/{name}",
            params={"api-version": self._ghr_api_version},
            json=body,
        )
        response = self._client_for(instance.rack.subscription_id).send_request(request)
        response.raise_for_status()
        return name

    def insights(self, instance: Instance, name: str) -> list[str]:
        """Azure's insights on a filed report (``GET .../workloadImpacts/{name}/insights``), as one line each."""
        request = HttpRequest(
            "GET",
            f"/subscriptions/{instance.rack.subscription_id}/providers/Microsoft.Impact/workloadImpacts/{name}"
            "/insights",
            params={"api-version": self._ghr_api_version},
        )
        response = self._client_for(instance.rack.subscription_id).send_request(request)
        response.raise_for_status()
        out = []
        for item in (response.json() or {}).get("value") or []:
            content = ((item or {}).get("properties") or {}).get("content") or {}
            out.append(str(content.get("title") or (item or {}).get("name") or "insight")[:200])
        return out


def role_definitions(
    subscription_id: str, resource_groups: Sequence[str], *, guest_health_report: bool
) -> list[dict[str, Any]]:
    """The custom role definitions an operator creates once (``az role definition create --role-definition``).

    The deploy pipeline's identity cannot write role definitions; the operator creates these, and assigns
    ``gb300 remediation`` to the loop's identity on each GPU resource group (and the report role on the
    subscription when Guest Health Reports are on).
    """
    roles = [
        {
            "Name": "gb300 remediation",
            "IsCustom": True,
            "Description": "Restart, reimage and redeploy GPU scale set VMs (gb300 heal); no scale set model writes.",
            "Actions": list(REPAIR_ACTIONS),
            "NotActions": [],
            "DataActions": [],
            "NotDataActions": [],
            "AssignableScopes": [f"/subscriptions/{subscription_id}/resourceGroups/{rg}" for rg in resource_groups],
        }
    ]
    if guest_health_report:
        roles.append(
            {
                "Name": "gb300 guest health report",
                "IsCustom": True,
                "Description": "File Azure Guest Health Reports for GPU hosts (gb300 heal).",
                "Actions": list(REPORT_ACTIONS),
                "NotActions": [],
                "DataActions": [],
                "NotDataActions": [],
                "AssignableScopes": [f"/subscriptions/{subscription_id}"],
            }
        )
    return roles
