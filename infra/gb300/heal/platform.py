"""Azure Scheduled Events in the simulated world (scenario ``scheduled``; :class:`gb300.heal.world.World`).

Azure announces Freeze, Reboot, Redeploy, Preempt and Terminate of a VM through IMDS Scheduled Events, each with a
``NotBefore`` (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events). On a GPU node
``gb300-scheduled-events`` (cloud-init/slurm/gb300-scheduled-events, tests/node/test_scheduled_events.py) drains the
node with ``gb300-maintenance: <EventType> <EventId> not before <NotBefore> (Azure Scheduled Events)`` unless it is
drained already (then the drain keeps its reason), and resumes only its own drains once Azure lists the event no
more. The simulated platform starts each event at its ``NotBefore`` (the node's early acknowledgement is left out):
Freeze pauses the VM for ``freezeSeconds``, Reboot and Redeploy take the simulated reboot and replace times and cure
what the loop's call of the same kind cures (a Redeploy moves the VM to a new host), Preempt and Terminate delete
the VM (its Slurm record stays, DOWN, with no VM behind it).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from gb300.facts.loader import data
from gb300.heal.scenario import Scenario, match
from gb300.slurm.client import MAINTENANCE_PREFIX

CALL = {"Reboot": "restart", "Redeploy": "redeploy"}
"""The loop's call a platform Reboot or Redeploy acts as: it takes as long and cures what that call cures."""
GONE = ("Preempt", "Terminate")
"""Types that delete the VM."""
Phase = Literal["future", "scheduled", "started", "done"]


@dataclass
class PlatformEvent:
    """One Scheduled Event on one node: announced, then started at its NotBefore, then over."""

    event_id: str
    node: str
    type: str
    announced: float
    starts: float
    phase: Phase = "future"

    def reason(self) -> str:
        """The drain reason gb300-scheduled-events writes for it."""
        when = datetime.fromtimestamp(self.starts, UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")
        return f"{MAINTENANCE_PREFIX} {self.type} {self.event_id} not before {when} (Azure Scheduled Events)"


def events_of(scenario: Scenario) -> list[PlatformEvent]:
    """The scenario's ``scheduled`` entries, one per matching node, in time order."""
    raw = data("remediation.yaml")["simulation"]["scheduledEvents"]
    names = scenario.nodes
    out = []
    for i, spec in enumerate(scenario.scheduled):
        notice = spec.notBefore if spec.notBefore is not None else float(raw["notice"][spec.type])
        for node in match(spec.node, names):
            event_id = str(uuid.uuid5(uuid.NAMESPACE_DNS, f"gb300-sim-event-{i}-{node}")).upper()
            out.append(PlatformEvent(event_id, node, spec.type, spec.at, spec.at + notice))
    return sorted(out, key=lambda e: (e.announced, e.node))


def freeze_s() -> float:
    """How long a Freeze pauses the VM (data/remediation.yaml simulation.scheduledEvents.freezeSeconds)."""
    return float(data("remediation.yaml")["simulation"]["scheduledEvents"]["freezeSeconds"])


__all__ = ["CALL", "GONE", "PlatformEvent", "events_of", "freeze_s"]
