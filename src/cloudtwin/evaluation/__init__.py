"""Evaluation: measuring runs of the twin, the three-fold study, reports, and the use cases
the CLI and the service call (`cloudtwin.evaluation.usecases`)."""

from cloudtwin.evaluation.collective import (
    CollectiveMeasurement,
    CollectiveRun,
    simulate_collective,
)
from cloudtwin.evaluation.evaluate import Evaluation, StrategyOutcome, evaluate
from cloudtwin.evaluation.metrics import RunSummary, summarize
from cloudtwin.evaluation.results import (
    CloudResults,
    Complexity,
    MigrationSummary,
    Performance,
    Resiliency,
    Results,
    StrategyResult,
    read_results,
)
from cloudtwin.evaluation.run import Run, build_flows, route_flows, run_scenario, tenant_groups

__all__ = [
    "CloudResults",
    "CollectiveMeasurement",
    "CollectiveRun",
    "Complexity",
    "Evaluation",
    "MigrationSummary",
    "Performance",
    "Resiliency",
    "Results",
    "Run",
    "RunSummary",
    "StrategyOutcome",
    "StrategyResult",
    "build_flows",
    "evaluate",
    "read_results",
    "route_flows",
    "run_scenario",
    "simulate_collective",
    "summarize",
    "tenant_groups",
]
