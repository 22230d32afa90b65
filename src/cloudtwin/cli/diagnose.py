"""`cloudtwin diagnose`: rank likely root causes from the store (optionally simulating first)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from cloudtwin.cli.checks import check_scenario_file
from cloudtwin.cli.output import emit_json, is_cloud_file, read_cloud, read_scenario, stdout
from cloudtwin.errors import LimitError, StoreError
from cloudtwin.store.defaults import DEFAULT_DB, DEFAULT_MAX_CELLS

if TYPE_CHECKING:
    from cloudtwin.diagnosis.rank import Suspect
    from cloudtwin.diagnosis.usecase import Diagnosis
    from cloudtwin.store.database import Store

__all__ = ["diagnose"]

_SCENARIO = typer.Argument(
    None,
    help="Simulate this scenario with its faults and emit its operations data first.",
    callback=check_scenario_file,
)
_DB = typer.Option(DEFAULT_DB, "--db", help="The store file (DuckDB).")
_TOP = typer.Option(10, "--top", min=1, help="How many suspects to show.")
_WINDOW = typer.Option(
    None, "--window-ms", min=0.001, help="Log anomaly window (default: 5 telemetry intervals)."
)
_SET = typer.Option(None, "--set", help="Override a scenario key: a.b=value.")
_MAX_CELLS = typer.Option(
    DEFAULT_MAX_CELLS, "--max-cells", min=1,
    help="Refuse when log windows x keys exceeds this (memory grows with it).",
)
_JSON = typer.Option(False, "--json", help="Print JSON on stdout instead of a table.")
_RUN = typer.Option(
    None, "--run", help="Rank this twin run of the store (runs are named after their scenario; "
    "default: the latest written). Without SCENARIO only.",
)


def _open_store(db: Path, create: bool) -> Store:
    from cloudtwin.store.database import Store

    if not create and not db.exists():
        raise StoreError(f"--db {db}: no store there (run `cloudtwin diagnose SCENARIO --db {db}` first)")
    return Store(db)


def diagnose(
    scenario: Path | None = _SCENARIO,
    db: Path = _DB,
    top: int = _TOP,
    window_ms: float | None = _WINDOW,
    overrides: list[str] | None = _SET,
    max_cells: int = _MAX_CELLS,
    as_json: bool = _JSON,
    run: str | None = _RUN,
) -> None:
    """Rank likely root causes (links, NICs, switches, gateways, WAN links) from logs and
    flow telemetry, each with its evidence and the time window of its trouble.

    A store holds one twin run per scenario (cloud and single-fabric side by side);
    diagnosing a scenario again replaces its run. Without SCENARIO, --run picks the run.

    Example:  cloudtwin diagnose examples/diagnose.yaml --db diagnose.duckdb
    """
    from cloudtwin.diagnosis.usecase import diagnose as run_diagnosis
    from cloudtwin.diagnosis.usecase import diagnose_cloud

    cloud = read_cloud(scenario, overrides) if scenario is not None and is_cloud_file(scenario) else None
    loaded = read_scenario(scenario, overrides) if scenario is not None and cloud is None else None
    named = cloud.name if cloud is not None else loaded.name if loaded is not None else None
    if run is not None and named is not None and run != named:
        raise StoreError(
            f"--run {run}: diagnosing {scenario} ranks its own run {named!r}; drop --run or SCENARIO",
            field="run",
        )
    window = timedelta(milliseconds=window_ms) if window_ms else None
    with _open_store(db, create=scenario is not None) as store:
        try:
            if cloud is not None:
                diagnosis = diagnose_cloud(store, cloud, top, window, max_cells)
            else:
                diagnosis = run_diagnosis(store, loaded, top, window, max_cells, run)
        except LimitError as err:
            raise LimitError(f"{err} (with --max-cells)", err.limit) from err
    if as_json:
        emit_json(diagnosis.to_json())
        return
    _print(diagnosis)


def _print(diagnosis: Diagnosis) -> None:
    """The ranking as a table, titled with its run; the store's other runs named below it."""
    others = [r for r in diagnosis.runs if r != diagnosis.run]
    note = (f"The store also holds the twin run{'s' if len(others) > 1 else ''} "
            f"{', '.join(others)} (--run NAME ranks one)." if others else None)
    if not diagnosis.fault_found:
        stdout.print("No fault found: no flow was degraded and no anomalous log line was an "
                     "error.")
        if note:
            stdout.print(note, highlight=False)
        return
    suspects = diagnosis.suspects
    title = "Likely root causes" + (f" in run {diagnosis.run}" if diagnosis.run else "")
    table = Table(title=title, title_justify="left", padding=(0, 1, 0, 0))
    for name in ("#", "component", "score", "evidence"):
        table.add_column(name, justify="right" if name in ("#", "score") else "left")
    for s in suspects:
        table.add_row(str(s.rank), f"{s.component}\n({s.kind})", f"{s.score:.2f}", _evidence(s))
    stdout.print(table)
    if note:
        stdout.print(note, highlight=False)


def _evidence(suspect: Suspect) -> str:
    """The evidence, short enough for an 80-column terminal: samples, then each cited message."""
    parts = [] if suspect.window == "-" else [suspect.window]
    if suspect.degraded_samples:
        total = suspect.degraded_samples + suspect.healthy_samples
        parts.append(f"{suspect.degraded_samples} of {total} flow samples degraded")
    top = sorted(suspect.messages.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    parts += [f"{m} x{n}" for m, n in top]
    return "\n".join(parts) or "-"
