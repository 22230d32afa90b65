"""The `cloudtwin logs` commands: ingest, compact, parse, templates, search, sql, counts, anomalies.

A thin layer: it opens the files (or stdin), calls the use cases of
:mod:`cloudtwin.store.ops_usecases` and prints their typed results as tables or JSON.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from datetime import date, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import typer
from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn
from rich.table import Table
from rich.text import Text

from cloudtwin.errors import LimitError, LogFormatError, StoreError
from cloudtwin.store.defaults import DEFAULT_DB, DEFAULT_MAX_CELLS, DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S
from cloudtwin.store.documents import finite_json

if TYPE_CHECKING:  # types only: what a command runs is imported when it runs (help stays quick)
    from cloudtwin.ops.reader import LogStream
    from cloudtwin.store.database import QueryResult
    from cloudtwin.store.ops_usecases import AnomalyRow, LineResult


class IngestExecutor(StrEnum):
    """Where an ingest's chunks are mined."""

    serial = "serial"
    process = "process"
    ray = "ray"


_EXECUTOR = typer.Option(
    IngestExecutor.serial, "--executor", "-e",
    help="Where lines are mined: serial (this process), process (a local pool of --workers) "
         "or ray (a local Ray cluster, or the one at --address). The store is the same "
         "whichever runs.",
)
_WORKERS = typer.Option(
    None, "--workers", "-w", help="Worker processes for process or ray (default: the CPUs)."
)
_ADDRESS = typer.Option(
    None, "--address", help="An existing Ray cluster: auto or HOST:PORT; implies ray."
)

app = typer.Typer(
    name="logs",
    help=(
        "Operations logs: ingest into the store, mine templates, query, detect changes.\n\n"
        "Example:  cloudtwin logs ingest HDFS_2k.log --format hdfs"
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # plain help: no `<bool>` after flags
    context_settings={"help_option_names": ["-h", "--help"]},
)

_FORMAT_HELP = (
    "A preset (hdfs, hadoop, spark, zookeeper, bgl, openssh, apache, linux, syslog, "
    "rfc3164, rfc5424, jsonl) or a Loghub format string such as "
    "'<Date> <Time> <Level> <Component>: <Content>'."
)
_DB = typer.Option(DEFAULT_DB, "--db", help="The store file (DuckDB).")
_JSON = typer.Option(False, "--json", help="Print JSON on stdout instead of a table.")
_SINCE = typer.Option(None, "--since", help="Only lines at or after this ISO 8601 time.")
_UNTIL = typer.Option(None, "--until", help="Only lines before this ISO 8601 time.")
_MASKS = typer.Option(
    None, "--mask", help="A regex whose matches become <*> before mining (repeatable); "
    "replaces the format's masks."
)
_PATHS = typer.Argument(..., help="Log files (plain or gzip); '-' reads stdin.")
_MAX_CELLS = typer.Option(
    DEFAULT_MAX_CELLS, "--max-cells", min=1,
    help="Refuse when windows x keys exceeds this (memory grows with it).",
)
#: The flag that lifts each limit a use case names.
_LIMIT_FLAGS = {"max_rows": "--max-rows", "timeout_s": "--timeout", "max_cells": "--max-cells"}


def _stdout() -> Console:
    return Console(soft_wrap=True)


def _to_json(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(finite_json(obj), default=_to_json, ensure_ascii=False) + "\n")


def _print_rows(result: QueryResult, as_json: bool, title: str | None = None) -> None:
    columns, rows = result
    if as_json:
        _print_json([dict(zip(columns, row, strict=True)) for row in rows])
        return
    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if v is None else str(_to_json(v)) for v in row))
    _stdout().print(table)


@contextmanager
def _flag_hints() -> Iterator[None]:
    """Say which flag lifts a limit that a use case reached."""
    try:
        yield
    except LimitError as err:
        flag = _LIMIT_FLAGS.get(err.limit)
        if flag is None:
            raise
        raise LimitError(f"{err} (with {flag})", err.limit) from err


def _open_log(path: str) -> LogStream:
    """The log at ``path`` ('-': stdin) as a stream; a path that cannot be read is named."""
    from cloudtwin.ops.reader import log_stream

    if path == "-":
        return log_stream(sys.stdin.buffer, "stdin", close_raw=False)
    try:
        raw: BinaryIO = Path(path).open("rb")  # noqa: SIM115 (the LogStream closes it)
    except FileNotFoundError as err:
        raise LogFormatError(f"{path}: no such file") from err
    except IsADirectoryError as err:
        raise LogFormatError(f"{path}: is a directory, not a log file") from err
    except OSError as err:
        raise LogFormatError(f"{path}: cannot open ({err.strerror})") from err
    try:
        return log_stream(raw, path)
    except BaseException:
        raw.close()
        raise


@contextmanager
def _progress(label: str, total: int | None) -> Iterator[Any]:
    """A progress bar on stderr when it is a terminal, else a no-op hook."""
    if not sys.stderr.isatty():
        yield lambda _n: None
        return
    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
        console=Console(stderr=True), transient=True,
    )
    with bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def _file_size(path: str) -> int | None:
    if path.endswith(".gz"):
        return None
    try:
        return Path(path).stat().st_size
    except OSError:
        return None


@app.command()
def ingest(
    paths: list[str] = _PATHS,
    log_format: str = typer.Option(..., "--format", "-f", help=_FORMAT_HELP),
    db: Path = _DB,
    source: str = typer.Option(
        "stdin", "--source", help="Source name for stdin; re-using it resumes that stream."
    ),
    year: int | None = typer.Option(
        None, "--year", help="Year for timestamps that have none (syslog); else 1900."
    ),
    masks: list[str] | None = _MASKS,
    executor: IngestExecutor = _EXECUTOR,
    workers: int | None = _WORKERS,
    address: str | None = _ADDRESS,
    segments: bool | None = typer.Option(
        None, "--segments/--no-segments",
        help="With process or ray: workers store their lines as Parquet files beside the "
             "store (STORE.segments/), read as part of ops_lines, instead of through the one "
             "writer (default: on with process or ray; `logs compact` folds them in).",
    ),
    as_json: bool = _JSON,
) -> None:
    """Ingest log files into the store, mining templates; re-running adds nothing new.

    Under one --source, stdin resumes where it stopped when it starts with the same
    bytes as before, and is added after what is stored when it is another stream.

    Example:  cloudtwin logs ingest HDFS_2k.log --format hdfs --db ops.duckdb
    """
    from cloudtwin.cli.executors import build_executor
    from cloudtwin.store.database import Store
    from cloudtwin.store.ops_ingest import INGEST_MEMORY_LIMIT
    from cloudtwin.store.ops_usecases import LogInput, ingest_logs, log_preset

    preset = log_preset(log_format, masks)
    if workers is not None and workers < 1:
        raise LogFormatError(f"workers: at least 1, got {workers}")
    pool = None
    if executor is not IngestExecutor.serial or address is not None:
        pool = build_executor(
            executor.value, address, workers, error=LogFormatError,
            ray_default_address=None,
            preload=("cloudtwin.ops.columnar", "cloudtwin.store.ops_segments"),
        )
    summaries = []
    try:
        with Store(db, memory_limit=INGEST_MEMORY_LIMIT) as store:
            for path in paths:
                with _open_log(path) as log:
                    item = (LogInput(log, source, "append") if path == "-"
                            else LogInput(log, str(Path(path).resolve())))
                    with _progress(Path(path).name, _file_size(path)) as hook:
                        summaries += ingest_logs(store, [item], preset, year=year,
                                                 progress=lambda _name: hook, executor=pool,
                                                 segments=segments)
    finally:
        if pool is not None:
            from cloudtwin.sweep.executors import stop_pool_servers

            stop_pool_servers()
    if as_json:
        _print_json([asdict(s) for s in summaries])
        return
    table = Table(title=f"ingested into {db}")
    for column in ("source", "lines", "unparsed", "new templates", "templates"):
        table.add_column(column, overflow="fold")
    for s in summaries:
        table.add_row(s.source, str(s.lines), str(s.unparsed), str(s.new_templates),
                      str(s.templates))
    _stdout().print(table)


@app.command()
def parse(
    path: str = typer.Argument(..., help="A log file (plain or gzip); '-' reads stdin."),
    log_format: str = typer.Option(..., "--format", "-f", help=_FORMAT_HELP),
    jsonl: bool = typer.Option(
        False, "--jsonl", "--json", help="Print one JSON object per input line."
    ),
    masks: list[str] | None = _MASKS,
) -> None:
    """Parse and mine a log without storing it.

    With --jsonl, prints {"line", "template_id", "template", "params"} per input line
    (a line that does not fit the format has "template_id": null and an "error").

    Example:  cloudtwin logs parse HDFS_2k.log --format hdfs --jsonl
    """
    from cloudtwin.store.ops_usecases import log_preset, parse_log

    preset = log_preset(log_format, masks)
    with _open_log(path) as log:
        summary = parse_log(log, preset, _write_jsonl if jsonl else None)
    if not jsonl:
        rows = [(t.template_id, t.lines, t.template) for t in summary.templates]
        title = f"{len(rows)} templates, {summary.unparsed} unparsed lines"
        _print_rows((["template_id", "lines", "template"], rows), False, title)


def _write_jsonl(lines: list[LineResult]) -> None:
    out = []
    for line in lines:
        obj = asdict(line)
        if line.error is None:
            del obj["error"]
        out.append(json.dumps(finite_json(obj), ensure_ascii=False) + "\n")
    sys.stdout.write("".join(out))


@app.command()
def templates(
    db: Path = _DB,
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="Show at most this many (default: all)."
    ),
    as_json: bool = _JSON,
) -> None:
    """List the mined templates, most frequent first.

    Example:  cloudtwin logs templates --db ops.duckdb --limit 10
    """
    from cloudtwin.store.database import Store
    from cloudtwin.store.ops_usecases import templates as list_templates

    with Store(db, read_only=True) as store:
        found = list_templates(store, limit)
    _print_rows(_table(found, ["template_id", "lines", "template"]), as_json)


@app.command()
def search(
    text: str | None = typer.Argument(None, help="Text the message must contain (any case)."),
    template: int | None = typer.Option(None, "--template", help="Only lines of this template."),
    since: str | None = _SINCE,
    until: str | None = _UNTIL,
    limit: int = typer.Option(100, "--limit", min=1, help="Show at most this many lines."),
    db: Path = _DB,
    as_json: bool = _JSON,
    run: str | None = typer.Option(
        None, "--run", help="Only the lines of this twin run (its devices' logs and failed boots; "
        "runs are named after their scenario). Default: every line in the store.",
    ),
) -> None:
    """Find stored lines by text or template, optionally in a time range.

    Example:  cloudtwin logs search "exception" --since 2008-11-09T21:00:00
    """
    from cloudtwin.store.database import Store
    from cloudtwin.store.ops_usecases import parse_time, search_logs

    if text is None and template is None:
        raise LogFormatError("search needs a TEXT argument or --template ID")
    t0, t1 = parse_time(since, "since"), parse_time(until, "until")
    with Store(db, read_only=True) as store:
        found = search_logs(store, text, template, t0, t1, limit, run)
    columns = ["source", "line", "ts", "level", "component", "template_id", "content"]
    if as_json:
        _print_rows(_table(found, columns), as_json)
    else:
        _print_lines(found)


@app.command()
def compact(db: Path = _DB, as_json: bool = _JSON) -> None:
    """Fold the Parquet segments of pool ingests into the store's table and delete them.

    Queries read segments and table alike; compacting makes the store one file again
    (to copy or back it up) and speeds up queries over many segments. One transaction:
    killed midway, the store stays as it was.

    Example:  cloudtwin logs compact --db ops.duckdb
    """
    from cloudtwin.store.database import Store, check_store_file
    from cloudtwin.store.ops_ingest import INGEST_MEMORY_LIMIT
    from cloudtwin.store.ops_usecases import compact_logs

    check_store_file(db)
    if not db.exists():
        raise StoreError(f"db: {db}: no store there (ingest something first)")
    with Store(db, memory_limit=INGEST_MEMORY_LIMIT) as store:
        done = compact_logs(store)
    if as_json:
        _print_json(asdict(done))
        return
    _stdout().print(
        f"{db}: {done.segments} segments ({done.lines} lines) folded into ops_lines"
        + (f"; {done.removed_orphans} unregistered files removed" if done.removed_orphans else "")
    )


@app.command()
def sql(
    query: str = typer.Argument(..., help="One read-only SELECT statement."),
    db: Path = _DB,
    max_rows: int = typer.Option(
        DEFAULT_MAX_ROWS, "--max-rows", min=1, help="Refuse a result with more rows."
    ),
    timeout: float = typer.Option(
        DEFAULT_TIMEOUT_S, "--timeout", min=0.001, help="Stop the query after this many seconds."
    ),
    as_json: bool = _JSON,
) -> None:
    """Run a read-only SQL query on the store (tables ops_lines, ops_templates, ...).

    Example:  cloudtwin logs sql "SELECT level, count(*) FROM ops_lines GROUP BY level"
    """
    from cloudtwin.store.database import Store
    from cloudtwin.store.ops_usecases import QueryLimits, run_sql

    limits = QueryLimits(max_rows=max_rows, timeout_s=timeout)
    with Store(db, read_only=True) as store, _flag_hints():
        result = run_sql(store, query, limits)
    _print_rows((result.columns, result.rows), as_json)


@app.command()
def counts(
    window: str = typer.Option("1h", "--window", help="Window length: 25ms, 30s, 5m, 1h, 1d."),
    by: str = typer.Option("template", "--by", help="Count per 'template' or 'component'."),
    since: str | None = _SINCE,
    until: str | None = _UNTIL,
    db: Path = _DB,
    max_cells: int = _MAX_CELLS,
    as_json: bool = _JSON,
) -> None:
    """Line counts per time window and per template or component.

    Example:  cloudtwin logs counts --window 1h --by component
    """
    from cloudtwin.store.database import Store
    from cloudtwin.store.ops_usecases import (
        QueryLimits,
        count_logs,
        parse_count_key,
        parse_time,
        parse_window,
    )

    key = parse_count_key(by)
    length, t0, t1 = parse_window(window), parse_time(since, "since"), parse_time(until, "until")
    with Store(db, read_only=True) as store, _flag_hints():
        found = count_logs(store, length, key, t0, t1, QueryLimits(max_cells=max_cells))
    rows = [(c.window_start, c.key, c.lines) for c in found]
    _print_rows((["window_start", key, "lines"], rows), as_json)


@app.command()
def anomalies(
    window: str = typer.Option("1h", "--window", help="Window length: 25ms, 30s, 5m, 1h, 1d."),
    by: str = typer.Option("template", "--by", help="Detect per 'template' or 'component'."),
    threshold: float = typer.Option(
        6.0, "--threshold", min=0.0, help="Flag bursts/silence from this surprise (-log10 p)."
    ),
    history: int = typer.Option(
        24, "--history", min=1, help="Windows a count is compared with."
    ),
    pca: bool = typer.Option(False, "--pca", help="Also run the PCA detector over windows."),
    since: str | None = _SINCE,
    until: str | None = _UNTIL,
    db: Path = _DB,
    max_cells: int = _MAX_CELLS,
    as_json: bool = _JSON,
) -> None:
    """Flag bursts, new templates and templates that fall silent, with a score.

    The score is -log10 of the Poisson probability of the count given the mean of the
    previous windows; --pca adds windows whose template mix is unusual.

    Example:  cloudtwin logs anomalies --window 1h --pca
    """
    from cloudtwin.ops.anomaly import DetectorConfig
    from cloudtwin.ops.pca import PcaConfig
    from cloudtwin.store.database import Store
    from cloudtwin.store.ops_usecases import (
        QueryLimits,
        detect_log_anomalies,
        parse_count_key,
        parse_time,
        parse_window,
    )

    key = parse_count_key(by)
    length, t0, t1 = parse_window(window), parse_time(since, "since"), parse_time(until, "until")
    config = DetectorConfig(history=history, threshold=threshold)
    with Store(db, read_only=True) as store, _flag_hints():
        found = detect_log_anomalies(
            store, length, key, t0, t1, config, PcaConfig() if pca else None,
            QueryLimits(max_cells=max_cells),
        )
    _print_anomalies(found, key, as_json)


#: The widest a search table shows a source name or a component (their ends are kept).
_NAME_WIDTH = 24
#: Below this many columns, found lines are listed as a heading and the message under it.
_TABLE_COLUMNS = 120


def _print_lines(found: Sequence[Any]) -> None:
    """Found lines, readable at 80 columns: one source goes in the title, long names keep
    their ends, and the message takes the width left (a table on wide terminals; on
    narrow ones each line's fields, then its message indented under them)."""
    console = _stdout()
    sources = sorted({line.source for line in found})
    title = f"{len(found)} lines" + (f" of {sources[0]}" if len(sources) == 1 else "")
    rows = [
        ([_tail(line.source)] if len(sources) > 1 else [])
        + [str(line.line), _when(line.ts), line.level or "", _tail(line.component or ""),
           f"#{line.template_id}"]
        for line in found
    ]
    if console.width < _TABLE_COLUMNS:
        console.print(title, no_wrap=True, overflow="ellipsis", markup=False)
        for row, line in zip(rows, found, strict=True):
            console.print("  ".join(cell for cell in row if cell), no_wrap=True, overflow="ellipsis",
                          markup=False, highlight=False)
            console.print(Padding(Text(line.content, overflow="fold"), (0, 0, 0, 4)), soft_wrap=False)
        return
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    for name in (["source"] if len(sources) > 1 else []) + ["line", "ts", "level", "component"]:
        table.add_column(name, no_wrap=True, justify="right" if name == "line" else "left")
    table.add_column("template", no_wrap=True, justify="right")
    table.add_column("content", ratio=1, overflow="fold")
    for row, line in zip(rows, found, strict=True):
        table.add_row(*row, line.content)
    console.print(table)


def _when(ts: datetime | None) -> str:
    """A line's time, to the millisecond when it has a fraction of a second."""
    if ts is None:
        return ""
    return ts.isoformat(sep=" ", timespec="milliseconds" if ts.microsecond else "seconds")


def _tail(text: str, width: int = _NAME_WIDTH) -> str:
    """``text``, or its last ``width - 1`` characters after an ellipsis."""
    return text if len(text) <= width else "…" + text[-(width - 1):]


def _table(items: Sequence[Any], columns: list[str]) -> tuple[list[str], list[tuple[Any, ...]]]:
    return columns, [tuple(getattr(item, c) for c in columns) for item in items]


def _print_anomalies(found: Sequence[AnomalyRow], key: str, as_json: bool) -> None:
    columns = ["kind", "window_start", key, "lines", "expected", "score"]
    if key == "template":
        columns.append("text")
    rows = []
    for a in found:
        row: tuple[Any, ...] = (a.kind, a.window_start, a.key, a.lines, a.expected, a.score)
        rows.append((*row, a.text) if key == "template" else row)
    _print_rows((columns, rows), as_json, None if as_json else f"{len(rows)} anomalies")
