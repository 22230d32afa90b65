"""`cloudtwin sweep`: one command over the product (or zip) of varied scenario keys."""

from __future__ import annotations

import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

import typer
from rich.console import Console
from rich.table import Table

from cloudtwin.cli.checks import check_plot_file, check_scenario_file, check_strategy_list
from cloudtwin.cli.output import emit_json, read_scenario_text, stdout, wrote
from cloudtwin.errors import StoreError, SweepError
from cloudtwin.store.defaults import DEFAULT_DB
from cloudtwin.sweep import CHECK_LIMIT_S

if TYPE_CHECKING:
    from cloudtwin.store.sweeps import PointRecord
    from cloudtwin.sweep import Executor, Plan, Point, Summary, SweepRun, Task

__all__ = ["sweep"]


class CommandName(StrEnum):
    """The commands a sweep can run at each point."""

    run = "run"
    compare = "compare"
    nccl_tests = "nccl-tests"
    train = "train"
    evaluate = "evaluate"


class ExecutorName(StrEnum):
    """Where the points run."""

    local = "local"
    ray = "ray"
    serial = "serial"


_VARY = typer.Option(
    ...,
    "--vary",
    "-v",
    help=(
        "KEY=VALUES to vary (repeatable): comma-separated values read as --set reads them, "
        "or integer ranges A..B (A..B:STEP), e.g. seed=1..10, fabric.spines=4,8."
    ),
    show_default=False,
)
_ZIP = typer.Option(
    False,
    "--zip",
    help=(
        "Pair the i-th values of the varied keys instead of taking every combination "
        "(a varied seed still multiplies: each pair runs under every seed)."
    ),
)

_SCENARIO = typer.Argument(
    ..., help="Scenario YAML file.", show_default=False, callback=check_scenario_file
)
_COMMAND = typer.Option(CommandName.run, "--command", "-c", help="What runs at each point.")
_STRATEGIES = typer.Option(
    None,
    "--strategies",
    help="Comma-separated strategies for compare, nccl-tests, evaluate (ratios to the first).",
    callback=check_strategy_list,
)
_SET = typer.Option(None, "--set", "-s", help="Override a key at every point (repeatable).")
_EXECUTOR = typer.Option(
    ExecutorName.local,
    "--executor",
    "-e",
    help="local process pool, a Ray cluster, or serial (in this process).",
)
_ADDRESS = typer.Option(
    None, "--address", help="Ray cluster: auto (the one on this machine) or HOST:PORT; implies ray."
)
_WORKERS = typer.Option(None, "--workers", "-w", help="Points at a time (default: the CPUs).")
_DB = typer.Option(DEFAULT_DB, "--db", help="The results store (DuckDB).")
_METRIC = typer.Option(
    None, "--metric", "-m", help="Dotted path of the result number to summarise (default per command)."
)
_X = typer.Option(None, "--x", help="Varied key for the plot's x axis (default: the first but seed).")
_PLOT = typer.Option(
    None, "--plot", help="Write a plot of the metric against --x (PNG, SVG, PDF).", callback=check_plot_file
)
_CHECK_LIMIT = typer.Option(
    CHECK_LIMIT_S,
    "--check-limit",
    min=0.0,
    help=(
        "Seconds the checks before the first point may take; a larger sweep checks each "
        "varied value once instead of every point, and is refused if even that takes longer."
    ),
)
_JSON = typer.Option(False, "--json", help="Print the summary as JSON on stdout and nothing else.")


@contextmanager
def _progress(label: str, quiet: bool) -> Iterator[Callable[[int, int], None]]:
    """A bar with an ETA on a terminal; otherwise a line on stderr at most once a second."""
    if sys.stderr.isatty() and not quiet:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(label, total=None)
            yield lambda done, total: bar.update(task, completed=done, total=total)
        return
    last = [0.0]

    def line(done: int, total: int) -> None:
        now = time.monotonic()
        if total and (done == total or now - last[0] >= 1.0):
            last[0] = now
            print(f"{label}: {done}/{total} points", file=sys.stderr, flush=True)

    yield line


def _executor(name: ExecutorName, address: str | None, workers: int | None) -> Executor:
    from cloudtwin.cli.executors import build_executor

    return build_executor(name.value, address, workers, error=SweepError)


#: Checks of fewer points than this (about a second) show no progress.
_QUIET_CHECKS = 5000

def _profile_files(path: Path, text: str, sets: list[str], plan: Plan) -> tuple[tuple[str, str], ...]:
    """The profile files the sweep's points name (the scenario's, with its sets, and every
    varied value of a key that names one), read once here: path as given -> JSON text."""
    import json

    from cloudtwin.cli.profilefiles import read_named_files
    from cloudtwin.scenario.files import FILE_KEYS, named_files
    from cloudtwin.scenario.loader import parse_yaml, scenario_from_data

    data, node = parse_yaml(text, str(path))
    named = named_files(scenario_from_data(data, node, str(path), sets))
    typed = list(sets)
    for vary in plan.varies:
        if vary.key.startswith(FILE_KEYS):
            named += [(vary.key, value) for value in vary.values if value.endswith(".json")]
            typed += [vary.overrides(i) for i in range(len(vary.values))]
    files = read_named_files(named, path, typed)
    return tuple((name, json.dumps(content, sort_keys=True)) for name, content in sorted(files.items()))


def _check(plan: Plan, task: Task, limit_s: float, quiet: bool) -> None:
    """Check the sweep before it starts, with progress when that takes a while; say so on
    stderr when only each varied value was checked."""
    from cloudtwin.sweep import check_plan

    if plan.check_count() < _QUIET_CHECKS:
        checked = check_plan(plan, task, limit_s=limit_s, limit_name="--check-limit")
    else:
        with _progress("sweep: checking", quiet) as checking:
            checked = check_plan(plan, task, checking, limit_s, limit_name="--check-limit")
    if checked.sampled:
        typer.echo(
            f"sweep: checked each varied value once ({checked.checked:,} checks; every point would "
            f"take about {checked.full * checked.per_check_s:,.0f} s); a point that fails when it "
            "runs is stored with its error",
            err=True,
        )


def _number(value: float) -> str:
    """Four significant digits, without an exponent for the sizes results come in."""
    if math.isnan(value):
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _table(summary: Summary, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for key in summary.keys:
        table.add_column(key, no_wrap=True)
    for column in ("seeds", "mean", "95% interval", "min", "max", "failed"):
        table.add_column(column, justify="right")
    for g in summary.groups:
        interval = f"{_number(g.low)}-{_number(g.high)}" if g.n > 1 else "-"
        mean = _number(g.mean)
        cells = (str(g.n), mean, interval, _number(g.least), _number(g.most), str(g.failed))
        table.add_row(*(g.values[k] for k in summary.keys), *cells)
    return table


def _series_keys(plan: Plan, x: str) -> list[str]:
    """The keys whose combinations are the plot's lines: every varied key but the seed and
    the x axis (and, under zip, the keys paired with the x axis)."""
    from cloudtwin.sweep import SEED

    tied = {v.key for v in plan.paired} if plan.zipped and x != SEED else {x}
    return [k for k in plan.keys if k != SEED and k not in tied]


def _write_plot(path: Path, summary: Summary, plan: Plan, x: str, title: str) -> None:
    """Plot the summary against `x`; with the seed on the x axis, the summary must be per
    seed (`summarize(..., by_seed=True)`)."""
    from cloudtwin.sweep.plot import plot_summary

    figure = plot_summary(summary, x, _series_keys(plan, x), title)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=120, bbox_inches="tight")
    except (OSError, ValueError) as err:
        raise StoreError(f"plot {path}: cannot write the plot: {err}") from err
    wrote(path)


def _report(run: SweepRun, db: Path) -> str:
    failed = f", {run.failed} failed" if run.failed else ""
    crashed = f", {run.crashed} crashed" if run.crashed else ""
    return (
        f"{run.points} points: {run.skipped} already stored, {run.executed} run{failed}{crashed} "
        f"in {run.seconds:.1f} s; results in {db}."
    )


class _Failure(TypedDict):
    """A failed point as `--json` lists it."""

    overrides: list[str]
    status: Literal["error", "crash"]
    error: str | None


def _failures(points: list[Point], records: dict[str, PointRecord], run: SweepRun) -> list[_Failure]:
    """Every failed point of the sweep, in sweep order: those stored with their error (bad
    input found while running, this run or an earlier one) and those that crashed now."""
    crashed = dict(run.crashes)
    failed: list[_Failure] = []
    for point in points:
        record = records.get(point.key)
        if record is not None and record.status == "error":
            failed.append({"overrides": list(point.overrides), "status": "error", "error": record.error})
        elif point.overrides in crashed:
            failed.append({"overrides": list(point.overrides), "status": "crash",
                           "error": crashed[point.overrides]})
    return failed


#: Failed points listed under the table (--json lists every one).
_LISTED_FAILURES = 10


def _print_failures(failures: list[_Failure]) -> None:
    for failure in failures[:_LISTED_FAILURES]:
        stdout.print(f"failed: {' '.join(failure['overrides'])}: {failure['error']}",
                     highlight=False, markup=False, soft_wrap=True)
    if len(failures) > _LISTED_FAILURES:
        stdout.print(f"... and {len(failures) - _LISTED_FAILURES} more failed points (--json lists "
                     "every one)", highlight=False, soft_wrap=True)


def _exit_for(failures: list[_Failure], points: int) -> None:
    """Exit 1 if a point crashed (a bug, as an unexpected error is in every command),
    else 2 (SweepError) if a point failed on its input, after the results are out."""
    crashes = [f for f in failures if f["status"] == "crash"]
    if crashes:
        first = crashes[0]
        typer.echo(
            f"cloudtwin: sweep: {len(crashes)} of {points} points crashed (not stored; the same "
            f"command runs them again); first: {' '.join(first['overrides'])}: {first['error']}",
            err=True,
        )
        raise typer.Exit(1)
    if failures:
        first = failures[0]
        raise SweepError(
            f"{len(failures)} of {points} points failed (stored with their errors); first: "
            f"{' '.join(first['overrides'])}: {first['error']}"
        )


def sweep(
    scenario: Path = _SCENARIO,
    varies: list[str] = _VARY,
    zipped: bool = _ZIP,
    command: CommandName = _COMMAND,
    strategies: str = _STRATEGIES,
    overrides: list[str] = _SET,
    executor: ExecutorName = _EXECUTOR,
    address: str = _ADDRESS,
    workers: int = _WORKERS,
    db: Path = _DB,
    metric: str = _METRIC,
    x: str = _X,
    plot: Path = _PLOT,
    check_limit: float = _CHECK_LIMIT,
    as_json: bool = _JSON,
) -> None:
    """Run a command at every point of a parameter sweep and summarise a metric over seeds.

    Points are the product of the --vary values (or their zip). Each finished point is
    written to the store as it finishes; a point is keyed on the scenario's content, its
    overrides, the command and the cloudtwin version, so a re-run (after an interruption,
    or with more values) runs only the points that are not stored yet.

    The summary groups points by the varied keys other than seed: the metric's mean and
    95% confidence interval over the seeds.

    Example:  cloudtwin sweep examples/leaf-spine-perftest.yaml --vary seed=1..5
    --vary routing.strategy=ecmp,pinning --db sweeps.duckdb
    """
    from cloudtwin import __version__
    from cloudtwin.cli.sites import refuse_cloud
    from cloudtwin.store.database import Store
    from cloudtwin.store.sweeps import load_points
    from cloudtwin.sweep import SEED, Plan, Task, parse_vary, run_points, summarize

    refuse_cloud(
        scenario,
        "sweep",
        f"a sweep varies a single-fabric scenario: run the cloud per point with `cloudtwin evaluate "
        f"{scenario} --set seed=N`, or sweep one of its sites' scenarios",
    )
    names = tuple(s.strip() for s in (strategies or "").split(",") if s.strip())
    text = read_scenario_text(scenario)
    plan = Plan(tuple(parse_vary(v) for v in varies), zipped)
    files = _profile_files(scenario, text, list(overrides or ()), plan)
    task = Task(text, str(scenario), command.value, tuple(overrides or ()), names, files)
    others = [k for k in plan.keys if k != SEED]
    axis = x or (others[0] if others else plan.keys[0])
    if axis not in plan.keys:
        raise SweepError(f"x: {axis} is not a varied key (varied: {', '.join(plan.keys)})")
    _check(plan, task, check_limit, as_json)
    chosen = _executor(executor, address, workers)
    name = task.scenario([]).name
    points = plan.points(task.digest)
    stop = threading.Event()
    handlers = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:  # a signal stops the sweep between batches: what finished is written first
        with Store(db) as store, _progress(f"{name}: sweep", as_json) as progress:
            run = run_points(points, task, store, chosen, name, progress, should_stop=stop.is_set)
            records = load_points(store, [p.key for p in points]) if not run.interrupted else {}
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    if run.interrupted:
        typer.echo(f"cloudtwin: sweep: interrupted after {run.executed} points; they are in {db}, "
                   "the same command runs the rest", err=True)
        raise typer.Exit(130)
    summary = summarize(plan, points, records, metric or task.default_metric())
    failures = _failures(points, records, run)
    title = f"{name}: {summary.metric} ({command.value}) over {', '.join(plan.keys)}"
    if plot is not None:
        plotted = summarize(plan, points, records, summary.metric, by_seed=True) if axis == SEED else summary
        _write_plot(plot, plotted, plan, axis, title)
    if as_json:
        emit_json(
            {
                "scenario": name,
                "command": command.value,
                "version": __version__,
                "keys": plan.keys,
                "zip": plan.zipped,
                "run": run.to_json(),
                "summary": summary.to_json(),
                "failed": failures,
            }
        )
    else:
        stdout.print(_table(summary, title))
        stdout.print(_report(run, db), highlight=False, soft_wrap=True)
        _print_failures(failures)
    _exit_for(failures, len(points))
