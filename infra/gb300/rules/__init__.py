"""The one rule registry: every rule gb300 checks, with its kind, evaluated by ``gb300 plan`` and the policy pack.

A rule's id is written once, where its check is declared (:func:`~gb300.rules.base.resource_rule`,
:func:`~gb300.rules.base.config_rule`, :func:`~gb300.rules.base.state_rule`); its findings take the id from it.
Rule ids are kebab-case and shared by the check, the policy, the suppression list (``gb300:policy.suppress``)
and docs/rules.md. Kinds (:class:`~gb300.rules.base.Kind`):

* **resource**: reads the resources the program registers; the plan and the policy pack run it.
* **config**: reads the typed stack config (software pins, images); the plan and the policy pack run it (the pack
  reads the stack's config as the program does).
* **state**: compares the plan with the deployed state; only ``gb300 plan --state`` has that state. Not
  suppressible: ``gb300:storage.allowReplace`` and ``gb300:allowDestroy`` are the explicit consent.

One module per theme: :mod:`~gb300.rules.network`, :mod:`~gb300.rules.compute`, :mod:`~gb300.rules.security`,
:mod:`~gb300.rules.storage`, :mod:`~gb300.rules.checkpoint`, :mod:`~gb300.rules.tags`, :mod:`~gb300.rules.quota`
(resource); :mod:`~gb300.rules.software`, :mod:`~gb300.rules.images`, :mod:`~gb300.rules.identity` (config);
:mod:`~gb300.rules.data_loss`,
:mod:`~gb300.rules.destroy`, :mod:`~gb300.rules.reimage` (state).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gb300.azure import inventory
from gb300.azure.quota import QuotaSnapshot
from gb300.config import PolicySettings, format_path
from gb300.errors import Problem
from gb300.findings import Finding, Level
from gb300.resources import DeployedResource, Resource
from gb300.rules import (
    checkpoint,
    compute,
    data_loss,
    destroy,
    identity,
    images,
    monitoring,
    network,
    quota,
    reimage,
    reservations,
    secrets,
    security,
    software,
    storage,
    tags,
)
from gb300.rules.base import Kind, Rule, RuleContext

if TYPE_CHECKING:
    from gb300.azure.quota import QuotaSnapshot
    from gb300.config import StackConfig

REGISTRY: tuple[Rule[Any], ...] = (
    network.vnet_avoids_rdma_range,
    network.subnet_fits_pool,
    network.lustre_subnet_size,
    network.lustre_subnet_egress,
    network.nat_egress_capacity,
    compute.gpu_pool_rack_aligned,
    compute.ib_fabric_within_limits,
    compute.image_arch_matches_sku,
    compute.custom_data_size,
    compute.arm_body_matches_sdk,
    security.no_ssh_from_internet,
    security.no_public_ip_on_nodes,
    storage.lustre_capacity_valid,
    storage.zone_consistent,
    storage.lustre_root_squash,
    storage.storage_no_public_access,
    storage.blob_soft_delete,
    checkpoint.lustre_checkpoint_throughput,
    tags.required_tags,
    quota.quota_sufficient,
    reservations.capacity_reservation_supported,
    monitoring.grafana_shared_workspace_read,
    software.findings,
    secrets.findings,
    images.findings,
    images.image_version_exists,
    identity.stack_identity,
    data_loss.data_loss,
    destroy.findings,
    reimage.findings,
)
"""Every rule, in the order the policy pack lists them."""

BY_ID: dict[str, Rule[Any]] = {r.id: r for r in REGISTRY}

RULES: dict[str, Rule[Any]] = {r.id: r for r in REGISTRY if r.kind is Kind.RESOURCE}
"""The resource rules by id."""

CONFIG_RULES: frozenset[str] = frozenset(r.id for r in REGISTRY if r.kind is Kind.CONFIG)
STATE_RULES: frozenset[str] = frozenset(r.id for r in REGISTRY if r.kind is Kind.STATE)
SECURITY_RULES: frozenset[str] = frozenset(r.id for r in REGISTRY if r.security)
"""Rules about exposure: ``gb300:policy.suppress`` takes them only with a ``reason``, shown in every plan."""

PACK_RULES: tuple[Rule[Any], ...] = tuple(r for r in REGISTRY if r.kind is not Kind.STATE)
"""The rules the policy pack runs: all but the state rules (a policy pack is not handed the deployed state)."""

__all__ = [
    "BY_ID",
    "CONFIG_RULES",
    "PACK_RULES",
    "REGISTRY",
    "RULES",
    "SECURITY_RULES",
    "STATE_RULES",
    "Assessment",
    "Kind",
    "Rule",
    "RuleContext",
    "assess",
    "evaluate",
    "failing",
    "run_rule",
    "sort_findings",
    "suppressed_findings",
    "unknown_suppressions",
]


def unknown_suppressions(policy: PolicySettings) -> list[Problem]:
    """One problem per ``gb300:policy.suppress`` entry that names no suppressible rule (a typo would silently
    suppress nothing), or names a security rule without a reason (an exposure nobody explained)."""
    problems = []
    known = [r.id for r in REGISTRY if r.suppressible]
    for i, entry in enumerate(policy.suppress):
        rule_id = entry.rule
        rule = BY_ID.get(rule_id)
        if rule is None or not rule.suppressible:
            close = difflib.get_close_matches(rule_id, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; rule ids: {', '.join(known)}"
            problems.append(
                Problem(format_path(("policy", "suppress", i)), f"is not a rule id (got {rule_id!r}){hint}")
            )
        elif rule.security and not entry.reason:
            problems.append(
                Problem(
                    format_path(("policy", "suppress", i)),
                    f"suppresses the security rule {rule_id!r} without a reason; write it as "
                    f"{{rule: {rule_id}, reason: <why this exposure is acceptable>}} (every plan and pull request "
                    "summary shows it), or fix what the rule reports",
                )
            )
    return problems


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Worst first, then by rule and resource: the order every front end shows."""
    return sorted(findings, key=lambda f: (-f.level, f.rule, f.resource))


@dataclass
class Assessment:
    """What the registry found: the findings shown, and per suppressed rule what it would have reported."""

    findings: list[Finding] = field(default_factory=list)
    hidden: dict[str, list[Finding]] = field(default_factory=dict)


def assess(resources: Sequence[Resource], ctx: RuleContext, *, rules: Iterable[Rule[Any]] = REGISTRY) -> Assessment:
    """Run every rule of ``rules`` that ``ctx`` allows; a suppressed rule's findings go to ``hidden``."""
    out = Assessment()
    suppressed = ctx.policy.suppressed
    with inventory.shared_reads():  # the rules read each resource's views once between them
        for rule in rules:
            found = rule.evaluate(resources, ctx)
            if rule.suppressible and rule.id in suppressed:
                out.hidden[rule.id] = found
            else:
                out.findings.extend(found)
    out.findings = sort_findings(out.findings)
    return out


def _context(
    policy: PolicySettings,
    quota: QuotaSnapshot | None,
    config: StackConfig | None,
    deployed: Sequence[DeployedResource] | None,
) -> RuleContext:
    return RuleContext(policy=policy, quota=quota, config=config, deployed=deployed)


def evaluate(
    resources: Sequence[Resource],
    policy: PolicySettings,
    *,
    quota: QuotaSnapshot | None = None,
    config: StackConfig | None = None,
    deployed: Sequence[DeployedResource] | None = None,
) -> list[Finding]:
    """All findings of all rules not suppressed by ``gb300:policy.suppress``, sorted worst first."""
    return assess(resources, _context(policy, quota, config, deployed)).findings


def suppressed_findings(
    resources: Sequence[Resource],
    policy: PolicySettings,
    *,
    quota: QuotaSnapshot | None = None,
    config: StackConfig | None = None,
) -> dict[str, list[Finding]]:
    """Per suppressed rule, the findings it would report: what the suppression hides."""
    return assess(resources, _context(policy, quota, config, None)).hidden


def run_rule(rule_id: str, resources: Sequence[Resource], ctx: RuleContext) -> list[Finding]:
    """One rule's findings; a rule that breaks on input nobody foresaw yields a WARNING, never a traceback."""
    return BY_ID[rule_id].evaluate(resources, ctx)


def failing(findings: Iterable[Finding], policy: PolicySettings) -> list[Finding]:
    """Findings at or above ``gb300:policy.failOn``."""
    threshold = Level.parse(policy.fail_on)
    return [f for f in findings if f.level >= threshold]
