"""The offline plan: the real program on the Pulumi SDK's mock monitor, its resources, findings and summary."""

from gb300.plan.runner import PlanResult, run_plan

__all__ = ["PlanResult", "run_plan"]
