"""The quota rule: the plan's vCPUs fit Azure's quota per region and family (see :mod:`gb300.quota`)."""

from __future__ import annotations

from collections.abc import Sequence

from gb300 import quota
from gb300.findings import Finding
from gb300.inventory import Resource
from gb300.rules.base import RuleContext


def quota_sufficient(resources: Sequence[Resource], ctx: RuleContext) -> list[Finding]:
    """The vCPUs of every quota family (and the regional total) fit Azure's quota; the size is offered and allowed."""
    return quota.findings(resources, ctx.quota)
