"""The pages: runs, a run, runs compared, starting a comparison, logs, diagnosis."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from cloudtwin.errors import CloudtwinError
from cloudtwin.evaluation.results import StoredCloud
from cloudtwin.service.api.runs import MAX_PAGE, parse_run_ids
from cloudtwin.service.auth import require_read
from cloudtwin.service.deps import read_store
from cloudtwin.service.examples import list_examples
from cloudtwin.service.views import compare_runs, migrations, run_plots, stored_run, tradeoff
from cloudtwin.service.web import plots
from cloudtwin.store.database import Store
from cloudtwin.store.run_pages import RunFilter, page_runs

__all__ = ["mount_web"]

_HERE = Path(__file__).parent
templates = Jinja2Templates(directory=_HERE / "templates")
router = APIRouter(include_in_schema=False, dependencies=[Depends(require_read)])
StoreDep = Annotated[Store, Depends(read_store)]
BUILTIN = ("ecmp", "ecmp-qp", "adaptive", "spray", "pinning")


def _plotly_js() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def mount_web(app: FastAPI) -> None:
    """Add the pages and their static files (plotly.js from the installed plotly: no CDN)."""
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=_HERE / "static"), name="static")


@router.get("/vendor/plotly.min.js")
def plotly_js() -> FileResponse:
    return FileResponse(_plotly_js(), media_type="text/javascript")


def _page(request: Request, name: str, **context: Any) -> HTMLResponse:
    snapshot = request.app.state.snapshots.taken
    return templates.TemplateResponse(
        request, name, {"snapshot": snapshot.strftime("%Y-%m-%d %H:%M:%S UTC"), **context}
    )


@router.get("/", response_class=HTMLResponse)
def runs_page(
    request: Request,
    store: StoreDep,
    scenario: Annotated[str | None, Query(max_length=200)] = None,
    strategy: Annotated[str | None, Query(max_length=200)] = None,
    sort: Literal["run_id", "created_at", "scenario", "seed", "strategies"] = "run_id",
    order: Literal["asc", "desc"] = "desc",
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
) -> HTMLResponse:
    """The dashboard: the runs table (sort, filter, pages) and the form that starts a job."""
    where = RunFilter(scenario or None, strategy or None)
    page = page_runs(store, where, sort, order == "desc", limit, offset)
    examples = [e for e in list_examples(request.app.state.settings.examples_dir)
                if e.workload in ("perftest", "collective", "workloads", "cloud")]
    query = {"scenario": scenario or "", "strategy": strategy or "", "sort": sort, "order": order,
             "limit": limit, "offset": offset}
    return _page(request, "index.html", page=page, query=query, examples=examples, strategies=BUILTIN,
                 frame=plots.frame(""))


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, store: StoreDep, run_id: int) -> HTMLResponse:
    """One run: its trade-off table, conclusions and plots (a one-cloud run: its report)."""
    run = stored_run(store, run_id)
    if isinstance(run, StoredCloud):
        from markupsafe import Markup

        from cloudtwin.evaluation.cloud_report import cloud_body

        return _page(request, "cloud_run.html", run=run, report=Markup(cloud_body(run)))  # noqa: S704 - escaped
    data = run_plots(store, run_id)
    aggregate = {n: s.performance.aggregate_gbps for n, s in run.strategies.items()}
    order = list(run.strategies)  # the database groups in no particular order
    figures = {
        "timeline": plots.timeline_figure({n: data.timelines[n] for n in order if n in data.timelines}),
        "fct": plots.fct_figure({n: data.fct[n] for n in order if n in data.fct}),
        "aggregate": plots.bar_figure("Aggregate throughput", aggregate, "Gbps"),
    }
    return _page(
        request, "run.html", run=run, table=tradeoff(run), figures=figures,
        migrations=migrations(run),
    )


@router.get("/compare", response_class=HTMLResponse)
def compare_page(
    request: Request, store: StoreDep, runs: Annotated[str, Query(max_length=200)]
) -> HTMLResponse:
    """Several runs side by side."""
    compared = compare_runs(store, parse_run_ids(runs)).runs
    groups = {f"run {r.run_id}": {n: s.aggregate_gbps for n, s in r.strategies.items()}
              for r in compared}
    recovery = {f"run {r.run_id}": {n: _ms(s.time_to_recover_s) for n, s in r.strategies.items()}
                for r in compared}
    figures = {
        "aggregate": plots.grouped_bar_figure("Aggregate throughput", groups, "Gbps"),
        "recovery": plots.grouped_bar_figure("Time to recover", recovery, "ms"),  # as the table
    }
    return _page(request, "compare.html", runs=compared, figures=figures)


@router.get("/logs", response_class=HTMLResponse)
def logs_page(
    request: Request,
    store: StoreDep,
    text: Annotated[str | None, Query(max_length=500)] = None,
    window_s: Annotated[float | None, Query(gt=0.001, le=7 * 86400)] = None,
) -> HTMLResponse:
    """Log search and the timeline of lines with their anomalies."""
    from cloudtwin.service.api.logs import search, timeline

    try:
        window_s = window_s or _default_window_s(store)
        found = search(store, text, None, None, None, PAGE_LINES).lines if text else []
        line_timeline = timeline(store, window_s, None, None)
        problem = None
    except CloudtwinError as err:
        found, line_timeline, problem = [], None, str(err)
    figure = plots.log_timeline_figure(line_timeline) if line_timeline else None
    return _page(request, "logs.html", lines=found, text=text or "", window_s=window_s,
                 figure=figure, problem=problem,
                 anomalies=line_timeline.anomalies if line_timeline else [])


#: The timeline of the logs page shows about this many windows unless asked otherwise.
TIMELINE_WINDOWS = 80
#: Lines the logs page lists (the API gives more).
PAGE_LINES = 50


def _default_window_s(store: Store) -> float:
    """A window that cuts the stored lines' time span into about TIMELINE_WINDOWS windows."""
    if store.schema_version("ops") is None:
        return 60.0
    first, last = store.query("SELECT min(ts), max(ts) FROM ops_lines")[1][0]
    if first is None or last == first:
        return 60.0
    span = (last - first).total_seconds()
    return float(f"{max(span / TIMELINE_WINDOWS, 0.002):.2g}")


@router.get("/diagnosis", response_class=HTMLResponse)
def diagnosis_page(
    request: Request, store: StoreDep, run: Annotated[str | None, Query(max_length=500)] = None
) -> HTMLResponse:
    """The ranking of likely root causes of one twin run (the latest unless `run` names
    one), drawn on its fabric, with links to the store's other runs."""
    from cloudtwin.service.api.diagnosis import diagnosis
    from cloudtwin.store.twin_tables import run_names

    status = 200
    try:
        found = diagnosis(store, 10, None, run)
        problem = None
    except CloudtwinError as err:
        found, problem, status = None, str(err), err.status if err.status == 404 else 200
    figure = plots.fabric_figure(found.fabric, found.suspects) if found else None
    page = _page(request, "diagnosis.html", found=found, figure=figure, problem=problem,
                 runs=run_names(store))
    page.status_code = status
    return page


def _ms(seconds: float | None) -> float | None:
    """Seconds as milliseconds (the unit the compare table gives the time to recover in)."""
    return None if seconds is None else 1e3 * seconds
