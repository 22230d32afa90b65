"""The operations tables of the store: log lines, templates, parameters, unparsed lines, sources."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cloudtwin.errors import StoreError
from cloudtwin.ops.columnar import MinedChunk, line_parameters
from cloudtwin.ops.miner import MinerConfig, Similarity, TemplateMiner
from cloudtwin.ops.parser import LogParser, ParsedBatch
from cloudtwin.store.database import Store
from cloudtwin.store.ops_segments import (
    SEGMENT_DDL,
    SegmentWrite,
    record_identities,
    segment_write,
    store_segment,
    stored,
)

__all__ = [
    "OPS_SCHEMA_VERSION",
    "TIME_FORMATS",
    "SourceState",
    "ensure_ops_schema",
    "load_miner",
    "source_state",
    "set_fingerprint",
    "COMMIT_LINES",
    "ChunkWrite",
    "CommitGroup",
    "prepare_chunk",
    "lines_select",
    "stored_lines",
    "write_batch",
]

OPS_SCHEMA_VERSION = 1

#: strptime formats tried, in order, on a line's time text; ISO 8601 is tried last.
#: A format without a year (syslog, OpenSSH) gives year 1900 unless a year is given.
TIME_FORMATS = [
    "%y%m%d %H%M%S",
    "%Y-%m-%d %H:%M:%S,%g",
    "%y/%m/%d %H:%M:%S",
    "%Y.%m.%d %Y-%m-%d-%H.%M.%S.%f",
    "%b %d %H:%M:%S",
    "%a %b %d %H:%M:%S %Y",
    "%d/%b/%Y:%H:%M:%S %z",
]
_TIME_FORMATS_SQL = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in TIME_FORMATS) + "]"

_DDL = [
    """CREATE TABLE ops_sources (
        source_id INTEGER PRIMARY KEY, source VARCHAR NOT NULL UNIQUE, format VARCHAR,
        fingerprint VARCHAR, fingerprint_bytes BIGINT,
        next_offset BIGINT NOT NULL, next_line BIGINT NOT NULL,
        lines BIGINT NOT NULL, unparsed BIGINT NOT NULL, updated_at TIMESTAMP)""",
    """CREATE TABLE ops_templates (
        template_id INTEGER PRIMARY KEY, template VARCHAR NOT NULL, size BIGINT NOT NULL,
        route VARCHAR NOT NULL)""",
    """CREATE TABLE ops_lines (
        source_id INTEGER NOT NULL, byte_offset BIGINT NOT NULL, line BIGINT NOT NULL,
        ts TIMESTAMP, level VARCHAR, component VARCHAR, template_id INTEGER NOT NULL,
        content VARCHAR NOT NULL, params VARCHAR[])""",
    """CREATE TABLE ops_unparsed (
        source_id INTEGER NOT NULL, byte_offset BIGINT NOT NULL, line BIGINT NOT NULL,
        text VARCHAR NOT NULL, reason VARCHAR NOT NULL)""",
    "CREATE TABLE ops_miner (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)",
]
#: Added to version-1 stores in place (new tables and columns only).
_ADDITIONS = [
    *SEGMENT_DDL,
    "CREATE TABLE IF NOT EXISTS ops_miner_cache "
    "(masked VARCHAR PRIMARY KEY, template_id INTEGER NOT NULL)",
    "ALTER TABLE ops_sources ADD COLUMN IF NOT EXISTS stream_base BIGINT DEFAULT 0",
    "ALTER TABLE {lines} ADD COLUMN IF NOT EXISTS params VARCHAR[]",
]
#: A line's parameters live with the line (a list, appended in the same columnar batch);
#: this view gives them one row each, as stores before it kept them.
_PARAMS_VIEW = """CREATE VIEW ops_params AS
    SELECT source_id, byte_offset, CAST(position - 1 AS SMALLINT) AS position, value
    FROM (SELECT source_id, byte_offset, unnest(params) AS value,
                 unnest(generate_series(1, len(params))) AS position
          FROM ops_lines WHERE len(params) > 0)"""
#: Stores that kept parameters as rows of their own get them moved into the lines.
_PARAMS_INTO_LINES = [
    """UPDATE {lines} AS l SET params = p.params FROM (
        SELECT source_id, byte_offset, list(value ORDER BY position) AS params
        FROM ops_params GROUP BY source_id, byte_offset) p
       WHERE l.source_id = p.source_id AND l.byte_offset = p.byte_offset""",
    "DROP TABLE ops_params",
]


@dataclass(frozen=True)
class SourceState:
    """Where the ingest of one source stands: the next byte offset and line number.

    A stream source (stdin) may be fed several different streams; ``stream_base`` is
    the offset at which the current one began, and the fingerprint is of its head.
    """

    source_id: int
    source: str
    fingerprint: str | None
    fingerprint_bytes: int
    next_offset: int
    next_line: int
    lines: int
    unparsed: int
    stream_base: int = 0


def ensure_ops_schema(store: Store) -> None:
    """Create the operations tables if they are missing."""
    store.ensure_schema("ops", OPS_SCHEMA_VERSION, _DDL)
    if store.read_only:
        return
    with store.transaction() as con:
        lines = stored_lines(con)
        for statement in _ADDITIONS:
            con.execute(statement.replace("{lines}", lines))
        kind = con.execute(
            "SELECT table_type FROM information_schema.tables WHERE table_name = 'ops_params'"
        ).fetchone()
        if kind is not None and kind[0] == "BASE TABLE":
            for statement in _PARAMS_INTO_LINES:
                con.execute(statement.replace("{lines}", lines))
            kind = None
        if kind is None:
            con.execute(_PARAMS_VIEW)
    record_identities(store)


def load_miner(store: Store, config: MinerConfig) -> TemplateMiner:
    """A miner holding every stored template; tree settings fixed by the first ingest.

    The parse tree's depth, similarity (measure and threshold), fan-out and joining by
    constant words are kept in ``ops_miner`` so that later ingests extend the same
    template set; ``config`` only contributes its masks once the store has settings. A
    store from before the measure was kept was mined with Drain's and without joining
    by words, and goes on so.
    """
    con = store.connection
    rows = dict(con.execute("SELECT key, value FROM ops_miner").fetchall())
    if rows:
        config = MinerConfig(
            depth=int(rows["depth"]),
            sim_threshold=float(rows["sim_threshold"]),
            max_children=int(rows["max_children"]),
            masks=config.masks,
            similarity=_similarity(rows.get("similarity", "drain")),
            join_by_words=rows.get("join_by_words", "false") == "true",
        )
    else:
        with store.transaction() as tx:
            tx.executemany(
                "INSERT INTO ops_miner VALUES (?, ?)",
                [["depth", str(config.depth)], ["sim_threshold", repr(config.sim_threshold)],
                 ["max_children", str(config.max_children)],
                 ["similarity", config.similarity],
                 ["join_by_words", "true" if config.join_by_words else "false"],
                 ["first_masks", json.dumps(list(config.masks))]],
            )
    miner = TemplateMiner(config)
    for tid, template, size, route in con.execute(
        "SELECT template_id, template, size, route FROM ops_templates ORDER BY template_id"
    ).fetchall():
        miner.restore(tid, template, size, route)
    miner.restore_cache(con.execute("SELECT masked, template_id FROM ops_miner_cache").fetchall())
    return miner


def _similarity(text: str) -> Similarity:
    if text == "drain":
        return "drain"
    if text == "constants":
        return "constants"
    raise StoreError(f"ops_miner: unknown similarity {text!r}")


def source_state(
    store: Store, source: str, fmt: str, fingerprint: tuple[str, int] | None
) -> SourceState:
    """The progress of a source, registering it on first sight."""
    con = store.connection
    row = con.execute(
        "SELECT source_id, source, fingerprint, fingerprint_bytes, next_offset, next_line, "
        "lines, unparsed, coalesce(stream_base, 0) FROM ops_sources WHERE source = ?",
        [source],
    ).fetchone()
    if row is None:
        fp, nbytes = fingerprint if fingerprint else (None, 0)
        with store.transaction() as tx:
            next_id = tx.execute("SELECT coalesce(max(source_id), 0) + 1 FROM ops_sources")
            source_id = int(next_id.fetchone()[0])  # type: ignore[index]
            tx.execute(
                "INSERT INTO ops_sources VALUES (?, ?, ?, ?, ?, 0, 1, 0, 0, now()::TIMESTAMP, 0)",
                [source_id, source, fmt, fp, nbytes],
            )
        return SourceState(source_id, source, fp, nbytes, 0, 1, 0, 0)
    return SourceState(*row)


def write_batch(
    con: duckdb.DuckDBPyConnection,
    state: SourceState,
    parser: LogParser,
    parsed: ParsedBatch,
    year: int | None,
) -> SourceState:
    """Store one parsed batch and move the source's progress marker past it.

    Call inside :meth:`Store.transaction` so that lines, templates and the marker are
    committed together: a killed ingest then resumes exactly after the last batch.
    """
    sid = state.source_id
    if parsed.numbers:
        contents = pa.array(parsed.contents, pa.string())
        _append_lines(con, sid, pa.table({
            "byte_offset": pa.array(parsed.offsets, pa.int64()),
            "line": pa.array(parsed.numbers, pa.int64()),
            "ts_text": pa.array(parsed.time_texts, pa.string()),
            "level": pa.array(parsed.levels, pa.string()),
            "component": pa.array(parsed.components, pa.string()),
            "template_id": pa.array(parsed.template_ids.astype(np.int32)),
            "content": contents,
            "params": line_parameters(parsed.template_ids, contents, parser.miner),
        }), year)
    if parsed.bad_numbers:
        _append_unparsed(con, sid, pa.table({
            "byte_offset": pa.array(parsed.bad_offsets, pa.int64()),
            "line": pa.array(parsed.bad_numbers, pa.int64()),
            "text": pa.array(parsed.bad_texts, pa.string()),
            "reason": pa.array(parsed.bad_reasons, pa.string()),
        }))
    templates = _templates_table(parser.miner)
    if templates is not None:
        _upsert(con, "ops_templates", templates)
    _save_cache(con, parser.miner)
    lines = state.lines + len(parsed.numbers)
    unparsed = state.unparsed + len(parsed.bad_numbers)
    next_line = max(parsed.numbers[-1:] + parsed.bad_numbers[-1:], default=state.next_line - 1) + 1
    con.execute(
        "UPDATE ops_sources SET next_offset = ?, next_line = ?, lines = ?, unparsed = ?, "
        "updated_at = now()::TIMESTAMP WHERE source_id = ?",
        [parsed.end_offset, next_line, lines, unparsed, sid],
    )
    return replace(
        state, next_offset=parsed.end_offset, next_line=next_line, lines=lines,
        unparsed=unparsed,
    )


#: Lines one ingest transaction gathers (whole chunks) before it commits: four DuckDB row
#: groups. DuckDB writes the full row groups of a transaction compressed straight into
#: the file; a transaction of one chunk goes through its write-ahead log and is written
#: again at the next checkpoint, and the part row group each commit leaves is rewritten
#: at a checkpoint. On HDFS lines (writer thread and final checkpoint, CPU per line):
#: 2.9 us committing every chunk, 3.3 to 3.6 every row group, 2.9 every two, 2.0 every
#: four; peak RSS grows with it (302, 330, 355, 393 MiB at 1M lines).
COMMIT_LINES = 4 * 122_880

#: A template as stored: id, template text, size, route.
TemplateRow = tuple[int, str, int, str]


@dataclass(frozen=True)
class ChunkWrite:
    """Everything one chunk adds to the store, taken out of the miner: plain values.

    Built in chunk order by :func:`prepare_chunk` (which reads the miner) and stored by
    a :class:`CommitGroup` (which only runs SQL), so a writer thread can store one chunk
    while the next is merged.
    """

    state: SourceState
    lines: pa.Table
    unparsed: pa.Table
    templates: list[TemplateRow]
    cache_cleared: bool
    cache: list[tuple[str, int]]
    covered: int
    segment: SegmentWrite | None = None


def prepare_chunk(
    state: SourceState,
    miner: TemplateMiner,
    mined: MinedChunk,
    mapping: npt.NDArray[np.int32],
    segment_id: int | None = None,
) -> ChunkWrite:
    """What a mined chunk adds, its ids mapped to ``miner``'s (after :func:`merge_chunk`).

    A chunk whose lines came as a segment (:class:`~cloudtwin.store.ops_segments.SegmentMiner`)
    is stored as segment ``segment_id``, its ids mapped where the segment is read.
    """
    lines = mined.lines
    if lines.num_rows:
        ids = mapping[lines.column("template_id").to_numpy()]
        lines = lines.set_column(
            lines.schema.get_field_index("template_id"), "template_id", pa.array(ids)
        )
    segment = None
    if mined.segment:
        if segment_id is None:
            raise StoreError(f"chunk {mined.index} came as a segment, but no segment id was given")
        segment = segment_write(mined, state.source_id, segment_id, state.next_offset, mapping)
    cleared, fresh = miner.take_cache_changes()
    after = replace(
        state, next_offset=mined.end_offset, next_line=mined.next_line,
        lines=state.lines + lines.num_rows + mined.segment_lines,
        unparsed=state.unparsed + mined.unparsed.num_rows,
    )
    templates = [(c.template_id, c.template, c.size, c.route) for c in miner.take_changed()]
    return ChunkWrite(
        after, lines, mined.unparsed, templates, cleared, fresh,
        mined.end_offset - state.next_offset, segment,
    )


class CommitGroup:
    """Chunks stored in one transaction: lines appended as each chunk comes, the templates
    and cache entries they change upserted once, with the source's marker, at the end.

    Use inside :meth:`Store.transaction` (:meth:`add` each chunk, then :meth:`finish`):
    lines, templates, cache and marker are committed together, so a killed ingest
    resumes exactly after the last group.
    """

    def __init__(self, year: int | None, segments: Path | None = None) -> None:
        self.year = year
        self.segments = segments
        self.lines = 0
        self.covered = 0
        self.state: SourceState | None = None
        self._templates: dict[int, TemplateRow] = {}
        self._cache_cleared = False
        self._cache: dict[str, int] = {}

    def add(self, con: duckdb.DuckDBPyConnection, write: ChunkWrite) -> None:
        """Append a chunk's lines and unparsed lines; keep what else it changes for the end."""
        sid = write.state.source_id
        if write.lines.num_rows:
            _append_lines(con, sid, write.lines, self.year)
        if write.unparsed.num_rows:
            _append_unparsed(con, sid, write.unparsed)
        if write.segment is not None:
            if self.segments is None:
                raise StoreError("a segment came to a store without a segment folder")
            store_segment(con, self.segments, write.segment)
        self._templates.update((row[0], row) for row in write.templates)
        if write.cache_cleared:
            self._cache_cleared = True
            self._cache.clear()
        self._cache.update(write.cache)
        self.lines += write.lines.num_rows + write.unparsed.num_rows
        self.lines += 0 if write.segment is None else write.segment.lines
        self.covered += write.covered
        self.state = write.state

    def finish(self, con: duckdb.DuckDBPyConnection) -> None:
        """Upsert the group's templates and cache entries and move the marker past it."""
        if self._templates:
            _upsert(con, "ops_templates", _template_rows(list(self._templates.values())))
        if self._cache_cleared:
            con.execute("DELETE FROM ops_miner_cache")
        table = _cache_table(list(self._cache.items()))
        if table is not None:
            _upsert(con, "ops_miner_cache", table)
        if self.state is not None:
            _move_marker(con, self.state)


def _move_marker(con: duckdb.DuckDBPyConnection, state: SourceState) -> None:
    con.execute(
        "UPDATE ops_sources SET next_offset = ?, next_line = ?, lines = ?, unparsed = ?, "
        "updated_at = now()::TIMESTAMP WHERE source_id = ?",
        [state.next_offset, state.next_line, state.lines, state.unparsed, state.source_id],
    )


def _templates_table(miner: TemplateMiner) -> pa.Table | None:
    changed = miner.take_changed()
    if not changed:
        return None
    return _template_rows([(c.template_id, c.template, c.size, c.route) for c in changed])


def _template_rows(rows: list[TemplateRow]) -> pa.Table:
    ids, templates, sizes, routes = zip(*rows, strict=True)
    return pa.table({
        "template_id": pa.array(ids, pa.int32()),
        "template": pa.array(templates, pa.string()),
        "size": pa.array(sizes, pa.int64()),
        "route": pa.array(routes, pa.string()),
    })


def _cache_table(fresh: list[tuple[str, int]]) -> pa.Table | None:
    if not fresh:
        return None
    return pa.table({
        "masked": pa.array([m for m, _ in fresh], pa.string()),
        "template_id": pa.array([t for _, t in fresh], pa.int32()),
    })


def _upsert(con: duckdb.DuckDBPyConnection, table: str, rows: pa.Table) -> None:
    con.register("_ops_rows", rows)
    try:
        con.execute(f"INSERT OR REPLACE INTO {table} SELECT * FROM _ops_rows")
    finally:
        con.unregister("_ops_rows")


def lines_select(sid: int, year: int | None, columns: str | None = None) -> str:
    """The SELECT that gives a mined chunk's lines (``_ops_chunk``) as ``ops_lines`` holds
    them: the source's id, timestamps parsed (``year`` for those without one). With
    ``columns``, only those (``ts`` among them) instead of the whole row."""
    year_sql = "NULL" if year is None else str(int(year))
    columns = columns or (f"{int(sid)}::INTEGER AS source_id, byte_offset, line, ts, level, "
                          "component, template_id, content, params")
    return f"""SELECT {columns}
        FROM (SELECT CASE WHEN year(t) = 1900 AND {year_sql}::INTEGER IS NOT NULL
                     THEN t + to_years({year_sql}::INTEGER - 1900) ELSE t END::TIMESTAMP AS ts, *
              FROM (SELECT *, coalesce(try_strptime(ts_text, {_TIME_FORMATS_SQL}),
                                       try_cast(ts_text AS TIMESTAMP)) AS t
                    FROM _ops_chunk))"""


def stored_lines(con: duckdb.DuckDBPyConnection) -> str:
    """The stored ``ops_lines`` table by its full name: a connection's ``ops_lines`` may be
    the temporary view over it and the segments (:mod:`cloudtwin.store.ops_segments`)."""
    return stored(con, "ops_lines")


def _append_lines(
    con: duckdb.DuckDBPyConnection, sid: int, table: pa.Table, year: int | None
) -> None:
    _insert_arrow(con, table, stored_lines(con), lines_select(sid, year))


def _append_unparsed(con: duckdb.DuckDBPyConnection, sid: int, table: pa.Table) -> None:
    _insert_arrow(
        con, table, "ops_unparsed",
        f"SELECT {int(sid)}, byte_offset, line, text, reason FROM _ops_chunk",
    )


def _insert_arrow(
    con: duckdb.DuckDBPyConnection, table: pa.Table, target: str, select: str
) -> None:
    """Insert ``select`` over ``table`` (named ``_ops_chunk`` in it) into ``target``.

    As a relation, not a registered view: DuckDB keeps a registered table alive until
    the transaction ends, so a commit of many chunks would hold all their batches.
    """
    relation = con.from_arrow(table).query("_ops_chunk", select)
    assert relation is not None  # a SELECT always gives a relation
    relation.insert_into(target)


def set_fingerprint(
    store: Store, state: SourceState, fingerprint: tuple[str, int], stream_base: int
) -> SourceState:
    """Record the head of a source's current stream, which starts at ``stream_base``.

    A new stream under a source name starts at the source's next offset, after
    everything stored from the streams before it.
    """
    digest, nbytes = fingerprint
    with store.transaction() as con:
        con.execute(
            "UPDATE ops_sources SET fingerprint = ?, fingerprint_bytes = ?, stream_base = ? "
            "WHERE source_id = ?",
            [digest, nbytes, stream_base, state.source_id],
        )
    return replace(state, fingerprint=digest, fingerprint_bytes=nbytes, stream_base=stream_base)


def _save_cache(con: duckdb.DuckDBPyConnection, miner: TemplateMiner) -> None:
    """Keep the miner's exact-message cache in step with the stored templates."""
    cleared, fresh = miner.take_cache_changes()
    if cleared:
        con.execute("DELETE FROM ops_miner_cache")
    table = _cache_table(fresh)
    if table is not None:
        _upsert(con, "ops_miner_cache", table)
