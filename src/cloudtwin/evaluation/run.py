"""A scenario run end to end (on the twin) and summarised as perftest reports each pair."""

from __future__ import annotations

from dataclasses import dataclass

from cloudtwin.engine.simulator import Progress, SimResult
from cloudtwin.errors import WorkloadError
from cloudtwin.evaluation.metrics import RunSummary, summarize_rows
from cloudtwin.flows import Flows, Paths
from cloudtwin.scenario.model import CollectiveWorkload, FlowsWorkload, PerftestWorkload, Scenario
from cloudtwin.topology.topology import Topology
from cloudtwin.twin import build_workbench, route_flows, run_scenario_jobs, tenant_groups

__all__ = ["Run", "build_flows", "route_flows", "run_scenario", "tenant_groups"]


@dataclass(frozen=True, eq=False)
class Run:
    """Everything one simulated run produced: `flows` are the routed connections (a
    collective's network QPs), `paths` every engine flow's path."""

    scenario: Scenario
    strategy: str
    topology: Topology
    flows: Flows
    paths: Paths
    result: SimResult
    summary: RunSummary


def _check_runnable(scenario: Scenario) -> None:
    """WorkloadError for a single workload that is predicted, not run."""
    workload = scenario.workload
    if scenario.workloads or isinstance(workload, PerftestWorkload | CollectiveWorkload | FlowsWorkload):
        return
    kind = workload.kind
    command = "train" if kind == "training" else "hpl"
    raise WorkloadError(f"workload.kind: {kind} is predicted by `cloudtwin {command}`, not run here")


def build_flows(scenario: Scenario, topology: Topology) -> Flows:
    """The connections of the scenario's jobs, as strategies route them (a collective's
    network QPs)."""
    _check_runnable(scenario)
    return build_workbench(scenario, topology).connections


def run_scenario(
    scenario: Scenario, strategy: str | None = None, progress: Progress | None = None
) -> Run:
    """Simulate the scenario under `strategy` (default: the scenario's own).

    The summary counts each perftest connection (all its QPs) and each collective QP
    (all its rounds) as one transfer; NVLink segments inside hosts are left out.
    """
    _check_runnable(scenario)
    jobs = run_scenario_jobs(scenario, strategy, progress)
    summary = summarize_rows(scenario.name, jobs.strategy, jobs.bench, jobs.result)
    connections = jobs.bench.connections
    return Run(scenario, jobs.strategy, jobs.topology, connections, jobs.paths, jobs.result, summary)
