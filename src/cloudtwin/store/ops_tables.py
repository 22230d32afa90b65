"""The operations tables of the store: log lines, templates, parameters, unparsed lines, sources."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import duckdb
import numpy as np
import pyarrow as pa

from cloudtwin.errors import StoreError
from cloudtwin.ops.miner import MinerConfig, Similarity, TemplateMiner
from cloudtwin.ops.parameters import extract_parameters_batch
from cloudtwin.ops.parser import LogParser, ParsedBatch
from cloudtwin.store.database import Store

__all__ = [
    "OPS_SCHEMA_VERSION",
    "TIME_FORMATS",
    "SourceState",
    "ensure_ops_schema",
    "load_miner",
    "source_state",
    "set_fingerprint",
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
        content VARCHAR NOT NULL)""",
    """CREATE TABLE ops_params (
        source_id INTEGER NOT NULL, byte_offset BIGINT NOT NULL, position SMALLINT NOT NULL,
        value VARCHAR NOT NULL)""",
    """CREATE TABLE ops_unparsed (
        source_id INTEGER NOT NULL, byte_offset BIGINT NOT NULL, line BIGINT NOT NULL,
        text VARCHAR NOT NULL, reason VARCHAR NOT NULL)""",
    "CREATE TABLE ops_miner (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)",
]
#: Added to version-1 stores in place (new tables and columns only).
_ADDITIONS = [
    "CREATE TABLE IF NOT EXISTS ops_miner_cache "
    "(masked VARCHAR PRIMARY KEY, template_id INTEGER NOT NULL)",
    "ALTER TABLE ops_sources ADD COLUMN IF NOT EXISTS stream_base BIGINT DEFAULT 0",
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
    if not store.read_only:
        with store.transaction() as con:
            for statement in _ADDITIONS:
                con.execute(statement)


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
        _insert_lines(con, sid, parsed, year)
        _insert_params(con, sid, parser, parsed)
    if parsed.bad_numbers:
        table = pa.table({
            "byte_offset": pa.array(parsed.bad_offsets, pa.int64()),
            "line": pa.array(parsed.bad_numbers, pa.int64()),
            "text": pa.array(parsed.bad_texts, pa.string()),
            "reason": pa.array(parsed.bad_reasons, pa.string()),
        })
        con.register("_ops_bad", table)
        con.execute(
            "INSERT INTO ops_unparsed SELECT ?, byte_offset, line, text, reason FROM _ops_bad",
            [sid],
        )
        con.unregister("_ops_bad")
    changed = parser.miner.take_changed()
    if changed:
        con.executemany(
            "INSERT OR REPLACE INTO ops_templates VALUES (?, ?, ?, ?)",
            [[c.template_id, c.template, c.size, c.route] for c in changed],
        )
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
    if fresh:
        table = pa.table({
            "masked": pa.array([m for m, _ in fresh], pa.string()),
            "template_id": pa.array([t for _, t in fresh], pa.int32()),
        })
        con.register("_ops_cache", table)
        con.execute("INSERT OR REPLACE INTO ops_miner_cache SELECT * FROM _ops_cache")
        con.unregister("_ops_cache")


def _insert_lines(
    con: duckdb.DuckDBPyConnection, sid: int, parsed: ParsedBatch, year: int | None
) -> None:
    table = pa.table({
        "byte_offset": pa.array(parsed.offsets, pa.int64()),
        "line": pa.array(parsed.numbers, pa.int64()),
        "ts_text": pa.array(parsed.time_texts, pa.string()),
        "level": pa.array(parsed.levels, pa.string()),
        "component": pa.array(parsed.components, pa.string()),
        "template_id": pa.array(parsed.template_ids.astype(np.int32)),
        "content": pa.array(parsed.contents, pa.string()),
    })
    con.register("_ops_batch", table)
    con.execute(
        """INSERT INTO ops_lines
        SELECT ?, byte_offset, line,
               CASE WHEN year(t) = 1900 AND ?::INTEGER IS NOT NULL
                    THEN t + to_years(?::INTEGER - 1900) ELSE t END,
               level, component, template_id, content
        FROM (SELECT *, coalesce(try_strptime(ts_text, ?), try_cast(ts_text AS TIMESTAMP)) AS t
              FROM _ops_batch)""",
        [sid, year, year, TIME_FORMATS],
    )
    con.unregister("_ops_batch")


def _insert_params(
    con: duckdb.DuckDBPyConnection, sid: int, parser: LogParser, parsed: ParsedBatch
) -> None:
    miner = parser.miner
    rows, positions, values = extract_parameters_batch(
        parsed.template_ids, parsed.contents, lambda tid: miner.cluster(tid).template
    )
    if len(rows) == 0:
        return
    table = pa.table({
        "byte_offset": pa.array(np.asarray(parsed.offsets, dtype=np.int64)[rows]),
        "position": pa.array(positions),
        "value": values,
    })
    con.register("_ops_params", table)
    con.execute(
        "INSERT INTO ops_params SELECT ?, byte_offset, position, value FROM _ops_params "
        "ORDER BY byte_offset, position",
        [sid],
    )
    con.unregister("_ops_params")
