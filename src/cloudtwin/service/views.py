"""What the API and the pages show of stored runs, read from a Store (shared by both)."""

from __future__ import annotations

from dataclasses import dataclass

from cloudtwin.evaluation.report import has_migrations, migration_rows, tradeoff_rows
from cloudtwin.evaluation.results import Results
from cloudtwin.evaluation.usecases import show_result
from cloudtwin.service.errors import ApiError
from cloudtwin.service.models import (
    ComparedRun,
    Comparison,
    FctQuantiles,
    RunPlots,
    StrategySummary,
    Timeline,
)
from cloudtwin.store.database import Store
from cloudtwin.store.documents import Document
from cloudtwin.store.run_head import RunHead, StrategyHead
from cloudtwin.store.run_pages import fct_quantiles, run_timelines

__all__ = [
    "Table", "compare_runs", "migrations", "run_document", "run_exists", "run_plots", "tradeoff"
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


def run_document(store: Store, run_id: int) -> Document:
    """A stored run's document (`cloudtwin results show --json`); 404 when there is none."""
    _check_run(store, run_id)
    return show_result(store, run_id).to_json()


def run_plots(store: Store, run_id: int) -> RunPlots:
    """Throughput timelines and FCT quantiles per strategy of one run."""
    _check_run(store, run_id)
    return RunPlots(
        run_id=run_id,
        timelines={n: Timeline(**t) for n, t in run_timelines(store, run_id).items()},
        fct={n: FctQuantiles(**f) for n, f in fct_quantiles(store, run_id).items()},
    )


def tradeoff(document: Document) -> Table:
    """The trade-off table of a run document: header and rows of text cells."""
    header, rows = tradeoff_rows(Results.from_json(document))
    return Table(header=header, rows=rows)


def migrations(document: Document) -> Table | None:
    """The live-migration table of a run document (None when the run migrated nothing)."""
    results = Results.from_json(document)
    if not has_migrations(results):
        return None
    header, rows = migration_rows(results)
    return Table(header=header, rows=rows)


def _strategy_summary(strategy: StrategyHead) -> StrategySummary:
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


def compare_runs(store: Store, run_ids: list[int]) -> Comparison:
    """Several runs side by side, per strategy the headline of each axis."""
    runs = []
    for run_id in run_ids:
        document = run_document(store, run_id)
        head = RunHead.of(document)
        runs.append(
            ComparedRun(
                run_id=run_id,
                scenario=head.scenario,
                seed=head.seed,
                created_at=document["created_at"],  # added by the store, beside the document
                recommendation=head.recommendation,
                strategies={n: _strategy_summary(s) for n, s in head.strategies.items()},
            )
        )
    return Comparison(runs=runs)
