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
from cloudtwin.faults.events import FabricState, expand_faults
from cloudtwin.faults.plan import RepairPlan, plan_repairs
from cloudtwin.flows import Paths
from cloudtwin.routing.facts import ReactionKind, reaction_of
from cloudtwin.routing.strategy import Strategy, load_strategy
from cloudtwin.scenario.model import Scenario
from cloudtwin.topology.builders import build_topology
from cloudtwin.topology.topology import Topology
from cloudtwin.twin.jobs import Workbench, build_workbench
from cloudtwin.twin.routing import route_flows
from cloudtwin.twin.run import Driver, migration_driver, nic_plan, resolve_strategy, simulate_jobs

__all__ = ["FaultedRun", "plan_faulted", "simulate_faulted"]

_DATA_PLANE = "ecmp"
"""How switches route on their own (source-port pinning's repairs before its controller)."""


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


def plan_faulted(
    scenario: Scenario,
    topology: Topology,
    bench: Workbench,
    strategy: Strategy,
    routed: Paths,
    states: Sequence[FabricState],
) -> RepairPlan:
    """The strategy's repairs of `states` for the workbench's connections routed on `routed`."""
    flows = bench.connections
    ecmp = load_strategy(_DATA_PLANE)

    def route(view: Topology, index: np.ndarray) -> Paths:
        return route_flows(scenario, view, flows.take(index), strategy)

    def data_plane(view: Topology, index: np.ndarray) -> Paths:
        return route_flows(scenario, view, flows.take(index), ecmp)

    kind = reaction_of(strategy)
    return plan_repairs(topology, flows, routed, route, kind, scenario.reaction, states, data_plane)


def simulate_faulted(
    scenario: Scenario,
    strategy: str | Strategy | None = None,
    *,
    topology: Topology | None = None,
    bench: Workbench | None = None,
    routed: Paths | None = None,
    states: Sequence[FabricState] | None = None,
    timeline: bool = False,
    drivers: Sequence[Driver] | None = None,
) -> FaultedRun:
    """Run the scenario's jobs under `strategy` (default: its own) with `states` (default:
    its `faults:` expanded) and the strategy's repairs.

    `topology`, `bench` and `routed` may be passed when already built (they must be the
    scenario's); `drivers` run beside the jobs on the same run (default: the scenario's
    live migrations, as `evaluate` runs them); the result is the jobs'. ScenarioError when
    a fault cuts flows off for good.
    """
    chosen = resolve_strategy(scenario, strategy)
    topology = topology if topology is not None else build_topology(scenario)
    bench = bench if bench is not None else build_workbench(scenario, topology)
    if routed is None:
        routed = route_flows(scenario, topology, bench.connections, chosen)
    if states is None:
        states = expand_faults(scenario.faults, topology, scenario.seed)
    plan = plan_faulted(scenario, topology, bench, chosen, routed, states)
    if drivers is None:  # the scenario's live migrations run beside its jobs, as in evaluate
        driver = migration_driver(scenario, topology, bench, chosen)
        drivers = [driver] if driver is not None else []
    try:
        nic = nic_plan(scenario, topology)
        result = simulate_jobs(
            bench, topology, routed, plan.changes, timeline=timeline, nic=nic, drivers=drivers
        )
    except EngineError as err:
        raise ScenarioError(
            f"faults: with {chosen.name}, some flows can never finish ({err}); "
            "a fault without until cuts them off for good: give it an until"
        ) from err
    paths = bench.engine_paths(routed)
    latency = bench.latency_s(topology, paths)
    return FaultedRun(
        scenario=scenario,
        strategy=chosen.name,
        reaction=reaction_of(chosen),
        topology=topology,
        bench=bench,
        routed=routed,
        paths=paths,
        capacity_bps=bench.capacity_bps,
        rate_cap_bps=bench.rate_cap_bps,
        latency_s=latency if latency is not None else np.zeros(paths.flow_count),
        states=list(states),
        plan=plan,
        changes=[bench.engine_change(c) for c in plan.changes],
        result=result,
    )

