"""Ingestion of logs and structured records into the store, in resumable committed batches."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import BinaryIO

from cloudtwin.errors import StoreError
from cloudtwin.ops.logformat import JSON_FIELDS, LogFormat
from cloudtwin.ops.masking import GENERIC_MASKS
from cloudtwin.ops.miner import MinerConfig
from cloudtwin.ops.parser import LogParser, ParsedBatch
from cloudtwin.ops.presets import Preset
from cloudtwin.ops.reader import DEFAULT_BATCH_LINES, open_log, read_batches
from cloudtwin.ops.record import LogRecord
from cloudtwin.store.database import Store
from cloudtwin.store.ops_tables import (
    SourceState,
    ensure_ops_schema,
    load_miner,
    source_state,
    write_batch,
)

__all__ = ["IngestSummary", "ingest_file", "ingest_records", "ingest_stream"]

_FINGERPRINT_BYTES = 4096
_RECORD_FORMAT = LogFormat(text="records", kind="jsonl", fields=JSON_FIELDS)

#: Called after each committed batch with the number of bytes it covered.
ProgressHook = Callable[[int], None]


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


def ingest_file(
    store: Store,
    path: str | Path,
    preset: Preset,
    *,
    year: int | None = None,
    batch_lines: int = DEFAULT_BATCH_LINES,
    progress: ProgressHook | None = None,
) -> IngestSummary:
    """Ingest a plain or gzip log file; a second ingest of the same file adds nothing.

    The source is the file's absolute path. If the file grew since, only the new lines
    are added; if its beginning changed, StoreError says so instead of mixing contents.
    """
    source = str(Path(path).resolve())
    with open_log(path) as stream:
        fingerprint = _fingerprint(Path(path))
        return ingest_stream(
            store, stream, source, preset, fingerprint=fingerprint, year=year,
            batch_lines=batch_lines, progress=progress,
        )


def ingest_stream(
    store: Store,
    stream: BinaryIO,
    source: str,
    preset: Preset,
    *,
    fingerprint: tuple[str, int] | None = None,
    year: int | None = None,
    batch_lines: int = DEFAULT_BATCH_LINES,
    progress: ProgressHook | None = None,
) -> IngestSummary:
    """Ingest a byte stream (e.g. stdin) under a source name, resuming after its last batch."""
    ensure_ops_schema(store)
    miner = load_miner(store, _miner_config(preset))
    before = len(miner.clusters)
    state = source_state(store, source, preset.format.text, fingerprint)
    _check_fingerprint(state, fingerprint)
    start = state
    parser = LogParser(preset.format, miner)
    batches = read_batches(stream, source, state.next_offset, state.next_line, batch_lines)
    for batch in batches:
        parsed = parser.parse_batch(batch)
        with store.transaction() as con:
            done = state.next_offset
            state = write_batch(con, state, parser, parsed, year)
        if progress is not None:
            progress(state.next_offset - done)
    return _summary(start, state, before, len(miner.clusters))


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
    return _summary(start, state, before, len(miner.clusters))


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
    return MinerConfig(depth=preset.depth, sim_threshold=preset.sim_threshold, masks=preset.masks)


def _fingerprint(path: Path) -> tuple[str, int]:
    with path.open("rb") as handle:
        head = handle.read(_FINGERPRINT_BYTES)
    return hashlib.sha256(head).hexdigest(), len(head)


def _check_fingerprint(state: SourceState, fingerprint: tuple[str, int] | None) -> None:
    if fingerprint is None or state.fingerprint is None:
        return
    path = Path(state.source)
    with path.open("rb") as handle:
        head = handle.read(state.fingerprint_bytes)
    if hashlib.sha256(head).hexdigest() != state.fingerprint:
        raise StoreError(
            f"{state.source}: its first {state.fingerprint_bytes} bytes differ from the file "
            "ingested under this name before; rename it or use another --db"
        )


def _summary(start: SourceState, end: SourceState, before: int, after: int) -> IngestSummary:
    return IngestSummary(
        source=end.source,
        lines=end.lines - start.lines,
        unparsed=end.unparsed - start.unparsed,
        new_templates=after - before,
        templates=after,
        next_offset=end.next_offset,
        skipped_bytes=start.next_offset,
    )
