"""/api/runs: stored evaluation runs: a filtered, sorted page; one run; several compared."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Response

from cloudtwin.service.auth import require_read
from cloudtwin.service.deps import read_store
from cloudtwin.service.errors import ApiError
from cloudtwin.service.models import ComparedRuns, RunPage, RunPlots, RunRow, StoredRun
from cloudtwin.service.views import compare_runs, run_plots, stored_run
from cloudtwin.store.database import Store
from cloudtwin.store.documents import finite_json
from cloudtwin.store.run_pages import RunFilter, page_runs

__all__ = ["router"]

router = APIRouter(prefix="/api/runs", tags=["runs"], dependencies=[Depends(require_read)])

MAX_PAGE = 500
MAX_COMPARED = 12
SortKey = Literal["run_id", "created_at", "scenario", "seed", "strategies"]
StoreDep = Annotated[Store, Depends(read_store)]
RunId = Annotated[int, Path(ge=1, lt=2**31, description="Run id (see the runs list)")]


@router.get("")
def list_runs(
    store: StoreDep,
    scenario: Annotated[str | None, Query(max_length=200, description="Scenario name contains")] = None,
    strategy: Annotated[str | None, Query(max_length=200, description="Evaluated this strategy")] = None,
    seed: Annotated[int | None, Query(ge=-(2**63), lt=2**63)] = None,
    sort: SortKey = "run_id",
    order: Literal["asc", "desc"] = "desc",
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
) -> RunPage:
    """Stored runs matching the filter, sorted, one page of them; `total` counts every match."""
    page = page_runs(store, RunFilter(scenario, strategy, seed), sort, order == "desc", limit, offset)
    runs = [RunRow(**row) for row in page.runs]
    return RunPage(total=page.total, limit=limit, offset=offset, runs=runs)


@router.get("/compare")
def compare(
    store: StoreDep,
    runs: Annotated[str, Query(max_length=200, description="Run ids, comma-separated: 1,2,3")],
) -> ComparedRuns:
    """Several runs side by side: each strategy's throughput, recovery, dip and complexity."""
    return compare_runs(store, parse_run_ids(runs))


@router.get(
    "/{run_id}",
    response_class=Response,
    responses={200: {"model": StoredRun, "content": {"application/json": {}}}},
)
def show_run(store: StoreDep, run_id: RunId) -> Response:
    """One run (a fabric's results or, with `kind: cloud`, a cloud's, after its id, time and
    flow row count), exactly as `cloudtwin results show RUN --json` prints it."""
    document = finite_json(stored_run(store, run_id).to_json())
    return Response(json.dumps(document, indent=2) + "\n", media_type="application/json")


@router.get("/{run_id}/plots")
def plots(store: StoreDep, run_id: RunId) -> RunPlots:
    """The data of a run's plots: throughput over time and FCT quantiles per strategy."""
    return run_plots(store, run_id)


def parse_run_ids(text: str) -> list[int]:
    """`1,2,3` as run ids; ApiError naming `runs` otherwise."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isascii() and p.isdigit() and len(p) < 10 for p in parts):
        raise ApiError(422, "runs", f"runs: {text!r} is not a comma-separated list of run ids")
    ids = list(dict.fromkeys(int(p) for p in parts))
    if len(ids) > MAX_COMPARED:
        raise ApiError(422, "runs", f"runs: at most {MAX_COMPARED} runs are compared at once")
    return ids
