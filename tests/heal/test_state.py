"""The loop's saved racks' VMs (gb300.heal.state): written compactly, read back whole, old states still read."""

from __future__ import annotations

import json

from gb300.heal import state
from gb300.heal.azure_calls import Instance, RackRef

RACKS = [RackRef(f"gpu-r000{r}", "sub", "rg") for r in (1, 2)]
BASE = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets"


def _instances() -> dict[str, Instance]:
    out = {}
    for rack in RACKS:
        for i in range(3):
            host = f"{rack.name}-{i:02d}"
            out[host] = Instance(host, rack, str(i), f"{BASE}/{rack.name}/virtualMachines/{i}", f"vm-{rack.name}-{i}")
    odd = Instance("moved-00", RACKS[1], "7", f"{BASE}/other-ss/virtualMachines/7-old", "vm-odd")
    return {**out, "moved-00": odd}


def test_the_listing_reads_back_as_it_was_saved() -> None:
    """Every VM comes back from the saved JSON with its rack, instance id, ARM id and vmId, including one whose ARM
    id does not end in its instance id; a rack no longer in the stack is dropped."""
    saved = json.loads(json.dumps({"racksListed": state.listing_doc(_instances().values())}))
    assert state.instances_of(saved, RACKS) == _instances()
    assert set(state.instances_of(saved, RACKS[:1])) == {f"{RACKS[0].name}-{i:02d}" for i in range(3)}


def test_a_state_written_vm_by_vm_still_reads() -> None:
    """A state saved before the compact listing (``instances``, one entry per VM) restores the same VMs."""
    old = [
        {"host": i.host, "rack": i.rack.name, "instanceId": i.instance_id, "resourceId": i.resource_id, "vmId": i.vm_id}
        for i in _instances().values()
    ]
    assert state.instances_of({"instances": old}, RACKS) == _instances()
