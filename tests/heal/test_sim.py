"""``gb300 heal simulate`` ticks as the head does: every tick opens the loop from the state as the head's file holds
it (gb300.heal.state.run_tick), so what the head keeps between ticks is what the simulator keeps."""

from __future__ import annotations

import pytest

from gb300.heal import state as heal_state
from gb300.heal.head import status_lines
from tests.heal.conftest import SCENARIOS, simulate


def test_the_simulated_heads_state_reads_as_the_heads_status_after_a_resume() -> None:
    """After a halt and a person's resume, the state the simulated head saved says what `gb300-heal status` says on
    a cluster: the halt's record, who resumed it and why, and the tick."""
    result = simulate(SCENARIOS / "resume-rejudges-glitch.yaml")
    assert result.saved["haltRecord"]["Decision"] == "halt"
    lines = status_lines(result.saved)
    assert lines[1] == "running"
    assert "by operator: scenario operator resume" in lines[2]


def test_every_tick_restores_from_the_saved_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop the simulator ticks is rebuilt from the encoded state each tick: a state that loses its open cases
    between ticks (a head whose state file was lost) repairs nothing it had started."""
    real = heal_state.decode

    def forgetful(text: str, where: object = "remediation state") -> dict[str, object]:
        doc = real(text, where)
        doc.pop("cases", None)
        return doc

    kept = simulate(SCENARIOS / "xid-fatal-idle.yaml").report()
    monkeypatch.setattr(heal_state, "decode", forgetful)
    lost = simulate(SCENARIOS / "xid-fatal-idle.yaml").report()
    assert kept["repaired"] >= 1
    assert lost["repaired"] == 0
