"""The CrossGuard front end: every rule of :data:`gb300.rules.RULES` as a stack validation policy.

Policies see the same camelCase inputs the plan records, so a rule gives the same findings in both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyPack,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)

from gb300 import rules
from gb300.findings import Level

PACK_NAME = "gb300"


@dataclass(frozen=True)
class PolicyResourceView:
    """A policy pack resource in the shape rules read (urn, type, name, inputs)."""

    urn: str
    type: str
    name: str
    inputs: Mapping[str, Any]


def _validator(rule_id: str) -> Any:
    rule = rules.RULES[rule_id]

    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        views = [PolicyResourceView(r.urn, r.resource_type, r.name, r.props) for r in args.resources]
        for finding in rule(views):
            if finding.level >= Level.WARNING:
                report_violation(f"{finding.message} [{finding.resource}]", None)

    return validate


def policies() -> list[Policy]:
    """One policy per rule id; the description is the rule's docstring's first line."""
    out: list[Policy] = []
    for rule_id, rule in rules.RULES.items():
        doc = (rule.__doc__ or rule_id).strip().splitlines()[0]
        out.append(
            StackValidationPolicy(
                name=rule_id,
                description=doc,
                enforcement_level=EnforcementLevel.MANDATORY,
                validate=_validator(rule_id),
            )
        )
    return out


def build_pack() -> PolicyPack:
    return PolicyPack(name=PACK_NAME, policies=policies(), enforcement_level=EnforcementLevel.MANDATORY)
