"""Running a workbench on the engine: the one place cloudtwin calls the simulation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cloudtwin.engine.simulator import Change, Progress, SimResult, simulate
from cloudtwin.flows import Paths
from cloudtwin.routing.strategy import Strategy, load_strategy
from cloudtwin.scenario.model import Scenario
from cloudtwin.topology.builders import build_topology
from cloudtwin.topology.topology import Topology
from cloudtwin.twin.jobs import Workbench, build_workbench
from cloudtwin.twin.routing import route_flows

__all__ = ["JobsRun", "resolve_strategy", "run_jobs", "run_scenario_jobs", "simulate_jobs"]


@dataclass(frozen=True, eq=False)
class JobsRun:
    """One fault-free run: the fabric, the jobs, the routed connections and the engine's result.

    `routed` are the connections' paths; `paths` every engine flow's (NVLink included).
    """

    scenario: Scenario
    strategy: str
    topology: Topology
    bench: Workbench
    routed: Paths
    paths: Paths
    result: SimResult


def simulate_jobs(
    bench: Workbench,
    topology: Topology,
    routed: Paths,
    changes: Sequence[Change] = (),
    timeline: bool = False,
    progress: Progress | None = None,
) -> SimResult:
    """Run the workbench's flows on `routed` connection paths, with planned `changes`.

    With `timeline`, the engine records the aggregate rate of the network flows (not
    NVLink segments inside hosts) after every event.
    """
    paths = bench.engine_paths(routed)
    return simulate(
        paths,
        bench.capacity_bps,
        bench.size_bytes,
        bench.start_s,
        bench.rate_cap_bps,
        latency_s=bench.latency_s(topology, paths),
        dependencies=bench.dependencies,
        progress=progress,
        changes=[bench.engine_change(c) for c in changes],
        timeline=timeline,
        timeline_flows=bench.network if timeline else None,
    )


def run_jobs(
    scenario: Scenario,
    topology: Topology,
    bench: Workbench,
    strategy: Strategy,
    progress: Progress | None = None,
    timeline: bool = False,
) -> JobsRun:
    """Route the workbench's connections with `strategy` and run them without faults."""
    routed = route_flows(scenario, topology, bench.connections, strategy)
    result = simulate_jobs(bench, topology, routed, timeline=timeline, progress=progress)
    return JobsRun(scenario, strategy.name, topology, bench, routed, bench.engine_paths(routed), result)


def run_scenario_jobs(
    scenario: Scenario, strategy: str | Strategy | None = None, progress: Progress | None = None
) -> JobsRun:
    """The scenario's jobs under `strategy` (default: the scenario's own), without faults."""
    chosen = resolve_strategy(scenario, strategy)
    topology = build_topology(scenario)
    return run_jobs(scenario, topology, build_workbench(scenario, topology), chosen, progress)


def resolve_strategy(scenario: Scenario, strategy: str | Strategy | None) -> Strategy:
    """`strategy` itself, or loaded by name (default: the scenario's)."""
    if strategy is None or isinstance(strategy, str):
        return load_strategy(strategy or scenario.routing.strategy)
    return strategy
