"""The three-fold evaluation: every strategy on performance, resiliency and complexity.

For each strategy the scenario's jobs are routed and run twice on the engine: without
faults (performance, and the reference for resiliency) and with the scenario's faults
and the strategy's modelled repairs. A scenario without `faults:` gets one: a random
switch-to-switch cable (drawn from the seed) fails for good at a quarter of the shortest
fault-free completion time, so that every strategy is hit while its flows are running.

A scenario with `mobility.migrations` has its live migrations evaluated as a job too: per
strategy they run on the engine beside the tenants' traffic, once without faults and
once with the same faults, and the report gives each migration's total time, downtime,
bytes and rounds in both runs and its slowdown under faults.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from cloudtwin.engine.simulator import SimResult
from cloudtwin.errors import WorkloadError
from cloudtwin.evaluation.collective_bench import collective_busbw
from cloudtwin.evaluation.complexity import complexity
from cloudtwin.evaluation.metrics import RunSummary, summarize_rows
from cloudtwin.evaluation.resiliency import (
    binned_timeline,
    bytes_behind,
    fault_outcomes,
    sample_timeline,
    stall_seconds,
)
from cloudtwin.evaluation.results import (
    Complexity,
    FaultEvent,
    MigrationSummary,
    Performance,
    RepairSummary,
    Resiliency,
    StrategyResult,
)
from cloudtwin.faults.events import FabricState, expand_faults
from cloudtwin.faults.plan import RepairPlan
from cloudtwin.routing.facts import profile_of
from cloudtwin.routing.strategy import Strategy, load_strategy
from cloudtwin.scenario.faults import Fault
from cloudtwin.scenario.model import Scenario
from cloudtwin.topology.topology import Topology
from cloudtwin.twin import (
    JobsRun,
    MigrationDriver,
    Prepared,
    Workbench,
    fabric_migrations,
    prepare,
    run_faulted,
    run_jobs,
    tenant_name,
)

__all__ = ["DEFAULT_FAULT_FRACTION", "Evaluation", "StrategyOutcome", "evaluate"]

DEFAULT_FAULT_FRACTION = 0.25

Report = Callable[[str], None]


@dataclass(frozen=True, eq=False)
class StrategyOutcome:
    """One strategy's results, and the arrays behind them (for the store)."""

    name: str
    spec: str
    reaction: str
    performance: Performance
    resiliency: Resiliency
    complexity: Complexity
    baseline: SimResult
    faulted: SimResult
    connection_start_s: np.ndarray
    connection_finish_s: np.ndarray
    baseline_finish_s: np.ndarray
    stall_s: np.ndarray
    affected: np.ndarray
    migrations: dict[str, MigrationSummary] | None = None
    """Per migrated VM, when the scenario has `mobility.migrations`."""

    def result(self, ratio_to_first: float | None) -> StrategyResult:
        """Its entry in `results.json`, with its aggregate as a ratio to the first strategy's."""
        return StrategyResult(
            spec=self.spec,
            reaction=self.reaction,
            performance=self.performance.model_copy(update={"ratio_to_first": ratio_to_first}),
            resiliency=self.resiliency,
            complexity=self.complexity,
            migrations=self.migrations,
        )


@dataclass(frozen=True, eq=False)
class Evaluation:
    """A scenario evaluated under several strategies."""

    scenario: Scenario
    topology: Topology
    bench: Workbench
    faults: list[FaultEvent]
    default_faults: bool
    outcomes: list[StrategyOutcome] = field(default_factory=list)


def _connection_times(bench: Workbench, result: SimResult) -> tuple[np.ndarray, np.ndarray]:
    n = len(bench.connections)
    owner = bench.owner
    network = owner >= 0
    start = np.full(n, np.inf)
    finish = np.full(n, -np.inf)
    np.minimum.at(start, owner[network], result.start_s[network])
    np.maximum.at(finish, owner[network], result.finish_s[network])
    return start, finish


def _summary(
    scenario: Scenario, name: str, bench: Workbench, result: SimResult, rows: np.ndarray
) -> RunSummary:
    """The run summary of these flows' network QPs (NVLink segments left out, as `run` does)."""
    return summarize_rows(scenario.name, name, bench, result, rows)


def _groups(scenario: Scenario, bench: Workbench) -> dict[str, dict[str, np.ndarray]]:
    """Engine flow rows per job and per tenant."""
    job = bench.flow_job
    tenant_of_conn = bench.connections.tenant
    owner = bench.owner
    tenant = np.where(owner >= 0, tenant_of_conn[np.maximum(owner, 0)], -2)
    jobs = {info.name: np.flatnonzero(job == i) for i, info in enumerate(bench.jobs)}
    tenants = {
        tenant_name(scenario, int(t)): np.flatnonzero(tenant == t) for t in np.unique(tenant[tenant > -2])
    }
    return {"jobs": {k: v for k, v in jobs.items() if v.size}, "tenants": tenants}


def _performance(scenario: Scenario, name: str, bench: Workbench, result: SimResult) -> Performance:
    rows = np.arange(result.finish_s.size)
    groups = _groups(scenario, bench)
    return Performance.of(
        _summary(scenario, name, bench, result, rows),
        per_job={k: _summary(scenario, name, bench, result, v) for k, v in groups["jobs"].items()},
        per_tenant={k: _summary(scenario, name, bench, result, v) for k, v in groups["tenants"].items()},
        busbw=collective_busbw(scenario, bench, result),
    )


def _span(result: SimResult, rows: np.ndarray) -> float:
    return float(result.finish_s[rows].max() - result.start_s[rows].min()) if rows.size else 0.0


def _slowdowns(
    scenario: Scenario, bench: Workbench, baseline: SimResult, faulted: SimResult
) -> dict[str, dict[str, float]]:
    groups = _groups(scenario, bench)
    return {
        kind: {
            name: _span(faulted, rows) / _span(baseline, rows) if _span(baseline, rows) > 0 else 1.0
            for name, rows in members.items()
        }
        for kind, members in groups.items()
    }


def _resiliency(
    scenario: Scenario,
    bench: Workbench,
    states: Sequence[FabricState],
    plan: RepairPlan,
    baseline: SimResult,
    faulted: SimResult,
) -> tuple[Resiliency, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    start, finish = _connection_times(bench, faulted)
    downs = [s.time_s for s in states if s.went_down]
    outcomes = fault_outcomes(baseline, faulted, plan, downs, start, finish)
    stalled = stall_seconds(plan, start, finish, "stalled")
    impaired = stall_seconds(plan, start, finish, "impaired")
    affected = impaired > 0
    slow = _slowdowns(scenario, bench, baseline, faulted)
    marks = [s.time_s for s in states] + [r.moved_s for r in plan.repairs]
    times = [o.time_to_recover_s for o in outcomes]
    worst_ttr = None if None in times else max((t for t in times if t is not None), default=0.0)
    resiliency = Resiliency(
        recovered=all(o.recovered for o in outcomes),
        time_to_recover_s=worst_ttr,
        dip=max((o.dip for o in outcomes), default=0.0),
        bytes_delayed=bytes_behind(baseline, faulted),
        flows_affected=int(np.count_nonzero(affected)),
        flows_stalled=int(np.count_nonzero(stalled > 0)),
        max_stall_s=float(stalled.max(initial=0.0)),
        completion_s=faulted.completion_s,
        baseline_completion_s=baseline.completion_s,
        job_slowdown=slow["jobs"],
        tenant_slowdown=slow["tenants"],
        faults=outcomes,
        repairs=[
            RepairSummary(
                phase=r.phase,
                fault_s=r.fault_s,
                moved_s=r.moved_s,
                flows=r.flows,
                rules_changed=r.rules_changed,
            )
            for r in plan.repairs
        ],
        timeline=sample_timeline(baseline, faulted, marks),
        timeline_binned=binned_timeline(baseline, faulted),
        busbw_faulted=collective_busbw(scenario, bench, faulted),
    )
    return resiliency, start, finish, stalled, affected


def _describe_states(topology: Topology, states: Sequence[FabricState]) -> list[FaultEvent]:
    return [
        FaultEvent(
            at_s=state.time_s,
            links=sorted({topology.link_name(int(link)) for link in state.changed}),
            capacity_gbps=sorted({float(c) / 1e9 for c in state.capacity_bps[state.changed]}),
        )
        for state in states
    ]


_EVALUATED_KINDS = ("perftest", "collective")


def _check_kinds(scenario: Scenario) -> None:
    from cloudtwin.twin import scenario_jobs

    for _, workload, _, key in scenario_jobs(scenario):
        kind = getattr(workload, "kind", "?")
        if kind not in _EVALUATED_KINDS:
            raise WorkloadError(f"{key}: evaluate runs perftest and collective jobs, not {kind!r}")


def evaluate(
    scenario: Scenario, strategies: Sequence[str], report: Report | None = None
) -> Evaluation:
    """Run every strategy (built-in name or `package.module:Class`) over the scenario."""
    _check_kinds(scenario)
    chosen: list[tuple[str, Strategy]] = [(spec, load_strategy(spec)) for spec in strategies]
    first = prepare(scenario, chosen[0][1]) if chosen else prepare(scenario)
    prepared = [first if k == 0 else first.with_strategy(s) for k, (_, s) in enumerate(chosen)]
    topology, bench = first.topology, first.jobs
    baselines: list[JobsRun] = []
    clean: list[MigrationDriver | None] = []
    for run in prepared:
        if report is not None:
            report(f"{run.strategy.name}: fault-free run")
        driver = fabric_migrations(run)
        clean.append(driver)
        baselines.append(run_jobs(run, timeline=True, drivers=[driver] if driver is not None else []))
    faults = list(scenario.faults)
    default = not faults
    if default:
        at = DEFAULT_FAULT_FRACTION * min(b.result.completion_s for b in baselines)
        faults = [Fault(kind="random", count=1, at=f"{at}s")]
    states = expand_faults(faults, topology, scenario.seed)
    evaluation = Evaluation(scenario, topology, bench, _describe_states(topology, states), default)
    for (spec, _), run, baseline, calm_driver in zip(chosen, prepared, baselines, clean, strict=True):
        if report is not None:
            report(f"{run.strategy.name}: faults and repairs")
        hit_driver = fabric_migrations(run, states)
        outcome = _outcome(run, states, spec, baseline, hit_driver)
        if calm_driver is not None and hit_driver is not None:
            outcome = replace(outcome, migrations=_migrations(calm_driver, hit_driver))
        evaluation.outcomes.append(outcome)
    return evaluation


def _migrations(calm: MigrationDriver, hurt: MigrationDriver) -> dict[str, MigrationSummary]:
    """The migrations of the fault-free and the faulted run of one strategy (they ran beside
    its jobs in those same runs)."""
    summaries: dict[str, MigrationSummary] = {}
    for base, faulted in zip(calm.outcome().migrations, hurt.outcome().migrations, strict=True):
        summaries[base.vm] = MigrationSummary.of(base, faulted)
    return summaries


def _outcome(
    prepared: Prepared,
    states: Sequence[FabricState],
    spec: str,
    baseline_run: JobsRun,
    driver: MigrationDriver | None = None,
) -> StrategyOutcome:
    scenario, strategy = prepared.scenario, prepared.strategy
    topology, bench, paths = prepared.topology, prepared.jobs, prepared.connections
    faulted_run = run_faulted(prepared, states, timeline=True, drivers=[driver] if driver is not None else [])
    plan, faulted, baseline = faulted_run.plan, faulted_run.result, baseline_run.result
    resiliency, start, finish, stalled, affected = _resiliency(
        scenario, bench, states, plan, baseline, faulted
    )
    _, baseline_finish = _connection_times(bench, baseline)
    return StrategyOutcome(
        name=strategy.name,
        spec=spec,
        reaction=faulted_run.reaction,
        performance=_performance(scenario, strategy.name, bench, baseline),
        resiliency=resiliency,
        complexity=complexity(
            topology,
            bench.connections,
            paths,
            profile_of(strategy, scenario.reaction.pinning_install),
            states,
            plan.repairs,
        ),
        baseline=baseline,
        faulted=faulted,
        connection_start_s=start,
        connection_finish_s=finish,
        baseline_finish_s=baseline_finish,
        stall_s=stalled,
        affected=affected,
    )
