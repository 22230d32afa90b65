"""The `cloudtwin logs` commands: ingest, parse, templates, search, sql, counts, anomalies."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn
from rich.table import Table

from cloudtwin.errors import LogFormatError
from cloudtwin.ops.anomaly import Anomaly, DetectorConfig
from cloudtwin.ops.masking import Masker
from cloudtwin.ops.miner import MinerConfig, TemplateMiner
from cloudtwin.ops.parser import LogParser
from cloudtwin.ops.pca import PcaConfig
from cloudtwin.ops.presets import Preset, resolve_format
from cloudtwin.ops.reader import open_log, read_batches
from cloudtwin.store.database import DEFAULT_DB, QueryResult, Store
from cloudtwin.store.ops_ingest import IngestSummary, ingest_file, ingest_stream
from cloudtwin.store.ops_query import (
    CountKey,
    find_anomalies,
    list_templates,
    search_lines,
    window_counts,
)

app = typer.Typer(
    name="logs",
    help=(
        "Operations logs: ingest into the store, mine templates, query, detect changes.\n\n"
        "Example:  cloudtwin logs ingest HDFS_2k.log --format hdfs"
    ),
    no_args_is_help=True,
    add_completion=False,
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
_WINDOW_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _stdout() -> Console:
    return Console(soft_wrap=True)


def _to_json(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, default=_to_json, ensure_ascii=False) + "\n")


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


def parse_time(text: str | None, option: str) -> datetime | None:
    """An ISO 8601 time given on the command line (``--since``/``--until``)."""
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError as err:
        raise LogFormatError(
            f"{option} {text!r}: not an ISO 8601 time (e.g. 2008-11-09T20:36:00)"
        ) from err


def parse_window(text: str) -> timedelta:
    """A window length such as ``25ms``, ``30s``, ``5m``, ``1h`` or ``1d``."""
    match = re.fullmatch(r"\s*(\d+)\s*(ms|[smhd])\s*", text)
    if match is None or int(match.group(1)) == 0:
        raise LogFormatError(
            f"--window {text!r}: expected a positive length like 25ms, 30s, 5m, 1h, 1d"
        )
    return timedelta(seconds=int(match.group(1)) * _WINDOW_UNITS[match.group(2)])


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
    as_json: bool = _JSON,
) -> None:
    """Ingest log files into the store, mining templates; re-running adds nothing new.

    Example:  cloudtwin logs ingest HDFS_2k.log --format hdfs --db ops.duckdb
    """
    preset = _with_masks(resolve_format(log_format), masks)
    summaries: list[IngestSummary] = []
    with Store(db) as store:
        for path in paths:
            summaries.append(_ingest_one(store, path, preset, source, year))
    if as_json:
        _print_json([s.__dict__ for s in summaries])
        return
    table = Table(title=f"ingested into {db}")
    for column in ("source", "lines", "unparsed", "new templates", "templates"):
        table.add_column(column, overflow="fold")
    for s in summaries:
        table.add_row(s.source, str(s.lines), str(s.unparsed), str(s.new_templates),
                      str(s.templates))
    _stdout().print(table)


def _with_masks(preset: Preset, masks: list[str] | None) -> Preset:
    if not masks:
        return preset
    Masker(masks)  # a bad pattern fails here, naming the mask
    return replace(preset, masks=tuple(masks))


def _ingest_one(
    store: Store, path: str, preset: Preset, source: str, year: int | None
) -> IngestSummary:
    with _progress(Path(path).name, _file_size(path)) as hook:
        if path == "-":
            return ingest_stream(store, sys.stdin.buffer, source, preset, year=year,
                                 progress=hook)
        return ingest_file(store, path, preset, year=year, progress=hook)


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
    preset = _with_masks(resolve_format(log_format), masks)
    miner = TemplateMiner(
        MinerConfig(depth=preset.depth, sim_threshold=preset.sim_threshold, masks=preset.masks)
    )
    parser = LogParser(preset.format, miner)
    stream = sys.stdin.buffer if path == "-" else open_log(path)
    unparsed = 0
    with stream:
        for batch in read_batches(stream, path):
            parsed = parser.parse_batch(batch)
            unparsed += len(parsed.bad_numbers)
            if jsonl:
                _write_jsonl(parser, parsed)
    if not jsonl:
        rows = [(c.template_id, c.size, c.template) for c in miner.clusters]
        rows.sort(key=lambda r: (-r[1], r[0]))
        title = f"{len(rows)} templates, {unparsed} unparsed lines"
        _print_rows((["template_id", "lines", "template"], rows), False, title)


def _write_jsonl(parser: LogParser, parsed: Any) -> None:
    out: list[tuple[int, str]] = []
    for n, tid, content in zip(
        parsed.numbers, parsed.template_ids.tolist(), parsed.contents, strict=True
    ):
        template = parser.miner.cluster(tid).template
        obj = {"line": n, "template_id": tid, "template": template,
               "params": parser.parameters(tid, content)}
        out.append((n, json.dumps(obj, ensure_ascii=False)))
    for n, reason in zip(parsed.bad_numbers, parsed.bad_reasons, strict=True):
        obj = {"line": n, "template_id": None, "template": None, "params": [], "error": reason}
        out.append((n, json.dumps(obj, ensure_ascii=False)))
    out.sort(key=lambda item: item[0])
    sys.stdout.write("".join(text + "\n" for _, text in out))


@app.command()
def templates(
    db: Path = _DB,
    limit: int | None = typer.Option(None, "--limit", help="Show at most this many."),
    as_json: bool = _JSON,
) -> None:
    """List the mined templates, most frequent first.

    Example:  cloudtwin logs templates --db ops.duckdb --limit 10
    """
    with Store(db, read_only=True) as store:
        _print_rows(list_templates(store, limit), as_json)


@app.command()
def search(
    text: str | None = typer.Argument(None, help="Text the message must contain (any case)."),
    template: int | None = typer.Option(None, "--template", help="Only lines of this template."),
    since: str | None = _SINCE,
    until: str | None = _UNTIL,
    limit: int = typer.Option(100, "--limit", min=1, help="Show at most this many lines."),
    db: Path = _DB,
    as_json: bool = _JSON,
) -> None:
    """Find stored lines by text or template, optionally in a time range.

    Example:  cloudtwin logs search "exception" --since 2008-11-09T21:00:00
    """
    if text is None and template is None:
        raise LogFormatError("search needs a TEXT argument or --template ID")
    t0, t1 = parse_time(since, "--since"), parse_time(until, "--until")
    with Store(db, read_only=True) as store:
        _print_rows(search_lines(store, text, template, t0, t1, limit), as_json)


@app.command()
def sql(
    query: str = typer.Argument(..., help="One read-only SELECT statement."),
    db: Path = _DB,
    as_json: bool = _JSON,
) -> None:
    """Run a read-only SQL query on the store (tables ops_lines, ops_templates, ...).

    Example:  cloudtwin logs sql "SELECT level, count(*) FROM ops_lines GROUP BY level"
    """
    with Store(db, read_only=True) as store:
        _print_rows(store.select(query), as_json)


@app.command()
def counts(
    window: str = typer.Option("1h", "--window", help="Window length: 25ms, 30s, 5m, 1h, 1d."),
    by: str = typer.Option("template", "--by", help="Count per 'template' or 'component'."),
    since: str | None = _SINCE,
    until: str | None = _UNTIL,
    db: Path = _DB,
    as_json: bool = _JSON,
) -> None:
    """Line counts per time window and per template or component.

    Example:  cloudtwin logs counts --window 1h --by component
    """
    key = _count_key(by)
    with Store(db, read_only=True) as store:
        data = window_counts(store, parse_window(window), key, parse_time(since, "--since"),
                             parse_time(until, "--until"))
    rows = [
        (w, k, int(data.counts[i, j]))
        for i, w in enumerate(data.windows)
        for j, k in enumerate(data.keys)
        if data.counts[i, j] > 0
    ]
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
    as_json: bool = _JSON,
) -> None:
    """Flag bursts, new templates and templates that fall silent, with a score.

    The score is -log10 of the Poisson probability of the count given the mean of the
    previous windows; --pca adds windows whose template mix is unusual.

    Example:  cloudtwin logs anomalies --window 1h --pca
    """
    key = _count_key(by)
    config = DetectorConfig(history=history, threshold=threshold)
    with Store(db, read_only=True) as store:
        found = find_anomalies(
            store, parse_window(window), key, parse_time(since, "--since"),
            parse_time(until, "--until"), config, PcaConfig() if pca else None,
        )
        names = _template_names(store) if key == "template" else {}
    _print_anomalies(found, key, names, as_json)


def _count_key(by: str) -> CountKey:
    if by == "template":
        return "template"
    if by == "component":
        return "component"
    raise LogFormatError(f"--by {by!r}: expected 'template' or 'component'")


def _template_names(store: Store) -> dict[str, str]:
    rows = store.query("SELECT template_id, template FROM ops_templates")[1]
    return {str(tid): text for tid, text in rows}


def _print_anomalies(
    found: Sequence[Anomaly], key: CountKey, names: dict[str, str], as_json: bool
) -> None:
    columns = ["kind", "window_start", key, "lines", "expected", "score"]
    if key == "template":
        columns.append("text")
    rows = []
    for a in found:
        row: tuple[Any, ...] = (a.kind, a.window_start, a.key, a.count, a.expected, a.score)
        rows.append((*row, names.get(a.key, "")) if key == "template" else row)
    _print_rows((columns, rows), as_json, None if as_json else f"{len(rows)} anomalies")
