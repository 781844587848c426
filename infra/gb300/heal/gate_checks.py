"""The health gate's checks and the evidence the loop reads from their failures: one table, read both ways.

The head reads a gate drain reason (``gb300: <check>: <value>[; ...]``) as events of the kinds the loop judges
(:func:`evidence_of`, :mod:`gb300.heal.head_slurm`); ``gb300 heal simulate`` writes, for a simulated fault of a
kind, the check it fails and the value that check prints (:func:`gate_failure`, :mod:`gb300.heal.world`). A check
not named here is ``check-failed`` with its name (a hard check of data/health.yaml acts at once). XID failures are
read apart (their codes and the job's teardown), but the simulator writes them from this table too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

CHECK_FAILED = "check-failed"
"""The evidence kind of a failed check the table does not name: judged by the check's name."""


@dataclass(frozen=True)
class GateCheck:
    """One check of gb300-health-check (data/health.yaml ``defaults.checks``) and what its failure is evidence of."""

    check: str
    kind: str
    """The evidence kind the head reads from its failure (:data:`CHECK_FAILED`: judged by the check's name)."""
    code: str | None = None
    sample: str | None = None
    """The value the check writes when it fails, as the simulator shows it (``{code}``: the fault's code)."""
    fault: str | None = None
    """The simulated fault kind whose gate failure this check shows (default: ``kind`` when ``sample`` is set)."""

    @property
    def shows(self) -> str | None:
        return self.fault or (self.kind if self.sample is not None else None)


CHECKS: tuple[GateCheck, ...] = (
    GateCheck("gpus", "gpu-missing", sample="3 GPUs visible, expected 4"),
    GateCheck("row-remap-failure", "ecc", "uncorrectable", sample="DCGM_FI_DEV_ROW_REMAP_FAILURE=1 on GPU 2"),
    GateCheck("ecc-dbe", "ecc", "uncorrectable"),
    GateCheck("retired-pages-pending", "ecc", "row-remap-pending"),
    GateCheck("ib", "ib-link-down", sample="mlx5_ib1 Down"),
    GateCheck("fabric-health", "nvlink-down", sample="GPU 3 Summary=Unhealthy"),
    GateCheck("nvlink-ber", "nvlink-down"),
    GateCheck("clock-events", "thermal-throttle", sample="DCGM_FI_DEV_CLOCKS_EVENT_REASONS=0x8 on GPU 1"),
    GateCheck("gpu-temperature", "thermal-throttle"),
    # What the gate's xid check writes (cloud-init/slurm/gb300-health-check, check_xid: ``<code>@<PCI address>``).
    GateCheck("xid", "xid", sample="XID in kernel log: {code}@0000:01:00.0 (reboot or report the node)"),
    # Hard and soft checks the loop judges by name; the simulator shows these faults' gate failures with them.
    GateCheck("ib-link-downed", CHECK_FAILED, sample="mlx5_ib2 link_downed +3 in 10800s", fault="ib-flap"),
    GateCheck("services", CHECK_FAILED, sample="nvidia-imex-ctl -q: not READY", fault="imex-unhealthy"),
)

_BY_CHECK: Mapping[str, GateCheck] = {c.check: c for c in CHECKS}
_BY_FAULT: Mapping[str, GateCheck] = {c.shows: c for c in reversed(CHECKS) if c.shows is not None}


def evidence_of(check: str) -> tuple[str, str | None]:
    """The evidence kind and code a failure of ``check`` stands for (``check-failed``, None for a check not named)."""
    row = _BY_CHECK.get(check)
    return (row.kind, row.code) if row is not None and row.kind != CHECK_FAILED else (CHECK_FAILED, None)


def gate_failure(kind: str, code: str | None = None) -> tuple[str, str] | None:
    """The check a fault of ``kind`` fails and the value it writes (None: no check shows that kind)."""
    row = _BY_FAULT.get(kind)
    if row is None or row.sample is None:
        return None
    return row.check, row.sample.format(code=code)


__all__ = ["CHECKS", "CHECK_FAILED", "GateCheck", "evidence_of", "gate_failure"]
