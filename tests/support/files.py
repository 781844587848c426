"""Where the tests' data lives, and the one way a golden file is checked.

Input files shared by several test packages are under ``tests/fixtures/``; data one package's tests read lives
beside them (``tests/cost/fixtures/``). Every reviewed expected output is in a ``golden/`` folder beside the test
that checks it (``tests/node/golden/``, ``tests/slurm/golden/``) and is checked with :func:`assert_golden`.
``GB300_UPDATE_GOLDEN=1`` rewrites the goldens the run touches (then review the diff and commit it).
"""

from __future__ import annotations

import os
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1]
FIXTURES = TESTS_DIR / "fixtures"
UPDATE_GOLDEN = os.environ.get("GB300_UPDATE_GOLDEN") == "1"


def assert_golden(golden: Path, text: str) -> None:
    """``text`` equals the golden file ``golden``; with GB300_UPDATE_GOLDEN=1 it is written first."""
    if UPDATE_GOLDEN:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"{golden} is missing; run with GB300_UPDATE_GOLDEN=1 and review the diff"
    assert text == golden.read_text(encoding="utf-8"), (
        f"{golden} is out of date; rerun with GB300_UPDATE_GOLDEN=1 and review the diff"
    )
