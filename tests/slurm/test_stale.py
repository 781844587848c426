"""gb300.slurm.stale: which node records of an NVLink domain belong to replaced instances, from the records alone."""

from __future__ import annotations

import io
import sys

import pytest

from gb300.slurm import stale

UUID = "5e797fc6-0c2a-4c3e-9a51-6f1d2b3c4d5e"
OTHER = "0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9"
BLOCK = 18


def _line(name: str, state: str = "IDLE+DYNAMIC_NORM", uuid: str | None = UUID, clique: int = 32766) -> str:
    extra = f"gb300-nvlink:{uuid}:{clique}" if uuid else ""
    return f"NodeName={name} Arch=aarch64 CPUs=144 State={state} Extra={extra} NodeAddr=10.0.0.1 Reason=none"


def _rack(
    prefix: str = "c-train-r0001-", count: int = BLOCK, uuid: str = UUID, silent: tuple[int, ...] = ()
) -> list[str]:
    down = "DOWN+DYNAMIC_NORM+NOT_RESPONDING"
    return [_line(f"{prefix}{i:06d}", down if i in silent else "IDLE+DYNAMIC_NORM", uuid) for i in range(1, count + 1)]


def _deleted(lines: list[str]) -> list[str]:
    return [name for d in stale.decide(stale.parse_records("\n".join(lines)), BLOCK) for name in d.delete]


DOWN = "DOWN+DYNAMIC_NORM+NOT_RESPONDING"
NEW = _line("c-train-r0001-00000i")  # the replacement instance, registered and published in the same domain


@pytest.mark.parametrize(
    ("lines", "deleted"),
    [
        pytest.param(_rack(), [], id="full-rack-all-responding"),
        pytest.param(_rack(silent=(3, 7)), [], id="two-nodes-rebooting-no-surplus"),
        pytest.param([*_rack(silent=(5,)), NEW], ["c-train-r0001-000005"], id="one-replaced"),
        pytest.param([*_rack(silent=(5, 7)), NEW], [], id="replaced-while-another-reboots"),
        pytest.param(
            [*_rack(silent=tuple(range(1, 19))), *_rack("c-train-r0001-1", silent=())],
            [f"c-train-r0001-{i:06d}" for i in range(1, 19)],
            id="whole-rack-replaced",
        ),
        pytest.param([*_rack(silent=()), NEW], [], id="surplus-but-all-respond"),
        pytest.param(
            [
                *_rack(silent=(5,))[:-1],
                _line("c-train-r0001-000018", "MIXED+NOT_RESPONDING"),
                NEW,
                NEW.replace("0i", "0j"),
            ],
            ["c-train-r0001-000005"],
            id="a-silent-record-with-a-job-is-kept",
        ),
        pytest.param(
            [*_rack(silent=(5,), uuid=OTHER), *(_line(f"c-other-{i}", DOWN, uuid=None) for i in range(30))],
            [],
            id="records-without-identity-are-never-counted",
        ),
        pytest.param(
            [*_rack(silent=(5,)), NEW, *_rack("c-train-r0002-", uuid=OTHER, silent=(2, 3))],
            ["c-train-r0001-000005"],
            id="domains-are-separate",
        ),
    ],
)
def test_replaced_records_are_the_silent_surplus_of_a_domain(lines: list[str], deleted: list[str]) -> None:
    """A record is deleted only when its domain holds more records than VMs and no more are silent than the
    surplus; records with a job are kept for a later run."""
    assert sorted(_deleted(lines)) == sorted(deleted)


def test_an_ambiguous_domain_is_reported_with_the_silent_records() -> None:
    """When more records are silent than replaced, the report names them and says they are kept."""
    [decision] = stale.decide(stale.parse_records("\n".join([*_rack(silent=(5, 7)), NEW])), BLOCK)
    assert decision.delete == ()
    assert "19 records for 18 VMs" in decision.reason
    assert "c-train-r0001-[000005,000007] (2)" in decision.reason
    assert "kept until the others respond again" in decision.reason


def test_cli_prints_the_names_to_delete(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`python3 -m gb300.slurm.stale` reads `scontrol show node -o` and prints one name to delete a line."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join([*_rack(silent=(5,)), NEW]) + "\n"))
    assert stale.main(["--block-size", "18"]) == 0
    out, err = capsys.readouterr()
    assert out == "c-train-r0001-000005\n"
    assert "replaced instances (not responding): c-train-r0001-000005" in err


def test_cli_refuses_a_block_size_below_one(capsys: pytest.CaptureFixture[str]) -> None:
    """A block size of 0 is refused with exit 2 and a message naming the flag."""
    assert stale.main(["--block-size", "0"]) == 2
    assert "--block-size: must be at least 1 (got 0)" in capsys.readouterr().err
