"""Who is told, and when: the monitoring component's action group and alert rules.

* **The action group** (``<name>-oncall``): the configured emails and webhooks, one group shared by every alert.
* **Prometheus rule groups** from ``templates/alerts/*.yaml`` (:mod:`gb300.facts.alerts`), evaluated against the
  Azure Monitor workspace: the alerting groups, and the recording groups that the goodput dashboard and alerts read
  (docs/goodput.md).
* **The bootstrap alert**: a log alert (scheduled query rule) on the Log Analytics workspace that fires for each node
  whose bootstrap logged a failure (``bootstrapAlert`` in ``data/monitoring.yaml``; docs/lifecycle.md).

Each function declares its resources as children of ``parent`` (the :class:`~gb300.components.monitoring.Monitoring`
component), in the scope's resource group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import alertsmanagement, monitor

from gb300.components.scope import ClusterScope
from gb300.facts.alerts import AlertGroup, AlertRule, RecordingRule, alert_groups, iso_duration
from gb300.facts.monitoring_facts import facts, value


def action_group(
    name: str,
    scope: ClusterScope,
    emails: Sequence[str],
    webhooks: Sequence[pulumi.Input[str]],
    *,
    parent: pulumi.Resource,
) -> pulumi.Output[str]:
    """The id of the action group ``<name>-oncall`` of ``emails`` and ``webhooks`` (secrets: a webhook URL carries
    its receiver's token)."""
    return monitor.ActionGroup(
        f"{name}-oncall",
        action_group_name=f"{name}-oncall",
        group_short_name=name[:12],
        resource_group_name=scope.resource_group_name,
        location="Global",
        enabled=True,
        email_receivers=[
            monitor.MicrosoftCommonEmailReceiverArgs(
                name=f"email-{i}", email_address=email, use_common_alert_schema=True
            )
            for i, email in enumerate(emails)
        ],
        webhook_receivers=[
            monitor.WebhookReceiverArgs(name=f"webhook-{i}", service_uri=url, use_common_alert_schema=True)
            for i, url in enumerate(webhooks)
        ],
        tags=scope.tags,
        opts=pulumi.ResourceOptions(parent=parent),
    ).id


def bootstrap_alert(
    name: str,
    scope: ClusterScope,
    workspace: pulumi.Output[str],
    severity: int,
    group: pulumi.Output[str] | None,
    *,
    parent: pulumi.Resource,
) -> None:
    """A log alert per node whose bootstrap logged a failure line, split by computer and failed step, notifying the
    action group ``group`` (None: nobody)."""
    spec = facts()["bootstrapAlert"]
    condition = monitor.ConditionArgs(
        query=str(spec["query"]),
        time_aggregation=monitor.TimeAggregation.COUNT,
        operator=monitor.Operator.GREATER_THAN,
        threshold=0,
        dimensions=[
            monitor.DimensionArgs(name=column, operator=monitor.DimensionOperator.INCLUDE, values=["*"])
            for column in ("Computer", "Step")
        ],
        failing_periods=monitor.ConditionFailingPeriodsArgs(
            number_of_evaluation_periods=1, min_failing_periods_to_alert=1
        ),
    )
    monitor.ScheduledQueryRule(
        f"{name}-bootstrap-failed",
        rule_name=f"{name}-bootstrap-failed",
        resource_group_name=scope.resource_group_name,
        location=scope.location,
        kind=monitor.Kind.LOG_ALERT,
        display_name="gb300: node bootstrap failed",
        description="A node's bootstrap failed at a step (run-step's gb300-bootstrap line); docs/lifecycle.md",
        enabled=True,
        scopes=[workspace],
        severity=severity,
        evaluation_frequency=value(spec["evaluationFrequency"]),
        window_size=value(spec["windowSize"]),
        criteria=monitor.ScheduledQueryRuleCriteriaArgs(all_of=[condition]),
        auto_mitigate=True,
        actions=monitor.ActionsArgs(action_groups=[group]) if group is not None else None,
        tags=scope.tags,
        opts=pulumi.ResourceOptions(parent=parent),
    )


def prometheus_rule_groups(
    name: str,
    scope: ClusterScope,
    amw: pulumi.Output[str],
    group: pulumi.Output[str] | None,
    rules: RuleGroupChoice,
    *,
    parent: pulumi.Resource,
) -> None:
    """One Prometheus rule group per group of ``templates/alerts/*.yaml`` on the Azure Monitor workspace ``amw``, its
    ``@name@`` values filled from ``rules.values``: the recording groups when ``rules.records``, the alerting groups
    when ``rules.alerts``, every alert notifying the action group ``group`` (None: nobody)."""
    for spec in alert_groups(rules.values):
        if spec.name in rules.left_out:
            continue
        if spec.records and rules.records:
            _rule_group(name, scope, amw, spec, [_record(rule) for rule in spec.records], parent=parent)
        elif spec.rules and rules.alerts:
            _rule_group(name, scope, amw, spec, [_alert(rule, group) for rule in spec.rules], parent=parent)


@dataclass(frozen=True)
class RuleGroupChoice:
    """Which rule groups of ``templates/alerts/`` to deploy, and the stack values their ``@name@`` marks take."""

    records: bool
    alerts: bool
    values: Mapping[str, str]
    left_out: frozenset[str] = frozenset()
    """Groups the stack turns off by name (``GOODPUT_ALERTS`` with ``gb300:monitoring.alerts.goodput.enabled``)."""


def _rule_group(
    name: str,
    scope: ClusterScope,
    amw: pulumi.Output[str],
    spec: AlertGroup,
    rules: list[alertsmanagement.PrometheusRuleArgs],
    *,
    parent: pulumi.Resource,
) -> None:
    kind = "recording" if spec.records else "alert"
    alertsmanagement.PrometheusRuleGroup(
        f"{name}-{spec.name}",
        rule_group_name=f"{name}-{spec.name}",
        resource_group_name=scope.resource_group_name,
        location=scope.location,
        scopes=[amw],
        enabled=True,
        interval=iso_duration(spec.interval),
        description=f"gb300 {kind} rules: {spec.name}",
        rules=rules,
        tags=scope.tags,
        opts=pulumi.ResourceOptions(parent=parent),
    )


def _record(rule: RecordingRule) -> alertsmanagement.PrometheusRuleArgs:
    return alertsmanagement.PrometheusRuleArgs(record=rule.record, expression=rule.expr, enabled=True)


def _alert(rule: AlertRule, group: pulumi.Output[str] | None) -> alertsmanagement.PrometheusRuleArgs:
    return alertsmanagement.PrometheusRuleArgs(
        alert=rule.alert,
        expression=rule.expr,
        for_=iso_duration(rule.for_),
        severity=rule.severity,
        enabled=True,
        resolve_configuration=alertsmanagement.PrometheusRuleResolveConfigurationArgs(
            auto_resolved=True, time_to_resolve="PT10M"
        ),
        # Left out when empty, as Azure's own rule groups leave them out.
        labels=rule.labels or None,
        annotations=rule.annotations or None,
        actions=[alertsmanagement.PrometheusRuleGroupActionArgs(action_group_id=group)] if group is not None else None,
    )
