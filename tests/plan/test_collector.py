"""A plan tunes the cyclic collector while it runs (plan/runner.py) and gives it back as it found it.

Commands such as `gb300 rollout` plan and then keep working in the same process; a collector left off, frozen or
with the plan's thresholds would grow their memory.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

from gb300.plan import runner


def _collector() -> tuple[bool, tuple[int, ...], int]:
    return gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()


def test_a_plan_leaves_the_collector_as_it_found_it(dev_raw: dict[str, Any]) -> None:
    before = _collector()
    seen: list[tuple[bool, tuple[int, ...], int]] = []

    def program() -> None:
        seen.append(_collector())  # while the program declares: off, young-only thresholds
        import gb300.program  # noqa: PLC0415

        gb300.program.main()

    records = runner.register("dev", dev_raw, program)
    assert records
    assert seen[0][0] is False, "the collector should be off while the program declares its resources"
    assert seen[0][1] == (runner.YOUNG_GC_THRESHOLD, runner.MIDDLE_GC_THRESHOLD, 1000)
    assert _collector() == before


def test_a_program_that_fails_leaves_the_collector_as_it_found_it(dev_raw: dict[str, Any]) -> None:
    before = _collector()

    def program() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        runner.register("dev", dev_raw, program)
    assert _collector() == before
