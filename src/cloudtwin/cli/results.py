"""`cloudtwin results`: the evaluation runs kept in the store."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from cloudtwin.cli.output import emit_json, stdout
from cloudtwin.store.defaults import DEFAULT_DB

__all__ = ["app"]

app = typer.Typer(
    help=(
        "Evaluation runs kept in the store (written by cloudtwin evaluate).\n\n"
        "Example:  cloudtwin results list --db cloudtwin.duckdb"
    ),
    no_args_is_help=True,
)

_DB = typer.Option(DEFAULT_DB, "--db", help="The results store (DuckDB).")
_JSON = typer.Option(False, "--json", help="Print JSON on stdout and nothing else.")


@app.command("list")
def list_runs(db: Path = _DB, as_json: bool = _JSON) -> None:
    """List stored runs, newest first.

    Example:  cloudtwin results list --json
    """
    from cloudtwin.evaluation.usecases import list_results
    from cloudtwin.store.database import Store

    with Store(db, read_only=True) as store:
        runs = list_results(store)
    if as_json:
        emit_json(runs)
        return
    table = Table(title=f"runs in {db}", title_justify="left")
    for column in ("run", "created (UTC)", "scenario", "seed", "strategies", "recommendation"):
        table.add_column(column)
    for run in runs:
        table.add_row(
            str(run["run_id"]), str(run["created_at"])[:19], run["scenario"], str(run["seed"]),
            run["strategies"], (run["recommendation"] or "").split(":")[0],
        )
    stdout.print(table)


@app.command("show")
def show(
    run: int = typer.Argument(..., help="Run id (see cloudtwin results list).", show_default=False),
    db: Path = _DB,
    as_json: bool = _JSON,
) -> None:
    """Show one stored run: its trade-off table, conclusions and recommendation (a one-cloud
    run: its comparison, faults, sites, federated traffic and migrations).

    Example:  cloudtwin results show 1 --json
    """
    from cloudtwin.cli.evaluate import print_document
    from cloudtwin.evaluation.results import StoredCloud
    from cloudtwin.evaluation.usecases import show_result
    from cloudtwin.store.database import Store

    with Store(db, read_only=True) as store:
        stored = show_result(store, run)
    if as_json:
        emit_json(stored.to_json())
        return
    if isinstance(stored, StoredCloud):  # a one-cloud run: its sites, traffic and migrations
        from cloudtwin.cli.evaluate import print_cloud

        stdout.print(f"run {run} ({stored.created_at} UTC)", highlight=False)
        print_cloud(stored)
        return
    print_document(stored, f"run {run}: {stored.scenario} ({stored.created_at} UTC)")
    stdout.print(f"{stored.flow_rows} per-flow rows stored.", highlight=False)
