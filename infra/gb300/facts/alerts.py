"""Prometheus alert rules as data: ``templates/alerts/*.yaml`` in Prometheus rule-file format.

The monitoring component turns each group into an ``alertsmanagement.PrometheusRuleGroup``; the tests check
that every expression names only metrics the node exporters emit (``data/metrics.yaml``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gb300.facts.loader import read_yaml
from gb300.paths import TEMPLATES_DIR

ALERTS_DIR = TEMPLATES_DIR / "alerts"


def iso_duration(text: str) -> str:
    """Prometheus ``5m`` / ``1h`` / ``30s`` as the ISO 8601 duration Azure's rule groups take (``PT5M``)."""
    match = re.fullmatch(r"(\d+)([smh])", text.strip())
    if not match:
        raise ValueError(f"'for'/'interval' must be like 5m, 1h or 30s (got {text!r})")
    return f"PT{match.group(1)}{match.group(2).upper()}"


@dataclass(frozen=True)
class AlertRule:
    """One alerting rule of a rule group file."""

    alert: str
    expr: str
    for_: str
    severity: int
    labels: dict[str, str]
    annotations: dict[str, str]


@dataclass(frozen=True)
class AlertGroup:
    """One Prometheus rule group, as ``templates/alerts/*.yaml`` declares it."""

    name: str
    interval: str
    rules: tuple[AlertRule, ...]


def alert_groups() -> list[AlertGroup]:
    """Every rule group of every file in ``templates/alerts/`` (Prometheus rule-file format)."""
    groups: list[AlertGroup] = []
    for path in sorted(ALERTS_DIR.glob("*.yaml")):
        doc = read_yaml(path) or {}
        for group in doc.get("groups", []):
            rules = tuple(
                AlertRule(
                    alert=str(rule["alert"]),
                    expr=" ".join(str(rule["expr"]).split()),
                    for_=str(rule.get("for", "0m")),
                    severity=int(rule.get("labels", {}).get("severity", 3)),
                    labels={k: str(v) for k, v in rule.get("labels", {}).items() if k != "severity"},
                    annotations={k: str(v) for k, v in rule.get("annotations", {}).items()},
                )
                for rule in group["rules"]
            )
            groups.append(AlertGroup(str(group["name"]), str(group.get("interval", "1m")), rules))
    return groups
