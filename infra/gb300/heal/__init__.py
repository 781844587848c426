"""Self-healing racks (docs/self-healing.md): evidence rules, the remediation ladder and its rails, and a simulator.

Modules: :mod:`~gb300.heal.policy` (thresholds from data/remediation.yaml and ``gb300:remediation``),
:mod:`~gb300.heal.evidence` (events judged in context), :mod:`~gb300.heal.loop` (the ladder and the rails) and
:mod:`~gb300.heal.case` (a node's case and the rules it reads), :mod:`~gb300.heal.nccl` (the rack run's verdict),
:mod:`~gb300.heal.ports` (the channels the loop talks through), :mod:`~gb300.heal.azure_calls` (the Azure calls and
the role allowing exactly them), :mod:`~gb300.heal.state` (the state between ticks, and the tick itself),
:mod:`~gb300.heal.gate_checks` (the gate's checks as evidence); on the head, :mod:`~gb300.heal.head` (the command
line) with its adapters :mod:`~gb300.heal.head_slurm` and :mod:`~gb300.heal.head_host`, shipped by
:mod:`~gb300.heal.deploy`; and, apart from the loop, :mod:`~gb300.heal.scenario`, :mod:`~gb300.heal.sim`,
:mod:`~gb300.heal.world` and :mod:`~gb300.heal.generate` (the simulated fleet that alone reads a scenario's truth),
over :mod:`~gb300.heal.fake_arm` (the one fake Azure Resource Manager).
"""

from __future__ import annotations

from gb300.heal.evidence import Event, GateResult, Judge, Verdict, parse_gate_result
from gb300.heal.ladder import PREFIX
from gb300.heal.loop import Remediator

__all__ = ["PREFIX", "Event", "GateResult", "Judge", "Remediator", "Verdict", "parse_gate_result"]
