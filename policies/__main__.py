"""The gb300 CrossGuard policy pack: ``pulumi preview --policy-pack policies``.

Each policy wraps a rule of :mod:`gb300.rules`, so the pack and ``gb300 plan`` give the same verdict. The
pack imports gb300 from this checkout's ``infra/`` (not an installed copy), so it always runs the rules
that sit beside it.
"""

from __future__ import annotations

import sys
from pathlib import Path

INFRA = Path(__file__).resolve().parents[1] / "infra"
if str(INFRA) not in sys.path:
    sys.path.insert(0, str(INFRA))

from gb300.policy_pack import build_pack  # noqa: E402 - needs the checkout's infra/ on the path first

build_pack()
