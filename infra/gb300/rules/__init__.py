"""Rules over the resources the program registers. Each rule is a pure function yielding findings.

Both front ends (``gb300 plan`` and the policy pack in ``policies/``) call :func:`evaluate`, so they give the
same verdict on the same resources. Rule ids are kebab-case and shared by the check, the policy, the
suppression list (``gb300:policy.suppress``) and docs/rules.md. One module per theme:

* :mod:`~gb300.rules.network`: ``vnet-avoids-rdma-range``, ``subnet-fits-pool``, ``lustre-subnet-size``,
  ``lustre-subnet-egress``
* :mod:`~gb300.rules.compute`: ``gpu-pool-rack-aligned``, ``ib-fabric-within-limits``,
  ``image-arch-matches-sku``, ``custom-data-size``, ``arm-body-matches-sdk``
* :mod:`~gb300.rules.security`: ``no-ssh-from-internet``, ``no-public-ip-on-nodes``
* :mod:`~gb300.rules.storage`: ``lustre-capacity-valid``, ``zone-consistent``, ``storage-no-public-access``,
  ``blob-soft-delete``
* :mod:`~gb300.rules.checkpoint`: ``lustre-checkpoint-throughput``

* :mod:`~gb300.rules.tags`: ``required-tags``
* :mod:`~gb300.rules.quota`: ``quota-sufficient``

``storage-data-loss`` (:mod:`~gb300.rules.data_loss`) is not in :data:`RULES`: it compares against the deployed
state, which only ``gb300 plan --state`` has, and only ``gb300:storage.allowReplace`` silences it.
``software-checksums`` (:mod:`~gb300.rules.software`) reads the stack's software and images rather than
resources, so only ``gb300 plan`` runs it (not the policy pack); it is in :data:`CONFIG_RULES` and may be
suppressed like any rule. ``image-version-pinned`` (:mod:`~gb300.rules.images`) is the same kind: it reads the
pools' images, the image catalog and the software pins.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

from gb300.azure.inventory import Resource
from gb300.azure.quota import QuotaSnapshot
from gb300.config import PolicySettings, format_path
from gb300.errors import Problem
from gb300.findings import Finding, Level
from gb300.rules import checkpoint, compute, images, network, quota, security, software, storage, tags
from gb300.rules.base import Rule, RuleContext

RULES: dict[str, Rule] = {
    "vnet-avoids-rdma-range": network.vnet_avoids_rdma_range,
    "subnet-fits-pool": network.subnet_fits_pool,
    "lustre-subnet-size": network.lustre_subnet_size,
    "lustre-subnet-egress": network.lustre_subnet_egress,
    "gpu-pool-rack-aligned": compute.gpu_pool_rack_aligned,
    "ib-fabric-within-limits": compute.ib_fabric_within_limits,
    "image-arch-matches-sku": compute.image_arch_matches_sku,
    "custom-data-size": compute.custom_data_size,
    "arm-body-matches-sdk": compute.arm_body_matches_sdk,
    "no-ssh-from-internet": security.no_ssh_from_internet,
    "no-public-ip-on-nodes": security.no_public_ip_on_nodes,
    "lustre-capacity-valid": storage.lustre_capacity_valid,
    "zone-consistent": storage.zone_consistent,
    "storage-no-public-access": storage.storage_no_public_access,
    storage.SOFT_DELETE_RULE: storage.blob_soft_delete,
    checkpoint.RULE_ID: checkpoint.lustre_checkpoint_throughput,
    "required-tags": tags.required_tags,
    "quota-sufficient": quota.quota_sufficient,
}

CONFIG_RULES: frozenset[str] = frozenset({software.RULE_ID, images.RULE_ID})
"""Rule ids checked from the stack config by ``gb300 plan`` only; suppressible like :data:`RULES`."""

SECURITY_RULES: frozenset[str] = frozenset(
    {"no-ssh-from-internet", "no-public-ip-on-nodes", "storage-no-public-access"}
)
"""Rules about exposure: ``gb300:policy.suppress`` takes them only with a ``reason``, shown in every plan."""

__all__ = [
    "CONFIG_RULES",
    "RULES",
    "SECURITY_RULES",
    "Rule",
    "RuleContext",
    "evaluate",
    "failing",
    "run_rule",
    "suppressed_findings",
    "unknown_suppressions",
]


def unknown_suppressions(policy: PolicySettings) -> list[Problem]:
    """One problem per ``gb300:policy.suppress`` entry that names no rule (a typo would silently suppress
    nothing), or names a security rule without a reason (an exposure nobody explained)."""
    problems = []
    for i, entry in enumerate(policy.suppress):
        rule_id = entry.rule
        if rule_id not in RULES and rule_id not in CONFIG_RULES:
            known = [*RULES, *sorted(CONFIG_RULES)]
            close = difflib.get_close_matches(rule_id, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; rule ids: {', '.join(known)}"
            problems.append(
                Problem(format_path(("policy", "suppress", i)), f"is not a rule id (got {rule_id!r}){hint}")
            )
        elif rule_id in SECURITY_RULES and not entry.reason:
            problems.append(
                Problem(
                    format_path(("policy", "suppress", i)),
                    f"suppresses the security rule {rule_id!r} without a reason; write it as "
                    f"{{rule: {rule_id}, reason: <why this exposure is acceptable>}} (every plan and pull request "
                    "summary shows it), or fix what the rule reports",
                )
            )
    return problems


def suppressed_findings(
    resources: Sequence[Resource], policy: PolicySettings, *, quota: QuotaSnapshot | None = None
) -> dict[str, list[Finding]]:
    """Per suppressed rule of :data:`RULES`, the findings it would report: what the suppression hides."""
    ctx = RuleContext(policy=policy, quota=quota)
    return {rule_id: run_rule(rule_id, resources, ctx) for rule_id in RULES if rule_id in policy.suppressed}


def run_rule(rule_id: str, resources: Sequence[Resource], ctx: RuleContext) -> list[Finding]:
    """One rule's findings; a rule that breaks on input nobody foresaw yields a WARNING, never a traceback."""
    try:
        return list(RULES[rule_id](resources, ctx))
    except Exception as exc:  # noqa: BLE001 - a rule bug must not hide every other finding
        return [
            Finding(
                rule_id,
                Level.WARNING,
                "gb300:policy",
                f"rule {rule_id} could not finish ({type(exc).__name__}: {exc}); its check was skipped. "
                "Please report this with the plan JSON (gb300 plan --json).",
            )
        ]


def evaluate(
    resources: Sequence[Resource], policy: PolicySettings, *, quota: QuotaSnapshot | None = None
) -> list[Finding]:
    """All findings of all rules not suppressed by ``gb300:policy.suppress``, sorted worst first."""
    ctx = RuleContext(policy=policy, quota=quota)
    findings: list[Finding] = []
    for rule_id in RULES:
        if rule_id in policy.suppressed:
            continue
        findings.extend(run_rule(rule_id, resources, ctx))
    return sorted(findings, key=lambda f: (-f.level, f.rule, f.resource))


def failing(findings: Iterable[Finding], policy: PolicySettings) -> list[Finding]:
    """Findings at or above ``gb300:policy.failOn``."""
    threshold = Level.parse(policy.fail_on)
    return [f for f in findings if f.level >= threshold]
