"""One simulated run of a scenario with its faults and its strategy's repairs, kept whole."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cloudtwin.engine.simulator import Change, SimResult, simulate
from cloudtwin.errors import EngineError, ScenarioError
from cloudtwin.evaluation.jobs import Workbench, build_workbench
from cloudtwin.evaluation.run import route_flows
from cloudtwin.faults.events import FabricState, expand_faults
from cloudtwin.faults.plan import RepairPlan, plan_repairs
from cloudtwin.faults.reaction import ReactionKind, reaction_of
from cloudtwin.routing.strategy import load_strategy
from cloudtwin.scenario.model import Scenario
from cloudtwin.topology.builders import build_topology
from cloudtwin.topology.paths import Paths
from cloudtwin.topology.topology import Topology

__all__ = ["TwinRun", "simulate_twin"]


@dataclass(frozen=True, eq=False)
class TwinRun:
    """A faulted run: the fabric, the engine's flows and paths, the changes and the result.

    `paths` and `changes` are in engine-flow terms (NVLink segments included; their link
    ids lie beyond the topology's links); `capacity_bps` covers those extra links too.
    """

    scenario: Scenario
    strategy: str
    reaction: ReactionKind
    topology: Topology
    bench: Workbench
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
        return self.bench.owner >= 0


def _latency(bench: Workbench, topology: Topology, paths: Paths) -> np.ndarray:
    per_link = np.zeros(bench.capacity_bps.size)
    per_link[: topology.link_count] = topology.latency_s
    entry = per_link[paths.link_ids] * paths.entry_weights
    flow = np.bincount(paths.flow_of_entry, entry, minlength=paths.flow_count)
    return np.where(bench.latency_mask, flow, 0.0)


def simulate_twin(scenario: Scenario, strategy: str | None = None) -> TwinRun:
    """Run the scenario's jobs under its strategy (or `strategy`) with its `faults:`."""
    topology = build_topology(scenario)
    bench = build_workbench(scenario, topology)
    chosen = load_strategy(strategy or scenario.routing.strategy)
    connections = bench.connections
    routed = route_flows(scenario, topology, connections, chosen)

    def route(view: Topology, index: np.ndarray) -> Paths:
        return route_flows(scenario, view, connections.take(index), chosen)

    kind = reaction_of(chosen)
    states = expand_faults(scenario.faults, topology, scenario.seed)
    plan = plan_repairs(topology, connections, routed, route, kind, scenario.reaction, states)
    paths = bench.engine_paths(routed)
    changes = [bench.engine_change(c) for c in plan.changes]
    latency = _latency(bench, topology, paths)
    try:
        result = simulate(
            paths, bench.capacity_bps, bench.size_bytes, bench.start_s, bench.rate_cap_bps,
            latency_s=latency, dependencies=bench.dependencies, changes=changes,
        )
    except EngineError as err:
        raise ScenarioError(f"faults: some flows can never finish ({err}); give the fault an until") from err
    return TwinRun(
        scenario, chosen.name, kind, topology, bench, paths, bench.capacity_bps, bench.rate_cap_bps,
        latency, states, plan, changes, result,
    )
