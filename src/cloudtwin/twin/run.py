"""Running a workbench on the engine: the one place cloudtwin calls the simulation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from cloudtwin.engine.simulator import Change, Progress, SimResult, simulate
from cloudtwin.flows import Paths
from cloudtwin.routing.strategy import Strategy, load_strategy
from cloudtwin.scenario.model import Scenario
from cloudtwin.smartnic.boot import boot_hosts
from cloudtwin.smartnic.coupling import couple_nics, swap_changes
from cloudtwin.smartnic.placement import NicPlan, plan_nics
from cloudtwin.topology.builders import build_topology
from cloudtwin.topology.topology import Topology
from cloudtwin.twin.jobs import Workbench, build_workbench
from cloudtwin.twin.routing import route_flows

__all__ = ["JobsRun", "nic_plan", "resolve_strategy", "run_jobs", "run_scenario_jobs", "simulate_jobs"]


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
    nic: NicPlan | None = None,
) -> SimResult:
    """Run the workbench's flows on `routed` connection paths, with planned `changes`.

    With `timeline`, the engine records the aggregate rate of the network flows (not
    NVLink segments inside hosts) after every event. With `nic`, NIC tiers slower than
    the fabric constrain the flows through them (`smartnic.coupling`).
    """
    paths = bench.engine_paths(routed)
    capacity, latency = bench.capacity_bps, bench.latency_s(topology, paths)
    engine_changes = [bench.engine_change(c) for c in changes]
    if nic is not None and nic.modelled:
        engine_changes += swap_changes(topology, capacity, nic)
        coupled = couple_nics(topology, capacity, paths, nic)
        if coupled.changed:  # NIC tiers slower than the fabric: virtual links on the flows' paths
            engine_changes = [_with_nic_tiers(c, topology, capacity, nic) for c in engine_changes]
            capacity, paths = coupled.capacity_bps, coupled.paths
            latency = coupled.extra_latency_s + (latency if latency is not None else 0.0)
    return simulate(
        paths,
        capacity,
        bench.size_bytes,
        bench.start_s,
        bench.rate_cap_bps,
        latency_s=latency,
        dependencies=bench.dependencies,
        progress=progress,
        changes=engine_changes,
        timeline=timeline,
        timeline_flows=bench.network if timeline else None,
    )


def _with_nic_tiers(change: Change, topology: Topology, capacity_bps: np.ndarray, nic: NicPlan) -> Change:
    """A repair's new paths with the same NIC tier links as the paths they replace."""
    if change.paths is None:
        return change
    paths = couple_nics(topology, capacity_bps, change.paths, nic).paths
    return Change(change.time_s, change.link_ids, change.capacity_bps, change.flows, paths)


def nic_plan(scenario: Scenario, topology: Topology) -> NicPlan | None:
    """The scenario's NICs, or None when every host has a `basic` one (no datapath cost)."""
    plan = plan_nics(scenario.nic, topology.host_count)
    if scenario.nic.boot_faults:
        failed = [r for r in boot_hosts(scenario.nic, topology.host_count, scenario.seed) if not r.attested]
        why = tuple((int(r.host.removeprefix("host")), f"{r.failed_stage}: {r.reason}") for r in failed)
        plan = replace(plan, quarantined=why)
    return plan if plan.modelled else None


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
    nic = nic_plan(scenario, topology)
    result = simulate_jobs(bench, topology, routed, timeline=timeline, progress=progress, nic=nic)
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
