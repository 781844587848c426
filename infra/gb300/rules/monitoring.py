"""``grafana-shared-workspace-read``: what Grafana's identity reads when the workspaces are a landing zone's shared
ones (:func:`gb300.components.monitoring.grafana_reach` declares it)."""

from __future__ import annotations

from gb300.config import StackConfig
from gb300.findings import Level, Report
from gb300.rules.base import config_rule

KEY = "gb300:monitoring.grafana.sharedWorkspaceRead"


@config_rule("grafana-shared-workspace-read")
def grafana_shared_workspace_read(cfg: StackConfig) -> list[Report]:
    """Grafana's read on a shared workspace is bounded to the cluster, or the opt-in that widens it is warned."""
    mon = cfg.monitoring
    if not mon.grafana.enabled:
        return []
    shared = [
        text
        for given, text in (
            (mon.logs.enabled and mon.existing_log_analytics_workspace_id, "Log Analytics workspace"),
            (mon.prometheus.existing_workspace_id, "Azure Monitor workspace"),
        )
        if given
    ]
    if not shared:
        return []
    where = " and the shared ".join(shared)
    if mon.grafana.shared_workspace_read:
        return [
            Report(
                Level.WARNING,
                KEY,
                f"Grafana's identity reads the whole shared {where} (Log Analytics Reader, Monitoring Data Reader on "
                "them): every Grafana user reads every team's logs and metrics there. Set it to false to bound "
                "Grafana to this cluster's rows",
            )
        ]
    return [
        Report(
            Level.INFO,
            KEY,
            f"Grafana's identity reads the shared {where} only as far as this cluster reaches: Log Analytics "
            "Reader on the cluster's resource group (resource-context rows of its own resources), no role on a "
            "shared Azure Monitor workspace (its metrics dashboards stay empty until the hub team grants one)",
        )
    ]
