"""Runs of one fabric, assembled: a scenario's jobs without faults (drivers beside them),
and its live migrations beside its jobs with their faults and repairs.

Each is a `Prepared` scenario (strategy, fabric, jobs, NIC plan) in engine form on one
`Run`; the faulted run of `evaluate` and `diagnose` is in `faulted.py`, the whole cloud in
`cloud.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cloudtwin.engine.simulator import Progress, SimResult
from cloudtwin.errors import EngineError, ScenarioError
from cloudtwin.flows import Paths
from cloudtwin.routing.strategy import Strategy
from cloudtwin.scenario.model import Scenario
from cloudtwin.topology.topology import Topology
from cloudtwin.twin.jobs import Workbench
from cloudtwin.twin.migration import MigrationDriver, MigrationRun
from cloudtwin.twin.migration_paths import FabricPaths
from cloudtwin.twin.preparation import Prepared, prepare
from cloudtwin.twin.run import Driver, EngineJobs

__all__ = ["JobsRun", "run_jobs", "run_migrations", "run_scenario_jobs"]


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


def run_jobs(
    prepared: Prepared,
    *,
    progress: Progress | None = None,
    timeline: bool = False,
    drivers: Sequence[Driver] = (),
) -> JobsRun:
    """The prepared jobs without faults (`drivers` beside them on the same run; the result
    is the jobs'). With `timeline`, the engine records the aggregate rate of the network
    flows (not NVLink segments inside hosts) after every event."""
    jobs = prepared.engine_jobs()
    _, result = jobs.run(drivers, timeline=timeline, progress=progress)
    return JobsRun(
        prepared.scenario,
        prepared.strategy.name,
        prepared.topology,
        prepared.jobs,
        prepared.connections,
        prepared.engine_paths,
        jobs.own(result),
    )


def run_scenario_jobs(
    scenario: Scenario, strategy: str | Strategy | None = None, progress: Progress | None = None
) -> JobsRun:
    """The scenario's jobs under `strategy` (default: the scenario's own), without faults."""
    return run_jobs(prepare(scenario, strategy), progress=progress)


def run_migrations(
    scenario: Scenario,
    strategy: str | Strategy | None = None,
    progress: Progress | None = None,
    drivers: Sequence[Driver] = (),
) -> MigrationRun:
    """The scenario's migrations on one run beside its tenants' jobs (if it names any),
    with its faults and the strategy's repairs and the hosts' NIC tiers; `drivers` join
    the same run after them."""
    prepared = prepare(scenario, strategy, named_jobs_only=True)
    states = prepared.fault_states()
    jobs = prepared.faulted_jobs(states)
    paths = FabricPaths(prepared, states)
    mobility = scenario.mobility
    driver = MigrationDriver(paths, mobility, name=scenario.name, seed=scenario.seed, progress=progress)
    try:
        run, result = jobs.run([driver, *drivers])
        alone = _tenants_alone(jobs)
    except EngineError as err:
        raise ScenarioError(f"faults: some flows can never finish ({err}); give the fault an until") from err
    return driver.outcome().run(scenario.name, result.events, result.finish_s[: jobs.flow_count], alone)


def _tenants_alone(jobs: EngineJobs) -> float:
    """When the tenants' jobs finish in a run of their own."""
    if not jobs.flow_count:
        return 0.0
    return jobs.run()[1].completion_s
