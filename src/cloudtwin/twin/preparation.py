"""What a run of a scenario needs before the engine starts, prepared once per scenario and
strategy: the strategy, the fabric, the tenants' jobs and their routed connections, and
the hosts' NIC plan.

Every assembly and every driver of that run receives the same `Prepared`, so a fault-free
run, a faulted run and the migrations beside them route the same connections and cross the
same NIC tiers without computing them again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from cloudtwin.engine.simulator import Change
from cloudtwin.faults.events import FabricState, expand_faults
from cloudtwin.faults.plan import RepairPlan, plan_repairs
from cloudtwin.flows import Paths
from cloudtwin.routing.facts import reaction_of
from cloudtwin.routing.strategy import Strategy, load_strategy
from cloudtwin.scenario.model import Routing, Scenario
from cloudtwin.smartnic.coupling import couple_nics, swap_changes
from cloudtwin.smartnic.placement import NicPlan, plan_nics
from cloudtwin.topology.builders import build_topology
from cloudtwin.topology.topology import Topology
from cloudtwin.twin.jobs import Workbench, build_workbench
from cloudtwin.twin.routing import route_flows
from cloudtwin.twin.run import EngineJobs

__all__ = ["Prepared", "has_jobs", "nic_plan", "prepare", "resolve_strategy"]

_DATA_PLANE = "ecmp"
"""How switches route on their own (source-port pinning's repairs before its controller)."""

_NO_PATHS = Paths(np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64))


@dataclass(frozen=True, eq=False)
class Prepared:
    """A scenario's run before the engine: its strategy, fabric, jobs (`bench`, None when it
    was prepared for its migrations alone and names no job), the jobs' routed connections
    and the hosts' NIC plan (None when every NIC is `basic`: no datapath cost)."""

    scenario: Scenario
    strategy: Strategy
    topology: Topology
    bench: Workbench | None
    routed: Paths | None
    nic: NicPlan | None

    @property
    def jobs(self) -> Workbench:
        """The workbench (the scenario was prepared with its jobs)."""
        assert self.bench is not None, "prepared without jobs"
        return self.bench

    @property
    def connections(self) -> Paths:
        """The jobs' routed connections (the scenario was prepared with its jobs)."""
        assert self.routed is not None, "prepared without jobs"
        return self.routed

    @property
    def capacity_bps(self) -> np.ndarray:
        """The links as the jobs see them, before NIC tiers (what a driver's paths are coupled against)."""
        if self.bench is not None:
            return self.bench.capacity_bps
        return self.topology.capacity_bps.astype(float)

    @property
    def engine_paths(self) -> Paths:
        """Every engine flow's path on the routed connections (NVLink segments included)."""
        return self.jobs.engine_paths(self.connections)

    def with_strategy(self, strategy: Strategy) -> Prepared:
        """The same scenario, fabric, jobs and NICs, routed by `strategy`."""
        if self.bench is None:
            return replace(self, strategy=strategy)
        routed = route_flows(self.scenario, self.topology, self.bench.connections, strategy)
        return replace(self, strategy=strategy, routed=routed)

    def couple(self, paths: Paths) -> Paths:
        """`paths` with the NIC tier links they cross (the same paths when NICs cost nothing)."""
        if self.nic is None:
            return paths
        return couple_nics(self.topology, self.capacity_bps, paths, self.nic).paths

    def fault_states(self) -> list[FabricState]:
        """The scenario's own `faults:`, expanded on the fabric."""
        return expand_faults(self.scenario.faults, self.topology, self.scenario.seed)

    def repairs(self, states: Sequence[FabricState]) -> RepairPlan:
        """The strategy's repairs of `states` for the jobs' routed connections."""
        scenario, strategy, flows = self.scenario, self.strategy, self.jobs.connections
        ecmp = load_strategy(_DATA_PLANE)

        def route(view: Topology, index: np.ndarray) -> Paths:
            return route_flows(scenario, view, flows.take(index), strategy)

        def data_plane(view: Topology, index: np.ndarray) -> Paths:
            return route_flows(scenario, view, flows.take(index), ecmp)

        kind = reaction_of(strategy)
        return plan_repairs(
            self.topology, flows, self.connections, route, kind, scenario.reaction, states, data_plane
        )

    def engine_jobs(self, changes: Sequence[Change] = ()) -> EngineJobs:
        """The jobs with planned `changes` (on connections) in engine form; NIC tiers slower
        than the fabric constrain the flows through them (`smartnic.coupling`). Without jobs,
        no flows: the fabric and the NICs' changes alone."""
        if self.bench is None:
            return self._no_jobs()
        bench, topology, nic = self.bench, self.topology, self.nic
        paths = self.engine_paths
        capacity, latency = bench.capacity_bps, bench.latency_s(topology, paths)
        engine_changes = [bench.engine_change(c) for c in changes]
        if nic is not None and nic.modelled:
            engine_changes += swap_changes(topology, capacity, nic)
            coupled = couple_nics(topology, capacity, paths, nic)
            if coupled.changed:  # NIC tiers slower than the fabric: virtual links on the flows' paths
                engine_changes = [_with_nic_tiers(c, topology, capacity, nic) for c in engine_changes]
                capacity, paths = coupled.capacity_bps, coupled.paths
                latency = coupled.extra_latency_s + (latency if latency is not None else 0.0)
        return EngineJobs(
            paths,
            capacity,
            bench.size_bytes,
            bench.start_s,
            bench.rate_cap_bps,
            latency,
            bench.dependencies,
            engine_changes,
            bench.network,
            bench.flow_job,
            tuple(info.name for info in bench.jobs),
        )

    def faulted_jobs(self, states: Sequence[FabricState]) -> EngineJobs:
        """The jobs with `states` and the strategy's repairs, in engine form."""
        planned: list[Change] = []
        if self.bench is not None and states:
            planned = self.repairs(states).changes
        return self.engine_jobs(planned)

    def _no_jobs(self) -> EngineJobs:
        capacity = self.capacity_bps
        changes: list[Change] = []
        if self.nic is not None:
            changes = swap_changes(self.topology, capacity, self.nic)
            capacity = couple_nics(self.topology, capacity, _NO_PATHS, self.nic).capacity_bps
        none = np.empty(0)
        return EngineJobs(_NO_PATHS, capacity, none, none, none, None, None, changes, np.empty(0, bool))


def prepare(
    scenario: Scenario,
    strategy: str | Strategy | None = None,
    *,
    topology: Topology | None = None,
    bench: Workbench | None = None,
    named_jobs_only: bool = False,
) -> Prepared:
    """The scenario's run under `strategy` (default: its own), prepared: its fabric (or
    `topology`), its jobs (or `bench`; with `named_jobs_only`, none unless the scenario names
    some), their connections routed, and its NIC plan."""
    chosen = resolve_strategy(strategy, scenario.routing)
    topology = topology if topology is not None else build_topology(scenario)
    if bench is None and (has_jobs(scenario) or not named_jobs_only):
        bench = build_workbench(scenario, topology)
    routed = None if bench is None else route_flows(scenario, topology, bench.connections, chosen)
    return Prepared(scenario, chosen, topology, bench, routed, nic_plan(scenario, topology))


def resolve_strategy(strategy: str | Strategy | None, routing: Routing) -> Strategy:
    """`strategy` itself, or loaded by name (default: `routing`'s)."""
    if strategy is None or isinstance(strategy, str):
        return load_strategy(strategy or routing.strategy)
    return strategy


def has_jobs(scenario: Scenario) -> bool:
    """True when the scenario names tenant jobs (`workload:` or `workloads:`), not only defaults."""
    return bool({"workload", "workloads"} & scenario.model_fields_set)


def nic_plan(scenario: Scenario, topology: Topology) -> NicPlan | None:
    """The scenario's NICs, or None when every host has a `basic` one (no datapath cost)."""
    plan = plan_nics(scenario.nic, topology.host_count)
    if scenario.nic.boot_faults:
        from cloudtwin.smartnic.boot import boot_hosts  # signed stages: the nic extra

        failed = [r for r in boot_hosts(scenario.nic, topology.host_count, scenario.seed) if not r.attested]
        why = tuple((int(r.host.removeprefix("host")), f"{r.failed_stage}: {r.reason}") for r in failed)
        plan = replace(plan, quarantined=why)
    return plan if plan.modelled else None


def _with_nic_tiers(change: Change, topology: Topology, capacity_bps: np.ndarray, nic: NicPlan) -> Change:
    """A repair's new paths with the same NIC tier links as the paths they replace."""
    if change.paths is None:
        return change
    paths = couple_nics(topology, capacity_bps, change.paths, nic).paths
    return Change(change.time_s, change.link_ids, change.capacity_bps, change.flows, paths)
