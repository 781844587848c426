"""Rules over the resources the program registers. Each rule is a pure function yielding findings.

Both front ends (``gb300 plan`` and the policy pack in ``policies/``) call :func:`evaluate` /
the rules in :data:`RULES`, so they give the same verdict on the same resources.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from gb300.config import PolicySettings
from gb300.findings import Finding, Level
from gb300.inventory import Resource

Rule = Callable[[Sequence[Resource]], Iterable[Finding]]

# Filled by the policy issue; ids are kebab-case and shared by rule, policy, suppression list and README.
RULES: dict[str, Rule] = {}


def evaluate(resources: Sequence[Resource], policy: PolicySettings) -> list[Finding]:
    """All findings of all rules not suppressed by ``gb300:policy.suppress``, sorted worst first."""
    findings: list[Finding] = []
    for rule_id, rule in RULES.items():
        if rule_id in policy.suppress:
            continue
        findings.extend(rule(resources))
    return sorted(findings, key=lambda f: (-f.level, f.rule, f.resource))


def failing(findings: Iterable[Finding], policy: PolicySettings) -> list[Finding]:
    """Findings at or above ``gb300:policy.failOn``."""
    threshold = Level.parse(policy.fail_on)
    return [f for f in findings if f.level >= threshold]
