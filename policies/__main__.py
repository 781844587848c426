"""The gb300 CrossGuard policy pack: ``pulumi preview --policy-pack policies``.

Each policy wraps a rule of :mod:`gb300.rules`, so the pack and ``gb300 plan`` give the same verdict.
"""

from __future__ import annotations

from gb300.policy_pack import build_pack

build_pack()
