"""`cloudtwin evaluate`: every strategy on performance, resiliency and complexity, with a report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from cloudtwin.cli.checks import check_out_dir, check_scenario_file, check_strategy_list
from cloudtwin.cli.output import (
    BUILTIN_STRATEGIES,
    emit_json,
    is_cloud_file,
    read_cloud,
    read_scenario,
    read_scenario_text,
    stdout,
    write_json,
    write_text,
)
from cloudtwin.errors import ScenarioError, StoreError
from cloudtwin.store.defaults import DEFAULT_DB

if TYPE_CHECKING:
    from cloudtwin.evaluation.results import CloudResults, Results

__all__ = ["evaluate", "print_document"]


def print_document(document: Results, title: str) -> None:
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
    c = document.conclusions
    stdout.print(f"All techniques are resilient: {c.all_resilient_statement}.", highlight=False)
    stdout.print(f"Pinning is fastest but most complex: {c.pinning_statement}.", highlight=False)
    stdout.print(f"Recommendation: {document.recommendation}.", highlight=False)


def _is_federation(path: Path) -> bool:
    """Whether a scenario file describes several sites (`sites:`), as `cloudtwin federate` reads."""
    from cloudtwin.scenario.loader import parse_yaml

    try:
        text = read_scenario_text(path)
    except ScenarioError:
        return False  # read_scenario says what is wrong with it
    return "sites" in parse_yaml(text, str(path))[0]


_SCENARIO = typer.Argument(
    ..., help="Scenario YAML file.", show_default=False, callback=check_scenario_file
)
_STRATEGIES = typer.Option(
    BUILTIN_STRATEGIES, "--strategies", help="Comma-separated strategies: names or package.module:Class.",
    callback=check_strategy_list,
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
    With --no-store and no --out, nothing is written to the disk.

    Example:  cloudtwin evaluate examples/resiliency.yaml --strategies ecmp,adaptive,pinning --out report
    """
    from cloudtwin.evaluation import usecases

    if _is_federation(scenario):  # a multi-site scenario: its gateway faults, its traffic
        from cloudtwin.cli.federate import evaluate as evaluate_federation

        evaluate_federation(scenario, overrides, None if no_store else db, as_json)
        return
    names = usecases.parse_strategies(strategies, unique=True)
    if is_cloud_file(scenario):  # federated sites of one cloud: every part on one run
        _evaluate_cloud(scenario, names, out, None if no_store else db, overrides, as_json)
        return
    loaded = read_scenario(scenario, overrides)
    folder = _report_folder(out, no_store, loaded.name)
    talk = Console(stderr=True) if sys.stderr.isatty() and not as_json else None
    say = (lambda m: talk.log(m)) if talk else None
    result = usecases.evaluate(loaded, names, say)
    if folder is not None:
        _make_folder(folder)
        for name, text in result.files.items():
            write_text(folder / name, text)
    if not no_store:
        from cloudtwin.store.database import Store

        with Store(db) as store:
            result = usecases.record_evaluation(store, result)
    run_id = result.run_id
    stored = f"; stored as run {run_id} in {db}" if run_id is not None else ""
    if as_json:
        emit_json(result.to_json())
        if folder is not None:
            typer.echo(_wrote(folder, stored), err=True)
        return
    print_document(result.results, f"{loaded.name}: three-fold evaluation")
    stdout.print(_wrote(folder, stored), highlight=False)


def _report_folder(out: Path | None, no_store: bool, name: str) -> Path | None:
    """Where the report goes: --out, else `evaluation-NAME` unless --no-store (which
    writes nothing to the disk unless --out names a folder)."""
    if out is not None:
        return out
    return None if no_store else Path(f"evaluation-{name}")


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise StoreError(f"--out {folder}: cannot create the report directory: {err}") from err


def _wrote(folder: Path | None, stored: str) -> str:
    """The one line that says what was written where."""
    if folder is None:
        return "Wrote no report (--no-store without --out; --out DIR writes one)."
    return f"Wrote {folder}/report.html, report.md, results.json{stored}."


def _evaluate_cloud(
    scenario: Path, names: list[str], out: Path | None, db: Path | None, overrides: list[str], as_json: bool
) -> None:
    """`evaluate` on one cloud: the report, the run in the store, the operations data of its
    faulted run."""
    from cloudtwin.diagnosis.cloud import emit_cloud
    from cloudtwin.evaluation.cloud import cloud_html, evaluate_cloud
    from cloudtwin.evaluation.usecases import record_cloud

    cloud = read_cloud(scenario, overrides)
    folder = _report_folder(out, db is None, cloud.name)
    talk = Console(stderr=True) if sys.stderr.isatty() and not as_json else None
    say = (lambda m: talk.log(m)) if talk else None
    evaluation = evaluate_cloud(cloud, names, say)
    document = evaluation.to_json()
    if folder is not None:
        _make_folder(folder)
        write_text(folder / "report.md", evaluation.markdown())
        write_text(folder / "report.html", cloud_html(evaluation))
        write_json(folder / "results.json", document)
    stored = ""
    if db is not None:
        from cloudtwin.store.database import Store

        with Store(db) as store:
            run_id = record_cloud(store, evaluation.results)
            stored = f"; stored as run {run_id} in {db}"
            if evaluation.runs is not None:
                emit_cloud(store, *evaluation.runs)
                stored += f", with its operations data (cloudtwin diagnose --db {db})"
    if as_json:
        emit_json(document)
        if folder is not None:
            typer.echo(_wrote(folder, stored), err=True)
        return
    print_cloud(evaluation.results)
    stdout.print(_wrote(folder, stored), highlight=False)


def print_cloud(document: CloudResults) -> None:
    """A cloud run's tables and notes, for a terminal."""
    from cloudtwin.evaluation.cloud_report import cloud_notes, cloud_tables

    stdout.print(f"{document.scenario}: the cloud evaluated", style="bold", highlight=False)
    for spec in cloud_tables(document):
        table = Table(title=spec.title, title_justify="left")
        for i, name in enumerate(spec.header):
            table.add_column(name, justify="left" if i < 2 or name in ("what", "from", "to") else "right")
        for row in spec.rows:
            table.add_row(*row)
        stdout.print(table)
    for note in cloud_notes(document):
        stdout.print(note, highlight=False, markup=False)
