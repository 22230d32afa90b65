"""The operations-log use cases that the CLI and the service share, with typed results.

Each function takes what a front end has parsed (streams it opened, an open store,
values) and returns dataclasses; none opens a file or reads the environment. Errors
name the field they are about (``window``, ``since``, ``max_rows``), not a flag.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from cloudtwin.errors import LogFormatError
from cloudtwin.ops.anomaly import DetectorConfig
from cloudtwin.ops.executors import ChunkExecutor
from cloudtwin.ops.masking import Masker
from cloudtwin.ops.miner import TemplateMiner
from cloudtwin.ops.parser import LogParser, ParsedBatch
from cloudtwin.ops.pca import PcaConfig
from cloudtwin.ops.presets import Preset, resolve_format
from cloudtwin.ops.reader import LogStream, read_batches
from cloudtwin.store.database import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, Store
from cloudtwin.store.ops_ingest import IngestSummary, NewStream, ingest_stream
from cloudtwin.store.ops_query import (
    DEFAULT_MAX_CELLS,
    CountKey,
    find_anomalies,
    list_templates,
    search_lines,
    window_counts,
)
from cloudtwin.store.ops_segments import CompactSummary, compact
from cloudtwin.store.ops_tables import ensure_ops_schema

__all__ = [
    "AnomalyRow",
    "LineResult",
    "LogInput",
    "LogLine",
    "ParseSummary",
    "QueryLimits",
    "SqlTable",
    "TemplateRow",
    "WindowCount",
    "compact_logs",
    "count_logs",
    "detect_log_anomalies",
    "ingest_logs",
    "log_preset",
    "parse_count_key",
    "parse_log",
    "parse_time",
    "parse_window",
    "run_sql",
    "search_logs",
    "templates",
]

_WINDOW_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class QueryLimits:
    """How much a query may return or take; each is lifted by the field of its name."""

    max_rows: int = DEFAULT_MAX_ROWS
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_cells: int = DEFAULT_MAX_CELLS

    def __post_init__(self) -> None:
        for name in ("max_rows", "timeout_s", "max_cells"):
            value = getattr(self, name)
            if not value > 0:
                raise LogFormatError(f"{name} must be positive, got {value}")


@dataclass(frozen=True)
class LogInput:
    """One stream to ingest: under which source name, and what a different head means."""

    log: LogStream
    source: str
    new_stream: NewStream = "refuse"


@dataclass(frozen=True)
class TemplateRow:
    """A mined template and how many lines it holds."""

    template_id: int
    lines: int
    template: str


@dataclass(frozen=True)
class LineResult:
    """One parsed line: its template and parameters, or why it did not fit."""

    line: int
    template_id: int | None
    template: str | None
    params: list[str]
    error: str | None = None


@dataclass(frozen=True)
class ParseSummary:
    """What parsing a log without storing it found."""

    lines: int
    unparsed: int
    templates: list[TemplateRow]


@dataclass(frozen=True)
class LogLine:
    """A stored line found by a search."""

    source: str
    line: int
    ts: datetime | None
    level: str | None
    component: str | None
    template_id: int
    content: str


@dataclass(frozen=True)
class SqlTable:
    """The columns and rows of a user's query."""

    columns: list[str]
    rows: list[tuple[Any, ...]]


@dataclass(frozen=True)
class WindowCount:
    """Lines of one key (template id or component) in one window."""

    window_start: datetime
    key: str
    lines: int


@dataclass(frozen=True)
class AnomalyRow:
    """A flagged change, with its template's text when counting per template."""

    kind: str
    window_start: datetime
    key: str
    lines: int
    expected: float
    score: float
    text: str | None = None


def log_preset(log_format: str, masks: Iterable[str] | None = None) -> Preset:
    """A preset or format string, with its masks replaced by ``masks`` if any are given."""
    preset = resolve_format(log_format)
    masks = tuple(masks or ())
    if not masks:
        return preset
    for mask in masks:
        if not mask.strip():
            raise LogFormatError("mask: an empty pattern would mask everything")
    Masker(masks)  # a bad pattern fails here, naming the mask
    return replace(preset, masks=masks)


def parse_time(text: str | None, field: str) -> datetime | None:
    """An ISO 8601 time such as ``2008-11-09T20:36:00``; ``field`` names it in errors."""
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError as err:
        raise LogFormatError(
            f"{field} {text!r}: not an ISO 8601 time (e.g. 2008-11-09T20:36:00)"
        ) from err


def parse_window(text: str, field: str = "window") -> timedelta:
    """A window length such as ``25ms``, ``30s``, ``5m``, ``1h`` or ``1d``.

    >>> parse_window("25ms")
    datetime.timedelta(microseconds=25000)
    """
    match = re.fullmatch(r"\s*([0-9]{1,12})\s*(ms|[smhd])\s*", text)
    if match is None or int(match.group(1)) == 0:
        raise LogFormatError(
            f"{field} {text!r}: expected a positive length like 25ms, 30s, 5m, 1h, 1d"
        )
    try:
        return timedelta(seconds=int(match.group(1)) * _WINDOW_UNITS[match.group(2)])
    except OverflowError as err:
        raise LogFormatError(f"{field} {text!r}: longer than any time range") from err


def parse_count_key(text: str, field: str = "by") -> CountKey:
    """What to count per: ``template`` or ``component``."""
    if text == "template":
        return "template"
    if text == "component":
        return "component"
    raise LogFormatError(f"{field} {text!r}: expected 'template' or 'component'")


def ingest_logs(
    store: Store,
    inputs: Iterable[LogInput],
    preset: Preset,
    *,
    year: int | None = None,
    progress: Callable[[str], Callable[[int], None] | None] | None = None,
    executor: ChunkExecutor | None = None,
    segments: bool | None = None,
) -> list[IngestSummary]:
    """Ingest streams one after the other; ``progress(source)`` may give a byte hook.

    With an ``executor`` (a process pool or Ray, as ``cloudtwin sweep`` uses), each
    stream's chunks are mined by its workers; the store reads the same as without one.
    ``segments``: whether workers store lines as Parquet segments (by default, when an
    executor mines into a store file).
    """
    summaries = []
    for item in inputs:
        hook = progress(item.log.name) if progress is not None else None
        summaries.append(ingest_stream(
            store, item.log, preset, source=item.source, new_stream=item.new_stream,
            year=year, progress=hook, executor=executor, segments=segments,
        ))
    return summaries


def compact_logs(store: Store) -> CompactSummary:
    """Move the store's log segments into its table (see :func:`ops_segments.compact`)."""
    ensure_ops_schema(store)
    return compact(store)


def parse_log(
    log: LogStream, preset: Preset, on_lines: Callable[[list[LineResult]], None] | None = None
) -> ParseSummary:
    """Parse and mine a log without storing it.

    ``on_lines`` gets each batch's lines in order, with the template as known at the end
    of the batch; memory stays bounded by one batch however long the log is.
    """
    miner = TemplateMiner(preset.miner_config())
    parser = LogParser(preset.format, miner)
    lines = unparsed = 0
    for batch in read_batches(log.stream, log.name):
        parsed = parser.parse_batch(batch)
        lines += len(batch)
        unparsed += len(parsed.bad_numbers)
        if on_lines is not None:
            on_lines(_line_results(parser, parsed))
    rows = [TemplateRow(c.template_id, c.size, c.template) for c in miner.clusters]
    rows.sort(key=lambda r: (-r.lines, r.template_id))
    return ParseSummary(lines, unparsed, rows)


def _line_results(parser: LogParser, parsed: ParsedBatch) -> list[LineResult]:
    out = [
        LineResult(n, tid, parser.miner.cluster(tid).template, parser.parameters(tid, content))
        for n, tid, content in zip(
            parsed.numbers, parsed.template_ids.tolist(), parsed.contents, strict=True
        )
    ]
    out += [
        LineResult(n, None, None, [], reason)
        for n, reason in zip(parsed.bad_numbers, parsed.bad_reasons, strict=True)
    ]
    out.sort(key=lambda r: r.line)
    return out


def templates(store: Store, limit: int | None = None) -> list[TemplateRow]:
    """The mined templates, most frequent first; at most ``limit`` (at least 1) of them."""
    return [TemplateRow(*row) for row in list_templates(store, limit)[1]]


def search_logs(
    store: Store,
    text: str | None = None,
    template_id: int | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 100,
    run: str | None = None,
) -> list[LogLine]:
    """Stored lines containing ``text`` (any case) or of a template, in a time range, of
    one twin run (`run`) or of every source."""
    if text is None and template_id is None:
        raise LogFormatError("search needs a text or a template id")
    rows = search_lines(store, text, template_id, since, until, limit, run)[1]
    return [LogLine(*row) for row in rows]


def run_sql(store: Store, query: str, limits: QueryLimits | None = None) -> SqlTable:
    """One read-only SELECT on the store, within the row and time limits."""
    limits = limits or QueryLimits()
    columns, rows = store.select(query, max_rows=limits.max_rows, timeout_s=limits.timeout_s)
    return SqlTable(columns, rows)


def count_logs(
    store: Store,
    window: timedelta,
    by: CountKey = "template",
    since: datetime | None = None,
    until: datetime | None = None,
    limits: QueryLimits | None = None,
) -> list[WindowCount]:
    """Line counts per window and key, only the non-zero ones, in time then key order."""
    limits = limits or QueryLimits()
    data = window_counts(store, window, by, since, until, limits.max_cells)
    return [
        WindowCount(w, k, int(data.counts[i, j]))
        for i, w in enumerate(data.windows)
        for j, k in enumerate(data.keys)
        if data.counts[i, j] > 0
    ]


def detect_log_anomalies(
    store: Store,
    window: timedelta,
    by: CountKey = "template",
    since: datetime | None = None,
    until: datetime | None = None,
    config: DetectorConfig | None = None,
    pca: PcaConfig | None = None,
    limits: QueryLimits | None = None,
) -> list[AnomalyRow]:
    """Bursts, new and silent templates or components (and PCA outlier windows)."""
    limits = limits or QueryLimits()
    found = find_anomalies(store, window, by, since, until, config, pca, limits.max_cells)
    names: dict[str, str] = {}
    if by == "template":
        rows = store.query("SELECT template_id, template FROM ops_templates")[1]
        names = {str(tid): text for tid, text in rows}
    return [
        AnomalyRow(a.kind, a.window_start, a.key, a.count, a.expected, a.score,
                   names.get(a.key, "") if by == "template" else None)
        for a in found
    ]
