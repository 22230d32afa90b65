"""Ingestion of logs and structured records into the store, in resumable committed batches."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Literal

from cloudtwin.errors import StoreError
from cloudtwin.ops.logformat import JSON_FIELDS, LogFormat
from cloudtwin.ops.masking import GENERIC_MASKS
from cloudtwin.ops.miner import MinerConfig
from cloudtwin.ops.parser import LogParser, ParsedBatch
from cloudtwin.ops.presets import Preset
from cloudtwin.ops.reader import DEFAULT_BATCH_LINES, LogStream, read_batches
from cloudtwin.ops.record import LogRecord
from cloudtwin.store.database import Store
from cloudtwin.store.ops_tables import (
    SourceState,
    ensure_ops_schema,
    load_miner,
    set_fingerprint,
    source_state,
    write_batch,
)

__all__ = ["IngestSummary", "NewStream", "ingest_records", "ingest_stream"]

_RECORD_FORMAT = LogFormat(text="records", kind="jsonl", fields=JSON_FIELDS)

#: Called after each committed batch with the number of bytes it covered.
ProgressHook = Callable[[int], None]
#: What to do with a stream whose head differs from the one stored under its source.
NewStream = Literal["refuse", "append"]


@dataclass(frozen=True)
class IngestSummary:
    """What one ingest added: lines, unparsed lines, new templates, and where it stopped."""

    source: str
    lines: int
    unparsed: int
    new_templates: int
    templates: int
    next_offset: int
    skipped_bytes: int


def ingest_stream(
    store: Store,
    log: LogStream,
    preset: Preset,
    *,
    source: str | None = None,
    new_stream: NewStream = "refuse",
    year: int | None = None,
    batch_lines: int = DEFAULT_BATCH_LINES,
    progress: ProgressHook | None = None,
) -> IngestSummary:
    """Ingest a log stream under a source name (``log.name`` unless given).

    Ingesting the same stream again adds nothing, and a stream that grew adds only its
    new lines: its head is compared with the fingerprint kept for the source. A stream
    that starts differently is refused (``new_stream="refuse"``, for files: their
    content changed) or stored after everything the source already holds
    (``new_stream="append"``, for stdin: another stream under the same name).
    """
    source = log.name if source is None else source
    ensure_ops_schema(store)
    miner = load_miner(store, _miner_config(preset))
    before = len(miner.clusters)
    state = source_state(store, source, preset.format.text, log.fingerprint)
    start = state
    if not _same_stream(state, log):
        if new_stream == "refuse":
            raise StoreError(
                f"source {source!r}: its first {state.fingerprint_bytes} bytes differ from "
                "the stream ingested under this name before; ingest it under another "
                "source name or into another store"
            )
        state = set_fingerprint(store, state, log.fingerprint, state.next_offset)
    elif len(log.head) > state.fingerprint_bytes:  # the same stream, known by more bytes now
        state = set_fingerprint(store, state, log.fingerprint, state.stream_base)
    skipped = state.next_offset - state.stream_base
    parser = LogParser(preset.format, miner)
    batches = read_batches(
        log.stream, source, state.next_offset - state.stream_base, state.next_line,
        batch_lines, base_offset=state.stream_base,
    )
    for batch in batches:
        parsed = parser.parse_batch(batch)
        with store.transaction() as con:
            done = state.next_offset
            state = write_batch(con, state, parser, parsed, year)
        if progress is not None:
            progress(state.next_offset - done)
    return _summary(start, state, before, len(miner.clusters), skipped)


def _same_stream(state: SourceState, log: LogStream) -> bool:
    if state.fingerprint is None:  # a stream source from before fingerprints were kept
        return state.next_offset == state.stream_base
    return log.same_head(state.fingerprint, state.fingerprint_bytes)


def ingest_records(
    store: Store,
    records: Iterable[LogRecord],
    source: str,
    *,
    masks: tuple[str, ...] = GENERIC_MASKS,
    batch_records: int = DEFAULT_BATCH_LINES,
) -> IngestSummary:
    """Ingest already-structured records (e.g. emitted by a simulation) under a source name.

    A record's position in ``records`` plays the part of a byte offset: ingesting the
    same sequence again adds nothing, and a longer sequence adds only its new tail.
    """
    ensure_ops_schema(store)
    miner = load_miner(store, MinerConfig(masks=masks))
    before = len(miner.clusters)
    state = source_state(store, source, "records", None)
    start = state
    parser = LogParser(_RECORD_FORMAT, miner)
    iterator = islice(iter(records), state.next_offset, None)
    while chunk := list(islice(iterator, batch_records)):
        parsed = _records_batch(chunk, state.next_offset, parser)
        with store.transaction() as con:
            state = write_batch(con, state, parser, parsed, None)
    return _summary(start, state, before, len(miner.clusters), start.next_offset)


def _records_batch(chunk: list[LogRecord], first: int, parser: LogParser) -> ParsedBatch:
    out = ParsedBatch(end_offset=first + len(chunk))
    for k, record in enumerate(chunk):
        index = first + k
        if not record.content.strip():
            out.bad_numbers.append(index + 1)
            out.bad_offsets.append(index)
            out.bad_texts.append(record.content)
            out.bad_reasons.append("empty message")
            continue
        out.numbers.append(index + 1)
        out.offsets.append(index)
        out.time_texts.append(record.timestamp.isoformat() if record.timestamp else None)
        out.levels.append(record.level)
        out.components.append(record.component)
        out.contents.append(record.content.strip())
    out.template_ids = parser.miner.add_batch(out.contents)
    return out


def _miner_config(preset: Preset) -> MinerConfig:
    return preset.miner_config()


def _summary(
    start: SourceState, end: SourceState, before: int, after: int, skipped: int
) -> IngestSummary:
    return IngestSummary(
        source=end.source,
        lines=end.lines - start.lines,
        unparsed=end.unparsed - start.unparsed,
        new_templates=after - before,
        templates=after,
        next_offset=end.next_offset,
        skipped_bytes=skipped,
    )
