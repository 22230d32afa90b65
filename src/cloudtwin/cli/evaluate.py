"""`cloudtwin evaluate`: every strategy on performance, resiliency and complexity, with a report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from cloudtwin.cli.checks import check_out_dir
from cloudtwin.cli.output import BUILTIN_STRATEGIES, emit_json, read_scenario, stdout, write_json
from cloudtwin.errors import RoutingError, StoreError
from cloudtwin.store.database import DEFAULT_DB

if TYPE_CHECKING:
    from cloudtwin.evaluation.evaluate import Evaluation
    from cloudtwin.store.runs import FlowRows

__all__ = ["evaluate", "print_document", "write_text"]


def write_text(path: Path, text: str) -> None:
    """Write a text file atomically (a crash never leaves half a report)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def print_document(document: dict[str, Any], title: str) -> None:
    """The trade-off table, the two conclusions and the recommendation, for a terminal."""
    from cloudtwin.evaluation.report import tradeoff_rows

    header, rows = tradeoff_rows(document)
    # metrics down, strategies across: five strategies fit a terminal, fifteen metrics do not
    table = Table(title=title, title_justify="left")
    table.add_column(header[0])
    for row in rows:
        table.add_column(row[0], justify="right")
    for i, name in enumerate(header[1:], start=1):
        table.add_row(name, *(row[i] for row in rows))
    stdout.print(table)
    c = document["conclusions"]
    stdout.print(f"All techniques are resilient: {c['all_resilient_statement']}.", highlight=False)
    stdout.print(f"Pinning is fastest but most complex: {c['pinning_statement']}.", highlight=False)
    stdout.print(f"Recommendation: {document['recommendation']}.", highlight=False)


def _flow_rows(evaluation: Evaluation) -> list[FlowRows]:
    from cloudtwin.evaluation.jobs import tenant_name
    from cloudtwin.store.runs import FlowRows

    flows = evaluation.bench.connections
    jobs = [evaluation.bench.jobs[int(j)].name for j in flows.job]
    tenants = [tenant_name(evaluation.scenario, int(t)) for t in flows.tenant]
    return [
        FlowRows(
            strategy=o.name,
            job=jobs,
            tenant=tenants,
            src=flows.src,
            dst=flows.dst,
            size_bytes=flows.size_bytes,
            start_s=o.connection_start_s,
            finish_s=o.connection_finish_s,
            baseline_finish_s=o.baseline_finish_s,
            stall_s=o.stall_s,
            affected=o.affected,
        )
        for o in evaluation.outcomes
    ]


_SCENARIO = typer.Argument(..., help="Scenario YAML file.", show_default=False)
_STRATEGIES = typer.Option(
    BUILTIN_STRATEGIES, "--strategies", help="Comma-separated strategies: names or package.module:Class."
)
_OUT = typer.Option(
    None, "--out", "-o", help="Report directory (default: evaluation-NAME, NAME the scenario's name).",
    callback=check_out_dir,
)
_DB = typer.Option(DEFAULT_DB, "--db", help="The results store (DuckDB).")
_NO_STORE = typer.Option(False, "--no-store", help="Do not record the run in the store.")
_SET = typer.Option(None, "--set", "-s", help="Override a key: --set seed=7 (repeatable).")
_JSON = typer.Option(False, "--json", help="Print results.json (and the run id) on stdout, nothing else.")


def evaluate(
    scenario: Path = _SCENARIO,
    strategies: str = _STRATEGIES,
    out: Path = _OUT,
    db: Path = _DB,
    no_store: bool = _NO_STORE,
    overrides: list[str] = _SET,
    as_json: bool = _JSON,
) -> None:
    """Evaluate routing strategies on performance, resiliency and operational complexity.

    Runs each strategy over the scenario's jobs twice: without faults, and with its
    faults (one random cable failure if it has none) and the strategy's modelled repair.

    Writes DIR/report.html (self-contained), DIR/report.md and DIR/results.json, records
    the run in the store (--db), and prints the trade-off table and a recommendation.

    Example:  cloudtwin evaluate examples/resiliency.yaml --strategies ecmp,adaptive,pinning --out report
    """
    from cloudtwin.evaluation.evaluate import evaluate as run_evaluation
    from cloudtwin.evaluation.report import render_html, render_markdown, results_document

    names = [s.strip() for s in strategies.split(",") if s.strip()]
    if not names:
        raise RoutingError("--strategies: no strategy named")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise RoutingError(f"--strategies: {', '.join(twice)} named twice")
    loaded = read_scenario(scenario, overrides)
    talk = Console(stderr=True) if sys.stderr.isatty() and not as_json else None
    evaluation = run_evaluation(loaded, names, (lambda m: talk.log(m)) if talk else None)
    seen = [o.name for o in evaluation.outcomes]
    if len(set(seen)) != len(seen):
        raise RoutingError(f"--strategies: a strategy is named twice ({', '.join(seen)})")
    document = results_document(evaluation)
    folder = out if out is not None else Path(f"evaluation-{loaded.name}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise StoreError(f"--out {folder}: cannot create the report directory: {err}") from err
    write_json(folder / "results.json", document)
    write_text(folder / "report.md", render_markdown(document))
    write_text(folder / "report.html", render_html(document))
    run_id = None
    if not no_store:
        from cloudtwin.store.database import Store
        from cloudtwin.store.runs import save_run

        with Store(db) as store:
            run_id = save_run(store, document, _flow_rows(evaluation))
    if as_json:
        emit_json({"run_id": run_id, **document})
        return
    print_document(document, f"{loaded.name}: three-fold evaluation")
    stored = f"; stored as run {run_id} in {db}" if run_id is not None else ""
    stdout.print(f"Wrote {folder}/report.html, report.md, results.json{stored}.", highlight=False)
