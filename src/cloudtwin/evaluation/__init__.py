"""Evaluation: running scenarios and measuring what they did."""

from cloudtwin.evaluation.metrics import RunSummary, summarize
from cloudtwin.evaluation.run import Run, build_flows, route_flows, run_scenario, tenant_groups

__all__ = [
    "Run",
    "RunSummary",
    "build_flows",
    "route_flows",
    "run_scenario",
    "summarize",
    "tenant_groups",
]
