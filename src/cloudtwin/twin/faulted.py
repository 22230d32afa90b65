"""A faulted run: the scenario's jobs with its faults and the strategy's modelled repairs.

The one pipeline behind both `evaluate` (resiliency) and `diagnose` (what the fabric
logs and measures): the same flows, the same repair plan, the same engine run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cloudtwin.engine.simulator import Change, SimResult
from cloudtwin.errors import EngineError, ScenarioError
from cloudtwin.faults.events import FabricState
from cloudtwin.faults.plan import RepairPlan
from cloudtwin.flows import Paths
from cloudtwin.routing.facts import ReactionKind, reaction_of
from cloudtwin.routing.strategy import Strategy
from cloudtwin.scenario.model import Scenario
from cloudtwin.topology.topology import Topology
from cloudtwin.twin.jobs import Workbench
from cloudtwin.twin.migration_paths import fabric_migrations
from cloudtwin.twin.preparation import Prepared, prepare
from cloudtwin.twin.run import Driver

__all__ = ["FaultedRun", "run_faulted", "simulate_faulted"]


@dataclass(frozen=True, eq=False)
class FaultedRun:
    """A faulted run: the fabric, the engine's flows and paths, the changes and the result.

    `routed` are the connections' paths before any fault; `paths` and `changes` are in
    engine-flow terms (NVLink segments included; their link ids lie beyond the
    topology's links); `capacity_bps` covers those extra links too.
    """

    scenario: Scenario
    strategy: str
    reaction: ReactionKind
    topology: Topology
    bench: Workbench
    routed: Paths
    paths: Paths
    capacity_bps: np.ndarray
    rate_cap_bps: np.ndarray
    latency_s: np.ndarray
    states: list[FabricState]
    plan: RepairPlan
    changes: list[Change]
    result: SimResult

    @property
    def network(self) -> np.ndarray:
        """Engine flows that cross the fabric (not NVLink segments inside a host)."""
        return self.bench.network


def simulate_faulted(
    scenario: Scenario,
    strategy: str | Strategy | None = None,
    *,
    timeline: bool = False,
    drivers: Sequence[Driver] | None = None,
) -> FaultedRun:
    """Run the scenario's jobs under `strategy` (default: its own) with its `faults:` and the
    strategy's repairs (see `run_faulted`)."""
    prepared = prepare(scenario, strategy)
    return run_faulted(prepared, prepared.fault_states(), timeline=timeline, drivers=drivers)


def run_faulted(
    prepared: Prepared,
    states: Sequence[FabricState],
    *,
    timeline: bool = False,
    drivers: Sequence[Driver] | None = None,
) -> FaultedRun:
    """Run the prepared jobs with `states` and the strategy's repairs.

    `drivers` run beside the jobs on the same run (default: the scenario's live migrations,
    which see the same `states`, as `evaluate` runs them); the result is the jobs'.
    ScenarioError when a fault cuts flows off for good.
    """
    scenario, strategy, bench = prepared.scenario, prepared.strategy, prepared.jobs
    plan = prepared.repairs(states)
    if drivers is None:  # the scenario's live migrations run beside its jobs, as in evaluate
        driver = fabric_migrations(prepared, states)
        drivers = [driver] if driver is not None else []
    jobs = prepared.engine_jobs(plan.changes)
    try:
        _, result = jobs.run(drivers, timeline=timeline)
    except EngineError as err:
        raise ScenarioError(
            f"faults: with {strategy.name}, some flows can never finish ({err}); "
            "a fault without until cuts them off for good: give it an until"
        ) from err
    paths = prepared.engine_paths
    latency = bench.latency_s(prepared.topology, paths)
    return FaultedRun(
        scenario=scenario,
        strategy=strategy.name,
        reaction=reaction_of(strategy),
        topology=prepared.topology,
        bench=bench,
        routed=prepared.connections,
        paths=paths,
        capacity_bps=bench.capacity_bps,
        rate_cap_bps=bench.rate_cap_bps,
        latency_s=latency if latency is not None else np.zeros(paths.flow_count),
        states=list(states),
        plan=plan,
        changes=[bench.engine_change(c) for c in plan.changes],
        result=jobs.own(result),
    )
