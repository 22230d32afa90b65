"""Ingestion of logs and structured records into the store, in resumable committed batches."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Literal

from cloudtwin.errors import StoreError
from cloudtwin.ops.chunks import CHUNK_BYTES, read_chunks
from cloudtwin.ops.columnar import ChunkMiner, merge_chunk
from cloudtwin.ops.executors import ChunkExecutor, mine_in_order
from cloudtwin.ops.logformat import JSON_FIELDS, LogFormat
from cloudtwin.ops.masking import GENERIC_MASKS
from cloudtwin.ops.miner import MinerConfig
from cloudtwin.ops.parser import LogParser, ParsedBatch
from cloudtwin.ops.presets import Preset
from cloudtwin.ops.reader import DEFAULT_BATCH_LINES, LogStream
from cloudtwin.ops.record import LogRecord
from cloudtwin.store.database import Store
from cloudtwin.store.ops_segments import (
    SegmentMiner,
    attach_segments,
    first_segment_id,
    remove_orphans,
    segment_dir,
)
from cloudtwin.store.ops_tables import (
    COMMIT_LINES,
    ChunkWrite,
    CommitGroup,
    SourceState,
    ensure_ops_schema,
    load_miner,
    prepare_chunk,
    set_fingerprint,
    source_state,
    write_batch,
)

__all__ = [
    "INGEST_MEMORY_LIMIT", "IngestCpu", "IngestSummary", "NewStream", "ingest_records", "ingest_stream",
]

_RECORD_FORMAT = LogFormat(text="records", kind="jsonl", fields=JSON_FIELDS)

#: DuckDB's buffer pool while ingesting: appends need little of it, and a pool left to
#: grow toward its cap makes memory grow with the input (64 MB: 315 MiB peak at 1M HDFS
#: lines, 341 MiB at 10M; with 256 MB, 330 and 484 MiB).
INGEST_MEMORY_LIMIT = "64MB"

#: Called after each commit with the number of bytes it covered.
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


@dataclass
class IngestCpu:
    """CPU seconds an ingest spent, by role, for benchmarks (filled in as it runs).

    ``mine_s``: mining chunks, on whichever thread or worker mined them (the job's own
    time, without handing chunks to workers and back). ``driver_s``: the ingesting
    process apart from its writer thread and any mining done in it (reading, handing
    out and receiving chunks, merging templates, preparing writes, and DuckDB's own
    threads if it has more than one). ``writer_s``: the
    writer thread (DuckDB's appends and commits, which run on it). ``mined_in`` says
    where mining ran: ``"process"`` (this one) or ``"workers"``.
    """

    mine_s: float = 0.0
    driver_s: float = 0.0
    writer_s: float = 0.0
    lines: int = 0
    mined_in: str = "process"


def ingest_stream(
    store: Store,
    log: LogStream,
    preset: Preset,
    *,
    source: str | None = None,
    new_stream: NewStream = "refuse",
    year: int | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    progress: ProgressHook | None = None,
    executor: ChunkExecutor | None = None,
    commit_lines: int = COMMIT_LINES,
    cpu: IngestCpu | None = None,
    segments: bool | None = None,
) -> IngestSummary:
    """Ingest a log stream under a source name (``log.name`` unless given).

    The stream is cut into chunks of whole lines (``chunk_bytes`` each), which are
    mined, in this process or by ``executor``'s workers, from one snapshot of the
    store's templates; each chunk's groups are then merged into the store's template
    set and its lines appended as one columnar batch, in chunk order. A transaction
    takes whole chunks until it holds ``commit_lines`` lines. Where chunks are cut does
    not depend on the executor, so every executor gives the same store.

    Ingesting the same stream again adds nothing, and a stream that grew adds only its
    new lines: its head is compared with the fingerprint kept for the source. A stream
    that starts differently is refused (``new_stream="refuse"``, for files: their
    content changed) or stored after everything the source already holds
    (``new_stream="append"``, for stdin: another stream under the same name).

    With ``segments`` (the default when an executor mines into a store file), each
    worker also encodes its chunk's lines as a Parquet segment that is written beside
    the store and registered, instead of being appended by the one writer
    (:mod:`cloudtwin.store.ops_segments`); readers see the same ``ops_lines``.
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
    known = len(miner.clusters)
    folder = _segment_folder(store, executor, segments)
    chunk_miner = ChunkMiner(preset.format, miner.snapshot())
    work: ChunkMiner | SegmentMiner = chunk_miner
    first_segment = 0
    if folder is not None:
        remove_orphans(store)
        first_segment = first_segment_id(store.connection)
        work = SegmentMiner(chunk_miner, state.source_id, first_segment, year)
    chunks = read_chunks(
        log.stream, source, state.next_offset - state.stream_base, state.next_line,
        chunk_bytes, base_offset=state.stream_base,
    )
    writer = _Writer(store, year, progress, commit_lines, folder)
    process_s = time.process_time()
    mine_s = 0.0
    try:
        for mined in mine_in_order(work, chunks, executor):
            mine_s += mined.cpu_s
            mapping = merge_chunk(miner, mined, known)
            write = prepare_chunk(state, miner, mined, mapping, first_segment + mined.index)
            writer.put(write)
            state = write.state
    finally:
        try:
            writer.close()
        finally:
            if folder is not None:
                attach_segments(store)
        if cpu is not None:
            _account(cpu, time.process_time() - process_s, mine_s, writer.cpu_s, executor)
            cpu.lines += state.lines + state.unparsed - start.lines - start.unparsed
    return _summary(start, state, before, len(miner.clusters), skipped)


def _account(
    cpu: IngestCpu, process_s: float, mine_s: float, writer_s: float,
    executor: ChunkExecutor | None,
) -> None:
    in_process = mine_s if executor is None else 0.0
    cpu.mine_s += mine_s
    cpu.writer_s += writer_s
    cpu.driver_s += max(0.0, process_s - writer_s - in_process)
    cpu.mined_in = "process" if executor is None else "workers"


class _Writer:
    """Stores prepared chunks, in order, on a thread of its own.

    DuckDB releases the GIL while it appends and commits, so chunks are stored while the
    next ones are mined and merged. A transaction takes chunks until it holds
    ``commit_lines`` lines (or the ingest ends). At most two chunks wait, so memory stays
    bounded; a failed write stops the ingest at the next chunk, and what was queued
    before a failure elsewhere is still stored.
    """

    def __init__(
        self, store: Store, year: int | None, progress: ProgressHook | None, commit_lines: int,
        segments: Path | None = None,
    ) -> None:
        self._store = store
        self._segments = segments
        self._year = year
        self._progress = progress
        self._commit_lines = commit_lines
        self._queue: queue.Queue[ChunkWrite | None] = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._ended = False
        self.cpu_s = 0.0
        self._thread = threading.Thread(target=self._run, name="ops-writer", daemon=True)
        self._thread.start()

    def put(self, write: ChunkWrite) -> None:
        if self._error is not None:
            self.close()
        self._queue.put(write)

    def close(self) -> None:
        """Wait for every queued chunk; raise what failed, if anything did."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _run(self) -> None:
        start = time.thread_time()
        try:
            while self._commit_group():
                pass
        except BaseException as err:  # handed to the ingesting thread
            self._error = err
            while self._take() is not None:  # let the ingesting thread reach close()
                pass
        finally:
            self.cpu_s = time.thread_time() - start

    def _take(self) -> ChunkWrite | None:
        """The next queued chunk; None once the queue is closed."""
        if self._ended:
            return None
        write = self._queue.get()
        self._ended = write is None
        return write

    def _commit_group(self) -> bool:
        """Store queued chunks in one transaction; False once the queue is closed."""
        write = self._take()
        if write is None:
            return False
        group = CommitGroup(self._year, self._segments)
        with self._store.transaction() as con:
            while write is not None:
                group.add(con, write)
                if group.lines >= self._commit_lines:
                    break
                write = self._take()
            group.finish(con)
        if self._progress is not None:
            self._progress(group.covered)
        return write is not None


def _segment_folder(
    store: Store, executor: ChunkExecutor | None, segments: bool | None
) -> Path | None:
    """The segment folder when this ingest stores lines as segments, else None."""
    folder = segment_dir(store.path)
    if segments is None:
        segments = executor is not None and folder is not None
    if segments and folder is None:
        raise StoreError("segments: an in-memory store has no folder for segments")
    return folder if segments else None


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
