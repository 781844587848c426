"""The offline plan: the real program on the Pulumi SDK's mock monitor, its resources, findings and summary."""

from gb300.plan.runner import PlanResult, ResourceRecord, run_plan

__all__ = ["PlanResult", "ResourceRecord", "run_plan"]
