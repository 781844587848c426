"""Prometheus rule groups as data: ``templates/alerts/*.yaml`` in Prometheus rule-file format.

The monitoring component turns each group into an ``alertsmanagement.PrometheusRuleGroup``; the tests check
that every expression names only metrics listed in ``data/metrics.yaml`` (what the exporters emit, and what the
recording rules record). A group holds alerting rules or recording rules, never both: the recording groups are
deployed whenever Grafana or the alerts read them, the alerting groups only with the alerts.

A rule file may name a stack value as ``@name@`` (``@goodput_floor@``); :func:`alert_groups` fills each from the
``values`` it is given (the stack's ``gb300:monitoring.alerts.goodput`` keys, docs/goodput.md) and refuses a file
that names a value it was not given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gb300.facts.loader import read_yaml
from gb300.paths import TEMPLATES_DIR

ALERTS_DIR = TEMPLATES_DIR / "alerts"
PLACEHOLDER = re.compile(r"@([a-z_]+)@")
GOODPUT_ALERTS = "goodput"
"""The alerting group of ``templates/alerts/goodput.yaml``; ``gb300:monitoring.alerts.goodput.enabled`` drops it."""


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
class RecordingRule:
    """One recording rule of a rule group file: ``expr`` evaluated each interval and stored as ``record``."""

    record: str
    expr: str


@dataclass(frozen=True)
class AlertGroup:
    """One Prometheus rule group, as ``templates/alerts/*.yaml`` declares it: alerting rules or recording rules."""

    name: str
    interval: str
    rules: tuple[AlertRule, ...]
    records: tuple[RecordingRule, ...] = ()


def fill(text: str, values: Mapping[str, str], where: str) -> str:
    """``text`` with each ``@name@`` replaced by ``values[name]``; a name not given is a ValueError naming ``where``."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise ValueError(f"{where}: @{name}@ names no stack value (given: {', '.join(sorted(values)) or 'none'})")
        return values[name]

    return PLACEHOLDER.sub(one, text)


def _alert(rule: dict[str, Any], values: Mapping[str, str], where: str) -> AlertRule:
    labels = rule.get("labels", {})
    return AlertRule(
        alert=str(rule["alert"]),
        expr=fill(" ".join(str(rule["expr"]).split()), values, where),
        for_=fill(str(rule.get("for", "0m")), values, where),
        severity=int(labels.get("severity", 3)),
        labels={k: str(v) for k, v in labels.items() if k != "severity"},
        annotations={k: fill(str(v), values, where) for k, v in rule.get("annotations", {}).items()},
    )


def alert_groups(values: Mapping[str, str] | None = None) -> list[AlertGroup]:
    """Every rule group of every file in ``templates/alerts/`` (Prometheus rule-file format), each ``@name@`` filled
    from ``values``."""
    given = values or {}
    groups: list[AlertGroup] = []
    for path in sorted(ALERTS_DIR.glob("*.yaml")):
        doc = read_yaml(path) or {}
        for group in doc.get("groups", []):
            where = f"templates/alerts/{path.name} group {group['name']}"
            rules = tuple(_alert(rule, given, where) for rule in group["rules"] if "alert" in rule)
            records = tuple(
                RecordingRule(str(rule["record"]), fill(" ".join(str(rule["expr"]).split()), given, where))
                for rule in group["rules"]
                if "record" in rule
            )
            if rules and records:
                raise ValueError(f"{where}: holds alerting and recording rules; give each kind its own group")
            groups.append(AlertGroup(str(group["name"]), str(group.get("interval", "1m")), rules, records))
    return groups
