"""Self-healing racks (docs/self-healing.md): evidence rules, the remediation ladder and its rails, and a simulator.

Modules: :mod:`~gb300.heal.policy` (thresholds from data/remediation.yaml and ``gb300:remediation``),
:mod:`~gb300.heal.evidence` (events judged in context), :mod:`~gb300.heal.loop` (the ladder and the rails),
:mod:`~gb300.heal.ports` (the channels the loop talks through), :mod:`~gb300.heal.azure_calls` (the Azure calls and
the role allowing exactly them); and, apart from the loop, :mod:`~gb300.heal.scenario`, :mod:`~gb300.heal.sim` and
:mod:`~gb300.heal.generate` (the simulated fleet that alone reads a scenario's truth).
"""

from __future__ import annotations

from gb300.heal.evidence import Event, GateResult, Judge, Verdict, parse_gate_result
from gb300.heal.loop import PREFIX, Remediator

__all__ = ["PREFIX", "Event", "GateResult", "Judge", "Remediator", "Verdict", "parse_gate_result"]
