"""What the API and the pages show of stored runs, read from a Store (shared by both)."""

from __future__ import annotations

from typing import Any

from cloudtwin.evaluation.report import has_migrations, migration_rows, tradeoff_rows
from cloudtwin.evaluation.usecases import show_result
from cloudtwin.service.errors import ApiError
from cloudtwin.store.database import Store
from cloudtwin.store.run_pages import fct_quantiles, run_timelines

__all__ = ["compare_runs", "migrations", "run_document", "run_exists", "run_plots", "tradeoff"]


def run_exists(store: Store, run_id: int) -> bool:
    """Whether the store holds this run."""
    if store.schema_version("runs") is None:
        return False
    return bool(store.query("SELECT 1 FROM eval_runs WHERE run_id = ?", [run_id])[1])


def run_document(store: Store, run_id: int) -> dict[str, Any]:
    """A stored run's document (`cloudtwin results show --json`); 404 when there is none."""
    if not run_exists(store, run_id):
        raise ApiError(404, "run_id", f"run_id: no run {run_id} in the store")
    return show_result(store, run_id).to_json()


def run_plots(store: Store, run_id: int) -> dict[str, Any]:
    """Throughput timelines and FCT quantiles per strategy of one run."""
    if not run_exists(store, run_id):
        raise ApiError(404, "run_id", f"run_id: no run {run_id} in the store")
    return {
        "run_id": run_id,
        "timelines": run_timelines(store, run_id),
        "fct": fct_quantiles(store, run_id),
    }


def tradeoff(document: dict[str, Any]) -> dict[str, Any]:
    """The trade-off table of a run document: header and rows of text cells."""
    header, rows = tradeoff_rows(document)
    return {"header": header, "rows": rows}


def migrations(document: dict[str, Any]) -> dict[str, Any] | None:
    """The live-migration table of a run document (None when the run migrated nothing)."""
    if not has_migrations(document):
        return None
    header, rows = migration_rows(document)
    return {"header": header, "rows": rows}


def _strategy_summary(strategy: dict[str, Any]) -> dict[str, Any]:
    res, cx = strategy["resiliency"], strategy["complexity"]
    return {
        "aggregate_gbps": strategy["performance"]["aggregate_gbps"],
        "ratio_to_first": strategy["performance"].get("ratio_to_first"),
        "recovered": res["recovered"],
        "time_to_recover_s": res["time_to_recover_s"],
        "dip": res["dip"],
        "bytes_delayed": res["bytes_delayed"],
        "complexity_score": cx["score"],
    }


def compare_runs(store: Store, run_ids: list[int]) -> dict[str, Any]:
    """Several runs side by side, per strategy the headline of each axis."""
    runs = []
    for run_id in run_ids:
        document = run_document(store, run_id)
        runs.append(
            {
                "run_id": run_id,
                "scenario": document["scenario"],
                "seed": document["seed"],
                "created_at": document["created_at"],
                "recommendation": document.get("recommendation"),
                "strategies": {n: _strategy_summary(s) for n, s in document["strategies"].items()},
            }
        )
    return {"runs": runs}
