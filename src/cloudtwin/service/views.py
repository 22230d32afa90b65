"""What the API and the pages show of stored runs, read from a Store (shared by both)."""

from __future__ import annotations

from dataclasses import dataclass

from cloudtwin.evaluation.report import has_migrations, migration_rows, tradeoff_rows
from cloudtwin.evaluation.results import (
    CloudStrategyResult,
    Results,
    StoredCloud,
    StoredEvaluation,
    StrategyResult,
)
from cloudtwin.evaluation.usecases import show_result
from cloudtwin.service.errors import ApiError
from cloudtwin.service.models import (
    ComparedRun,
    ComparedRuns,
    FctQuantiles,
    RunPlots,
    StrategySummary,
    Timeline,
)
from cloudtwin.store.database import Store
from cloudtwin.store.run_pages import fct_quantiles, run_timelines

__all__ = [
    "Table", "compare_runs", "migrations", "run_exists", "run_plots", "stored_run", "tradeoff"
]


@dataclass(frozen=True)
class Table:
    """A table of text cells for a page: a header and rows."""

    header: list[str]
    rows: list[list[str]]


def run_exists(store: Store, run_id: int) -> bool:
    """Whether the store holds this run."""
    if store.schema_version("runs") is None:
        return False
    return bool(store.query("SELECT 1 FROM eval_runs WHERE run_id = ?", [run_id])[1])


def _check_run(store: Store, run_id: int) -> None:
    if not run_exists(store, run_id):
        raise ApiError(404, "run_id", f"run_id: no run {run_id} in the store")


def stored_run(store: Store, run_id: int) -> StoredEvaluation | StoredCloud:
    """A stored run, typed (`cloudtwin results show`); 404 when there is none."""
    _check_run(store, run_id)
    return show_result(store, run_id)


def run_plots(store: Store, run_id: int) -> RunPlots:
    """Throughput timelines and FCT quantiles per strategy of one run."""
    _check_run(store, run_id)
    return RunPlots(
        run_id=run_id,
        timelines={n: Timeline(**t) for n, t in run_timelines(store, run_id).items()},
        fct={n: FctQuantiles(**f) for n, f in fct_quantiles(store, run_id).items()},
    )


def tradeoff(results: Results) -> Table:
    """The trade-off table of a run: header and rows of text cells."""
    header, rows = tradeoff_rows(results)
    return Table(header=header, rows=rows)


def migrations(results: Results) -> Table | None:
    """The live-migration table of a run (None when the run migrated nothing)."""
    if not has_migrations(results):
        return None
    header, rows = migration_rows(results)
    return Table(header=header, rows=rows)


def _strategy_summary(strategy: StrategyResult | CloudStrategyResult) -> StrategySummary:
    res = strategy.resiliency
    return StrategySummary(
        aggregate_gbps=strategy.performance.aggregate_gbps,
        ratio_to_first=strategy.performance.ratio_to_first,
        recovered=res.recovered,
        time_to_recover_s=res.time_to_recover_s,
        dip=res.dip,
        bytes_delayed=res.bytes_delayed,
        complexity_score=strategy.complexity.score,
    )


def compare_runs(store: Store, run_ids: list[int]) -> ComparedRuns:
    """Several runs side by side, per strategy the headline of each axis."""
    runs = []
    for run_id in run_ids:
        run = stored_run(store, run_id)
        strategies: dict[str, StrategyResult | CloudStrategyResult] = dict(run.strategies)
        runs.append(
            ComparedRun(
                run_id=run_id,
                scenario=run.scenario,
                seed=run.seed,
                created_at=run.created_at,
                recommendation=run.recommendation,
                strategies={n: _strategy_summary(s) for n, s in strategies.items()},
            )
        )
    return ComparedRuns(runs=runs)
