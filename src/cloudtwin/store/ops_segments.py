"""Log lines kept as Parquet segments beside the store: how a pool of workers stores lines.

With one writer, storing a line in DuckDB costs the ingesting process about as much CPU as
mining it costs a worker, so a second worker could not make an ingest much faster. So a
worker that mined a chunk also encodes its lines in their stored form (timestamps parsed,
parameters as lists) as one Parquet file, a *segment*, with the chunk's own template ids.
The ingesting process writes those bytes into the store's segment folder
(``<store>.segments/``) and registers the file, with the map from the chunk's template
ids to the store's, in the transaction that moves the source's marker: the lines never
go through the writer.

Readers see one table: each connection the store opens gets a temporary view
``ops_lines`` over the stored table and the registered segments (and ``ops_params``,
a view over ``ops_lines``, follows it). A store opened read-only may read its own
segment folder and no other file. :func:`compact` moves the segments into the table.

A segment is written (to a temporary name, synced, renamed) before the transaction that
registers it commits. A file that no transaction registered, left by an ingest killed
between the two, is no part of the store: every ingest and compaction removes such files.

Each registered segment keeps its identity: its size and SHA-256 (besides its source and
byte range). Before a connection reads the segments, and before a compaction moves them,
every file is checked against it: a segment replaced by a symbolic link (never followed),
swapped with another, cut short or rewritten is refused in one line naming it, so a
wrong line is never read, let alone compacted into the table for good. A file checked
once is not hashed again in the same process while its inode, size and times stay.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from cloudtwin.errors import StoreError
from cloudtwin.ops.chunks import Chunk
from cloudtwin.ops.columnar import ChunkMiner, MinedChunk
from cloudtwin.store.database import Store

__all__ = [
    "SEGMENT_SUFFIX",
    "SegmentMiner",
    "SegmentWrite",
    "attach_segments",
    "compact",
    "first_segment_id",
    "remove_orphans",
    "segment_dir",
    "segment_write",
    "store_segment",
    "stored",
]

#: The segment folder of store ``S`` is ``S`` followed by this.
SEGMENT_SUFFIX = ".segments"
_PREFIX, _EXTENSION = "seg-", ".parquet"
#: The columns of ``ops_lines``, in order.
LINE_COLUMNS = (
    "source_id", "byte_offset", "line", "ts", "level", "component", "template_id", "content",
    "params",
)
SEGMENT_DDL = [
    """CREATE TABLE IF NOT EXISTS ops_segments (
        segment_id INTEGER PRIMARY KEY, source_id INTEGER NOT NULL, file VARCHAR NOT NULL,
        lines BIGINT NOT NULL, byte_offset BIGINT NOT NULL, end_offset BIGINT NOT NULL,
        size_bytes BIGINT, sha256 VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS ops_segment_ids (
        segment_id INTEGER NOT NULL, chunk_id INTEGER NOT NULL, template_id INTEGER NOT NULL)""",
    # stores whose segments were registered before they kept their identity
    "ALTER TABLE ops_segments ADD COLUMN IF NOT EXISTS size_bytes BIGINT",
    "ALTER TABLE ops_segments ADD COLUMN IF NOT EXISTS sha256 VARCHAR",
]


def segment_dir(path: str | Path) -> Path | None:
    """Where the segments of the store at ``path`` live (None for an in-memory store)."""
    text = str(path)
    if text == ":memory:" or text.startswith(":memory:"):
        return None
    return Path(text + SEGMENT_SUFFIX)


def _file_name(segment_id: int) -> str:
    return f"{_PREFIX}{segment_id:09d}{_EXTENSION}"


class SegmentMiner:
    """Mines a chunk (as :class:`ChunkMiner` does) and encodes its lines as a segment.

    Picklable, shipped once per ingest: ``source_id`` and ``year`` are the ingest's,
    and chunk ``i`` becomes segment ``first_segment + i``. The result's ``lines`` are
    empty; ``segment`` holds the Parquet bytes and ``segment_lines`` their count.
    """

    def __init__(
        self, miner: ChunkMiner, source_id: int, first_segment: int, year: int | None
    ) -> None:
        self.miner = miner
        self.source_id = source_id
        self.first_segment = first_segment
        self.year = year

    def __call__(self, chunk: Chunk) -> MinedChunk:
        mined = self.miner(chunk)
        start = time.thread_time()
        if mined.lines.num_rows:
            mined.segment = encode_segment(
                mined.lines, self.source_id, self.first_segment + chunk.index, self.year
            )
            mined.segment_lines = mined.lines.num_rows
            mined.lines = mined.lines.schema.empty_table()  # a slice pickles its parent's buffers
        mined.cpu_s += time.thread_time() - start
        return mined


_local = threading.local()


def encode_segment(lines: pa.Table, source_id: int, segment_id: int, year: int | None) -> bytes:
    """A mined chunk's lines in their stored form, as Parquet bytes (zstd).

    Only the time texts go through DuckDB (its parsing is the store's); the other
    columns go from the mined table to the file as they are.
    """
    from cloudtwin.store.ops_tables import lines_select

    con = getattr(_local, "con", None)
    if con is None:  # one in-memory DuckDB per thread, for its timestamp parsing
        con = _local.con = duckdb.connect(":memory:", config={"threads": 1})
    times = pa.table({"ts_text": lines.column("ts_text")})
    relation = con.from_arrow(times).query("_ops_chunk", lines_select(source_id, year, "ts"))
    assert relation is not None  # a SELECT always gives a relation
    to_table = getattr(relation, "to_arrow_table", None)  # DuckDB 2 renamed it
    ts = (to_table() if to_table is not None else relation.fetch_arrow_table()).column(0)
    n = lines.num_rows
    table = pa.table({
        "source_id": pa.array(np.full(n, source_id, np.int32)),
        "byte_offset": lines.column("byte_offset"),
        "line": lines.column("line"),
        "ts": ts,
        **{name: lines.column(name) for name in
           ("level", "component", "template_id", "content", "params")},
        "segment_id": pa.array(np.full(n, segment_id, np.int32)),
    })
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", compression_level=1)
    return bytes(sink.getvalue())


@dataclass(frozen=True)
class SegmentWrite:
    """A segment on its way into the store: its bytes and its ids' map to the store's."""

    segment_id: int
    source_id: int
    data: bytes
    lines: int
    byte_offset: int
    end_offset: int
    #: (chunk's template id, store's template id) wherever they differ.
    ids: tuple[tuple[int, int], ...]


def segment_write(
    mined: MinedChunk, source_id: int, segment_id: int, byte_offset: int,
    mapping: npt.NDArray[np.int32],
) -> SegmentWrite:
    """What :func:`store_segment` needs of a mined chunk whose lines are a segment."""
    moved = np.flatnonzero(mapping != np.arange(len(mapping)))
    return SegmentWrite(
        segment_id, source_id, mined.segment, mined.segment_lines, byte_offset,
        mined.end_offset, tuple((int(k), int(mapping[k])) for k in moved),
    )


def first_segment_id(con: duckdb.DuckDBPyConnection) -> int:
    """The id the next ingest's first segment gets."""
    [row] = con.execute("SELECT coalesce(max(segment_id), 0) + 1 FROM ops_segments").fetchall()
    return int(row[0])


def store_segment(con: duckdb.DuckDBPyConnection, folder: Path, write: SegmentWrite) -> None:
    """Write a segment's file and register it (call inside the transaction that commits it)."""
    try:
        folder.mkdir(exist_ok=True)
    except OSError as err:
        raise StoreError(f"segments: cannot make the folder {folder}: {err.strerror}") from err
    if not folder.is_dir():
        raise StoreError(f"segments: {folder} is not a folder; move it away or use --no-segments")
    name = _file_name(write.segment_id)
    temporary = folder / f".{name}.{os.getpid()}.tmp"
    with temporary.open("wb") as handle:
        handle.write(write.data)
        handle.flush()
        os.fsync(handle.fileno())
    temporary.replace(folder / name)
    con.execute(
        "INSERT INTO ops_segments (segment_id, source_id, file, lines, byte_offset, end_offset, "
        "size_bytes, sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [write.segment_id, write.source_id, name, write.lines, write.byte_offset,
         write.end_offset, len(write.data), hashlib.sha256(write.data).hexdigest()],
    )
    if write.ids:
        con.executemany(
            "INSERT INTO ops_segment_ids VALUES (?, ?, ?)",
            [[write.segment_id, chunk_id, store_id] for chunk_id, store_id in write.ids],
        )


@dataclass(frozen=True)
class _Registered:
    """A registered segment file and its identity (None where the store predates it)."""

    file: str
    size_bytes: int | None
    sha256: str | None


def _registrations(con: duckdb.DuckDBPyConnection) -> list[_Registered] | None:
    """The registered segments, in segment order; None when the store has no table."""
    try:
        rows = con.execute(
            "SELECT file, size_bytes, sha256 FROM ops_segments ORDER BY segment_id"
        ).fetchall()
    except duckdb.CatalogException:
        return None
    except duckdb.BinderException:  # a store opened read-only before its identity columns
        rows = [(r[0], None, None) for r in
                con.execute("SELECT file FROM ops_segments ORDER BY segment_id").fetchall()]
    return [_Registered(*row) for row in rows]


def _registered(con: duckdb.DuckDBPyConnection) -> list[str] | None:
    """The registered segment files, in segment order; None when the store has no table."""
    rows = _registrations(con)
    return None if rows is None else [r.file for r in rows]


_HASH_BLOCK = 1 << 20
_verified: dict[tuple[int, ...], str] = {}
_verified_lock = threading.Lock()
_VERIFIED_MAX = 100_000


def _file_sha256(path: Path, st: os.stat_result) -> str:
    """The SHA-256 of a regular file, opened without following a link; remembered by inode."""
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    with _verified_lock:
        known = _verified.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        while block := handle.read(_HASH_BLOCK):
            digest.update(block)
    text = digest.hexdigest()
    with _verified_lock:
        if len(_verified) >= _VERIFIED_MAX:
            _verified.clear()
        _verified[key] = text
    return text


def _mismatch(folder: Path, row: _Registered) -> str | None:
    """Why the file of a registered segment is not the one registered (None when it is)."""
    path = folder / row.file
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link (segments are never followed elsewhere)"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if row.size_bytes is not None and st.st_size != row.size_bytes:
        return f"is {st.st_size} bytes, registered as {row.size_bytes}"
    try:
        if row.sha256 is not None and _file_sha256(path, st) != row.sha256:
            return "has other contents than the segment registered (its SHA-256 differs)"
    except OSError as err:
        return f"cannot be read: {err.strerror}"
    return None


def verify_segments(store: Store, folder: Path, rows: list[_Registered]) -> None:
    """Refuse, in one line naming it, the first registered segment whose file is missing or
    is not the one registered: a link, another segment, or other bytes."""
    missing = [r.file for r in rows if not os.path.lexists(folder / r.file)]
    if missing:
        raise StoreError(
            f"store {store.path}: {len(missing)} of its {len(rows)} segments are missing from "
            f"{folder} (first: {missing[0]}); restore the folder that was ingested with it"
        )
    for row in rows:
        why = _mismatch(folder, row)
        if why is not None:
            raise StoreError(
                f"store {store.path}: segment {row.file} in {folder} {why}; restore the folder "
                "that was ingested with it"
            )


def record_identities(store: Store) -> int:
    """Give the segments registered before identities were kept their size and SHA-256 (as
    their files are now); how many. Call on a store opened to write."""
    folder = segment_dir(store.path)
    rows = [r for r in _registrations(store.connection) or [] if r.sha256 is None]
    if folder is None or not rows:
        return 0
    known = []
    for row in rows:
        path = folder / row.file
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue  # reading the store says which are missing
        if stat.S_ISREG(st.st_mode):
            known.append([st.st_size, _file_sha256(path, st), row.file])
    with store.transaction() as tx:
        tx.executemany("UPDATE ops_segments SET size_bytes = ?, sha256 = ? WHERE file = ?", known)
    return len(known)


def stored(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """A stored table by its full name (a connection's ``ops_lines`` may be the temporary
    view over the table and the segments)."""
    [row] = con.execute("SELECT current_database()").fetchall()
    catalog = str(row[0]).replace('"', '""')
    return f'"{catalog}".main.{table}'


def _segment_rows(con: duckdb.DuckDBPyConnection, folder: Path, files: list[str]) -> str:
    """A SELECT of the segments' lines as ``ops_lines`` holds them."""
    folder = folder.resolve()  # as a read-only store's allowed directory is named
    paths = ", ".join("'" + str(folder / f).replace("'", "''") + "'" for f in files)
    return (
        "SELECT p.source_id, p.byte_offset, p.line, p.ts, p.level, p.component, "
        "coalesce(m.template_id, p.template_id) AS template_id, p.content, p.params "
        f"FROM read_parquet([{paths}]) p "
        f"LEFT JOIN {stored(con, 'ops_segment_ids')} m "
        "ON m.segment_id = p.segment_id AND m.chunk_id = p.template_id"
    )


def attach_segments(store: Store, folder: Path | None = None) -> int:
    """Make this connection's ``ops_lines`` the stored lines and the registered segments.

    ``folder`` is the store's segment folder unless given (a copy's, for a snapshot).
    Returns how many segments the view reads; with none, ``ops_lines`` is the table.
    """
    con = store.connection
    folder = segment_dir(store.path) if folder is None else folder
    rows = _registrations(con)
    con.execute("DROP VIEW IF EXISTS temp.main.ops_lines")
    if not rows or folder is None:
        return 0
    verify_segments(store, folder, rows)
    files = [r.file for r in rows]
    columns = ", ".join(LINE_COLUMNS)
    try:
        con.execute(
            f"CREATE TEMP VIEW ops_lines AS SELECT {columns} FROM {stored(con, 'ops_lines')} "
            f"UNION ALL {_segment_rows(con, folder, files)}"
        )
    except duckdb.Error as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise StoreError(f"store {store.path}: its segments in {folder} cannot be read: {first}") from err
    return len(files)


def remove_orphans(store: Store) -> int:
    """Delete the segment folder's files that no transaction registered; how many."""
    folder = segment_dir(store.path)
    if folder is None or not folder.is_dir():
        return 0
    registered = set(_registered(store.connection) or [])
    removed = 0
    for path in folder.iterdir():
        name = path.name
        ours = (name.startswith(_PREFIX) and name.endswith(_EXTENSION)) or (
            name.startswith("." + _PREFIX) and name.endswith(".tmp")
        )
        if ours and name not in registered:
            path.unlink(missing_ok=True)
            removed += 1
    return removed


@dataclass(frozen=True)
class CompactSummary:
    """What a compaction moved into the table."""

    segments: int
    lines: int
    removed_orphans: int


def compact(store: Store) -> CompactSummary:
    """Move every registered segment's lines into the stored table and delete the files.

    One transaction: a compaction killed midway leaves the segments as they were. The
    files go only after it commits.
    """
    con = store.connection
    folder = segment_dir(store.path)
    rows = _registrations(con) or []
    files = [r.file for r in rows]
    lines = 0
    if files and folder is not None:
        verify_segments(store, folder, rows)
        with store.transaction() as tx:
            [row] = tx.execute("SELECT coalesce(sum(lines), 0) FROM ops_segments").fetchall()
            lines = int(row[0])
            tx.execute(
                f"INSERT INTO {stored(tx, 'ops_lines')} ({', '.join(LINE_COLUMNS)}) "
                + _segment_rows(tx, folder, files)
            )
            tx.execute("DELETE FROM ops_segment_ids")
            tx.execute("DELETE FROM ops_segments")
        attach_segments(store)
        for name in files:
            (folder / name).unlink(missing_ok=True)
    removed = remove_orphans(store)
    return CompactSummary(len(files), lines, removed)
