"""The one door to the engine: a run is one `Simulation` over the run's links, fed by job drivers.

The tenants' jobs (a workbench: perftest, collectives, training and HPL rings, listed
flows) come in engine form, with the NIC tiers they cross and their planned changes
(faults and repairs); a driver (a live migration, federated traffic) adds its own links
and feeds the same `Run` with flows, changes and timers as the run goes. Only this
module calls the engine's simulation.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from cloudtwin.engine.simulator import Change, Dependencies, Progress, SimResult, Simulation
from cloudtwin.errors import EngineError, ScenarioError
from cloudtwin.flows import Paths
from cloudtwin.routing.strategy import Strategy, load_strategy
from cloudtwin.scenario.model import Scenario
from cloudtwin.smartnic.coupling import couple_nics, swap_changes
from cloudtwin.smartnic.placement import NicPlan, plan_nics
from cloudtwin.topology.builders import build_topology
from cloudtwin.topology.topology import Topology
from cloudtwin.twin.jobs import Workbench, build_workbench
from cloudtwin.twin.migration import MigrationDriver, MigrationRun
from cloudtwin.twin.routing import route_flows

__all__ = [
    "Driver",
    "EngineJobs",
    "JobsRun",
    "Run",
    "engine_jobs",
    "nic_plan",
    "resolve_strategy",
    "run_flows",
    "run_jobs",
    "migration_driver",
    "run_migrations",
    "run_scenario_jobs",
    "simulate_jobs",
]

FinishHandler = Callable[[np.ndarray], None]
"""handler(flows): run ids of a driver's flows that finished at `Run.now`."""

Timer = Callable[[float], None]
"""timer(now): a driver's callback at the time it asked for."""


class Run:
    """One run on the engine: a `Simulation` over the run's links, shared by every job.

    Drivers add flows (with a handler that hears when they finish), apply changes and
    set timers; `run()` runs it all to the end.
    """

    def __init__(
        self, capacity_bps: np.ndarray, *, timeline: bool = False, progress: Progress | None = None
    ) -> None:
        self._sim = Simulation(capacity_bps, on_finish=self._finished, progress=progress, timeline=timeline)
        self._first: list[int] = []  # first flow id of each batch with a handler
        self._end: list[int] = []
        self._handler: list[FinishHandler] = []

    @property
    def now(self) -> float:
        """The time of the last event handled."""
        return self._sim.now

    @property
    def flow_count(self) -> int:
        """Flows added so far (the next flow's id)."""
        return self._sim.flow_count

    @property
    def capacity_bps(self) -> np.ndarray:
        """Every link of the run, as it was built (before any change)."""
        return self._sim.capacity_bps

    @property
    def finish_s(self) -> np.ndarray:
        """When each flow finished (NaN while it has not)."""
        return self._sim.finish_s

    def final_rate_bps(self, flows: np.ndarray) -> np.ndarray:
        """The rate each of `flows` had when its last bit went."""
        return self._sim.final_rate_bps(flows)

    @property
    def remaining_bytes(self) -> np.ndarray:
        """Bytes each flow has still to send now (what the engine has not yet delivered)."""
        return self._sim.remaining_bytes

    @property
    def link_load_bps(self) -> np.ndarray:
        """What the flows in flight put on each link now."""
        return self._sim.link_load_bps

    @property
    def link_capacity_bps(self) -> np.ndarray:
        """Each link's capacity now (after the changes applied so far)."""
        return self._sim.link_capacity_bps

    def add_flows(
        self,
        paths: Paths,
        size_bytes: np.ndarray,
        start_s: np.ndarray,
        rate_cap_bps: np.ndarray,
        *,
        latency_s: np.ndarray | None = None,
        dependencies: Dependencies | None = None,
        timeline_flows: np.ndarray | None = None,
        on_finish: FinishHandler | None = None,
    ) -> np.ndarray:
        """Add flows (see `Simulation.add_flows`); `on_finish` hears when any of them finishes."""
        ids = self._sim.add_flows(
            paths, size_bytes, start_s, rate_cap_bps, latency_s, dependencies, timeline_flows
        )
        if on_finish is not None and ids.size:
            self._first.append(int(ids[0]))
            self._end.append(int(ids[-1]) + 1)
            self._handler.append(on_finish)
        return ids

    def apply(self, change: Change) -> None:
        """A change at its time (at the next event if that has passed)."""
        self._sim.apply(change)

    def schedule(self, at_s: float, timer: Timer) -> None:
        """Call `timer(now)` at `at_s` (even when every flow in flight is stalled)."""
        self._sim.schedule(at_s, lambda sim: timer(sim.now))

    def run(self) -> SimResult:
        """Every event to the end; EngineError when flows can never finish."""
        return self._sim.run()

    def _finished(self, sim: Simulation, flows: np.ndarray) -> None:
        if not self._handler:
            return
        for flow in flows.tolist():
            k = bisect_right(self._first, flow) - 1
            if k >= 0 and flow < self._end[k]:
                self._handler[k](np.array([flow], dtype=np.int64))


class Driver(Protocol):
    """A job that feeds a run as it goes (a migration, federated traffic): it brings its own
    links (`links_bps`, numbered from `first_link` in the run) and attaches to the run."""

    @property
    def links_bps(self) -> np.ndarray: ...

    def attach(self, run: Run, first_link: int) -> None: ...


@dataclass(frozen=True, eq=False)
class EngineJobs:
    """The tenants' jobs in engine form: every flow's path (NIC tiers included), the links
    they need (fabric, NVLink segments, NIC tiers), the changes planned for them."""

    paths: Paths
    capacity_bps: np.ndarray
    size_bytes: np.ndarray
    start_s: np.ndarray
    rate_cap_bps: np.ndarray
    latency_s: np.ndarray | None
    dependencies: Dependencies | None
    changes: list[Change]
    network: np.ndarray
    flow_job: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    job_names: tuple[str, ...] = ()

    @property
    def flow_count(self) -> int:
        return self.paths.flow_count

    def add_to(self, run: Run, timeline: bool = False) -> np.ndarray:
        """Add these flows and changes to `run`; their run ids."""
        ids = run.add_flows(
            self.paths,
            self.size_bytes,
            self.start_s,
            self.rate_cap_bps,
            latency_s=self.latency_s,
            dependencies=self.dependencies,
            timeline_flows=self.network if timeline else None,
        )
        for change in self.changes:
            run.apply(change)
        return ids


def engine_jobs(
    bench: Workbench,
    topology: Topology,
    routed: Paths,
    changes: Sequence[Change] = (),
    nic: NicPlan | None = None,
) -> EngineJobs:
    """The workbench's flows on `routed` connection paths with planned `changes`, in engine
    form; with `nic`, NIC tiers slower than the fabric constrain the flows through them
    (`smartnic.coupling`)."""
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


def simulate_jobs(
    bench: Workbench,
    topology: Topology,
    routed: Paths,
    changes: Sequence[Change] = (),
    timeline: bool = False,
    progress: Progress | None = None,
    nic: NicPlan | None = None,
    drivers: Sequence[Driver] = (),
) -> SimResult:
    """Run the workbench's flows on `routed` connection paths, with planned `changes`.

    With `timeline`, the engine records the aggregate rate of the network flows (not
    NVLink segments inside hosts) after every event. With `nic`, NIC tiers slower than
    the fabric constrain the flows through them (`smartnic.coupling`). `drivers` run on
    the same engine beside them, their links after the jobs'.
    """
    jobs = engine_jobs(bench, topology, routed, changes, nic)
    run = Run(
        np.concatenate([jobs.capacity_bps, *(d.links_bps for d in drivers)]),
        timeline=timeline,
        progress=progress,
    )
    jobs.add_to(run, timeline)
    first = jobs.capacity_bps.size
    for driver in drivers:
        driver.attach(run, first)
        first += driver.links_bps.size
    result = run.run()
    return _jobs_only(result, jobs.flow_count) if drivers else result


def _jobs_only(result: SimResult, flows: int) -> SimResult:
    """The result of the jobs' flows (the first `flows`), without the drivers' (theirs are
    the drivers' to report; the timeline already counts the jobs' alone)."""
    return replace(result, start_s=result.start_s[:flows], finish_s=result.finish_s[:flows])


def run_flows(
    paths: Paths,
    capacity_bps: np.ndarray,
    size_bytes: np.ndarray,
    start_s: np.ndarray,
    rate_cap_bps: np.ndarray,
    *,
    latency_s: np.ndarray | None = None,
    changes: Sequence[Change] = (),
    timeline: bool = False,
) -> SimResult:
    """Plain flows with planned changes, run to the end (a run of one job, as `simulate`)."""
    run = Run(capacity_bps, timeline=timeline)
    run.add_flows(paths, size_bytes, start_s, rate_cap_bps, latency_s=latency_s)
    for change in sorted(changes, key=lambda c: c.time_s):
        run.apply(change)
    return run.run()


def _with_nic_tiers(change: Change, topology: Topology, capacity_bps: np.ndarray, nic: NicPlan) -> Change:
    """A repair's new paths with the same NIC tier links as the paths they replace."""
    if change.paths is None:
        return change
    paths = couple_nics(topology, capacity_bps, change.paths, nic).paths
    return Change(change.time_s, change.link_ids, change.capacity_bps, change.flows, paths)


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


def nic_plan(scenario: Scenario, topology: Topology) -> NicPlan | None:
    """The scenario's NICs, or None when every host has a `basic` one (no datapath cost)."""
    plan = plan_nics(scenario.nic, topology.host_count)
    if scenario.nic.boot_faults:
        from cloudtwin.smartnic.boot import boot_hosts  # signed stages: the nic extra

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
    drivers: Sequence[Driver] = (),
) -> JobsRun:
    """Route the workbench's connections with `strategy` and run them without faults
    (`drivers` beside them on the same run; the result is the jobs')."""
    routed = route_flows(scenario, topology, bench.connections, strategy)
    nic = nic_plan(scenario, topology)
    result = simulate_jobs(
        bench, topology, routed, timeline=timeline, progress=progress, nic=nic, drivers=drivers
    )
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


def has_jobs(scenario: Scenario) -> bool:
    """True when the scenario names tenant jobs (`workload:` or `workloads:`), not only defaults."""
    return bool({"workload", "workloads"} & scenario.model_fields_set)


def scenario_engine_jobs(
    scenario: Scenario, topology: Topology, strategy: Strategy, nic: NicPlan | None
) -> tuple[EngineJobs, np.ndarray]:
    """The scenario's tenant jobs routed by `strategy`, with its faults and the strategy's
    repairs, in engine form; and the link capacities before NIC tiers (what a driver's
    paths are coupled against). No flows when the scenario names no job."""
    if not has_jobs(scenario):
        uncoupled = capacity = topology.capacity_bps.astype(float)
        empty = Paths(np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64))
        changes: list[Change] = []
        if nic is not None:
            changes = swap_changes(topology, capacity, nic)
            capacity = couple_nics(topology, capacity, empty, nic).capacity_bps
        none = np.empty(0)
        jobs = EngineJobs(empty, capacity, none, none, none, None, None, changes, np.empty(0, bool))
        return jobs, uncoupled
    from cloudtwin.faults.events import expand_faults
    from cloudtwin.twin.faulted import plan_faulted

    bench = build_workbench(scenario, topology)
    routed = route_flows(scenario, topology, bench.connections, strategy)
    planned: list[Change] = []
    if scenario.faults:
        states = expand_faults(scenario.faults, topology, scenario.seed)
        planned = plan_faulted(scenario, topology, bench, strategy, routed, states).changes
    return engine_jobs(bench, topology, routed, planned, nic), bench.capacity_bps


def run_migrations(
    scenario: Scenario,
    strategy: str | Strategy | None = None,
    progress: Progress | None = None,
    drivers: Sequence[Driver] = (),
) -> MigrationRun:
    """The scenario's migrations on one run beside its tenants' jobs (if it names any),
    with its faults and the strategy's repairs and the hosts' NIC tiers; `drivers` join
    the same run after them."""
    chosen = resolve_strategy(scenario, strategy)
    topology = build_topology(scenario)
    nic = nic_plan(scenario, topology)
    jobs, uncoupled = scenario_engine_jobs(scenario, topology, chosen, nic)

    def couple(paths: Paths) -> Paths:
        return paths if nic is None else couple_nics(topology, uncoupled, paths, nic).paths

    base = jobs.capacity_bps.size
    driver = MigrationDriver(scenario, topology, chosen, couple, base, progress)
    run = Run(np.concatenate((jobs.capacity_bps, driver.links_bps, *(d.links_bps for d in drivers))))
    jobs.add_to(run)
    driver.attach(run, base)
    first = base + driver.links_bps.size
    for other in drivers:
        other.attach(run, first)
        first += other.links_bps.size
    try:
        result = run.run()
        alone = _tenants_alone(jobs)
    except EngineError as err:
        raise ScenarioError(f"faults: some flows can never finish ({err}); give the fault an until") from err
    return driver.outcome(result.events, result.finish_s, jobs.flow_count, alone)


def _tenants_alone(jobs: EngineJobs) -> float:
    """When the tenants' jobs finish in a run of their own."""
    if not jobs.flow_count:
        return 0.0
    run = Run(jobs.capacity_bps)
    jobs.add_to(run)
    return run.run().completion_s


def migration_driver(
    scenario: Scenario, topology: Topology, bench: Workbench, strategy: Strategy
) -> MigrationDriver | None:
    """The scenario's migrations as a driver of a run of its jobs (None when it has none);
    the driver takes the scenario's faults as they are (copy the scenario to change them)."""
    if not scenario.mobility.migrations:
        return None
    nic = nic_plan(scenario, topology)
    uncoupled = bench.capacity_bps

    def couple(paths: Paths) -> Paths:
        return paths if nic is None else couple_nics(topology, uncoupled, paths, nic).paths

    return MigrationDriver(scenario, topology, strategy, couple, 0)
