"""Where the tests' data lives, and the one way a golden file is checked.

Every input file a test reads is under ``tests/fixtures/``; every reviewed expected output is under
``tests/golden/`` and is checked with :func:`assert_golden`. ``GB300_UPDATE_GOLDEN=1`` rewrites the goldens
the run touches (then review the diff and commit it).
"""

from __future__ import annotations

import os
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1]
FIXTURES = TESTS_DIR / "fixtures"
GOLDEN = TESTS_DIR / "golden"
UPDATE_GOLDEN = os.environ.get("GB300_UPDATE_GOLDEN") == "1"


def assert_golden(name: str, text: str) -> None:
    """``text`` equals the golden file ``tests/golden/<name>``; with GB300_UPDATE_GOLDEN=1 it is written first."""
    golden = GOLDEN / name
    if UPDATE_GOLDEN:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"{golden} is missing; run with GB300_UPDATE_GOLDEN=1 and review the diff"
    assert text == golden.read_text(encoding="utf-8"), (
        f"{golden} is out of date; rerun with GB300_UPDATE_GOLDEN=1 and review the diff"
    )
