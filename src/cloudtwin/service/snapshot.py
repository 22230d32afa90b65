"""Reads from a snapshot: the service never holds the store file while others write it.

DuckDB lets one process write a file, or several read it, never both. A CLI ingest or
sweep writing the store must not make a page fail, and a page must not make the CLI
fail. So the service reads a private copy of the store: whenever the file has changed
and no one is writing it, the service opens it read-only for as long as a file copy
takes (a writer opening it then waits, see `Store`), copies it, and swaps the copy in.
Requests in flight finish on the copy they started with. While a writer holds the file,
pages show the last copy (`Snapshot.taken` says from when).
"""

from __future__ import annotations

import itertools
import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from cloudtwin.store.database import Store, is_lock_conflict, lock_down
from cloudtwin.store.ops_segments import segment_dir

__all__ = ["Snapshot", "Snapshots"]

Signature = tuple[tuple[int, int], ...]


@dataclass(eq=False)
class Snapshot:
    """One copy of the store, open read-only, shared by the requests that use it."""

    connection: duckdb.DuckDBPyConnection
    path: Path | None
    taken: datetime
    users: int = 0
    retired: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def release(self) -> None:
        """Close and delete the copy once it is retired and no request uses it."""
        self.connection.close()
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            Path(str(self.path) + ".wal").unlink(missing_ok=True)
            folder = segment_dir(self.path)
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)


def _signature(db: Path) -> Signature:
    parts = []
    for path in (db, Path(str(db) + ".wal")):
        try:
            st = path.stat()
        except FileNotFoundError:
            parts.append((0, -1))
            continue
        parts.append((st.st_mtime_ns, st.st_size))
    return tuple(parts)


def _link_segments(db: Path, target: Path) -> None:
    """Give the copy the store's segments: hard links (a segment never changes; a
    compaction that deletes the store's leaves the copy's), or copies across devices."""
    source, copy = segment_dir(db), segment_dir(target)
    if source is None or copy is None or not source.is_dir():
        return
    copy.mkdir(exist_ok=True)
    for path in source.glob("seg-*.parquet"):
        try:
            os.link(path, copy / path.name)
        except OSError:
            shutil.copyfile(path, copy / path.name, follow_symlinks=False)


class Snapshots:
    """The current read snapshot of a store file, refreshed when the file changes."""

    def __init__(self, db: Path, directory: Path, interval_s: float = 1.0) -> None:
        self.db = db
        self.directory = directory
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._numbers = itertools.count(1)
        self._signature: Signature | None = None
        self._checked = 0.0
        empty = duckdb.connect(":memory:")
        lock_down(empty, ":memory:")
        self._current = Snapshot(empty, None, datetime.now(UTC))
        self.refreshes = 0
        self.busy = 0

    @contextmanager
    def store(self) -> Iterator[Store]:
        """A read-only Store over the current snapshot, for one request."""
        self._maybe_refresh_later()
        with self._lock:
            snapshot = self._current
            snapshot.users += 1
            cursor = snapshot.connection.cursor()
        try:
            folder = None if snapshot.path is None else segment_dir(snapshot.path)
            yield Store.attach(cursor, self.db, folder)
        finally:
            cursor.close()
            with self._lock:
                snapshot.users -= 1
                done = snapshot.retired and snapshot.users == 0
            if done:
                snapshot.release()

    @property
    def taken(self) -> datetime:
        """When the current snapshot was copied."""
        return self._current.taken

    def refresh(self) -> bool:
        """Copy the store now if it changed; False if a writer holds it (try again later)."""
        with self._refresh_lock:
            signature = _signature(self.db)
            if signature == self._signature:
                return True
            if signature[0][1] < 0:
                return True  # no store yet: the empty snapshot stands
            copy = self._copy()
            if copy is None:
                self.busy += 1
                return False
            self._swap(copy, signature)
            return True

    def close(self) -> None:
        """Release every snapshot (at shutdown)."""
        with self._lock:
            self._current.retired = True
            idle = self._current.users == 0
        if idle:
            self._current.release()

    def _maybe_refresh_later(self) -> None:
        now = time.monotonic()
        if now - self._checked < self.interval_s or self._refresh_lock.locked():
            return
        self._checked = now
        if _signature(self.db) != self._signature:
            threading.Thread(target=self.refresh, name="cloudtwin-snapshot", daemon=True).start()

    def _copy(self) -> Path | None:
        target = self.directory / f"snapshot-{next(self._numbers)}.duckdb"
        try:
            source = duckdb.connect(str(self.db), read_only=True)
        except duckdb.Error as err:
            if is_lock_conflict(err):
                return None
            raise
        try:  # while this read-only connection is open, no process can write the file
            shutil.copyfile(self.db, target)
            wal = Path(str(self.db) + ".wal")
            if wal.exists():
                shutil.copyfile(wal, Path(str(target) + ".wal"))
            _link_segments(self.db, target)
        finally:
            source.close()
        return target

    def _swap(self, copy: Path, signature: Signature) -> None:
        connection = duckdb.connect(str(copy), read_only=True)
        lock_down(connection, copy)  # requests read the copy and its segments, nothing else
        fresh = Snapshot(connection, copy, datetime.now(UTC))
        with self._lock:
            old, self._current = self._current, fresh
            old.retired = True
            idle = old.users == 0
            self._signature = signature
            self.refreshes += 1
        if idle:
            old.release()
