"""The DuckDB store: one embedded database file, its transactions and its schema versions."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb

from cloudtwin.errors import LimitError, StoreError
from cloudtwin.store.defaults import DEFAULT_DB, DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S

__all__ = [
    "DEFAULT_DB", "DEFAULT_MAX_ROWS", "DEFAULT_TIMEOUT_S", "LOCK_WAIT_S", "QueryResult", "Store",
    "check_store_file", "is_lock_conflict", "lock_down",
]

#: DuckDB's working memory for a store opened to read (its own default is 80% of RAM).
READ_MEMORY_LIMIT = "2GB"

_VERSION_DDL = (
    "CREATE TABLE IF NOT EXISTS schema_version "
    "(component VARCHAR PRIMARY KEY, version INTEGER NOT NULL)"
)

#: How long opening the store waits for another process (e.g. `cloudtwin serve` taking a
#: snapshot) to release the file before giving up.
LOCK_WAIT_S = 30.0

#: Column names and rows of a query.
QueryResult = tuple[list[str], list[tuple[Any, ...]]]


class Store:
    """An open store. Use as a context manager; write inside :meth:`transaction`.

    Each part of cloudtwin that keeps data here (operations logs, simulation runs)
    owns its tables and calls :meth:`ensure_schema` with its own component name.

    >>> with Store(":memory:") as store:
    ...     store.ensure_schema("demo", 1, ["CREATE TABLE t (x INTEGER)"])
    ...     with store.transaction() as con:
    ...         _ = con.execute("INSERT INTO t VALUES (1), (2)")
    ...     store.query("SELECT sum(x) AS total FROM t")
    (['total'], [(3,)])
    """

    def __init__(
        self, path: str | Path = DEFAULT_DB, *, read_only: bool = False,
        memory_limit: str | None = None, lock_wait_s: float = LOCK_WAIT_S,
    ) -> None:
        self.path = str(path)
        self.read_only = read_only
        if read_only and self.path != ":memory:" and not _exists(Path(self.path), "db"):
            raise StoreError(f"store {self.path}: no store there yet (ingest something first)")
        config: dict[str, str | bool | int | float | list[str]] = {}
        if memory_limit is None and read_only:
            memory_limit = READ_MEMORY_LIMIT
        if memory_limit is not None:  # DuckDB's buffer pool may otherwise grow to 80% of RAM
            config["memory_limit"] = memory_limit
        self.connection = _connect(self.path, read_only, config, lock_wait_s)
        if read_only:  # no file but the store's own segments may be read
            self._lock_down()
        else:
            self.connection.execute(_VERSION_DDL)
        self._attach_segments()

    def _lock_down(self) -> None:
        lock_down(self.connection, self.path)

    def _attach_segments(self, folder: Path | None = None) -> None:
        from cloudtwin.store.ops_segments import attach_segments

        attach_segments(self, folder)

    @classmethod
    def attach(
        cls, connection: duckdb.DuckDBPyConnection, path: str | Path, segments: Path | None = None
    ) -> Store:
        """A read-only Store over an already open connection (e.g. a server's snapshot);
        ``segments`` is the folder of the copy's segments (the store's own by default)."""
        store = cls.__new__(cls)
        store.path, store.read_only, store.connection = str(path), True, connection
        store._attach_segments(segments)
        return store

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (committed data is already on disk)."""
        self.connection.close()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One atomic unit of work: all of it is stored, or none of it."""
        con = self.connection
        con.execute("BEGIN TRANSACTION")
        try:
            yield con
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    def ensure_schema(self, component: str, version: int, ddl: Sequence[str]) -> None:
        """Create a component's tables if needed and check the stored schema version."""
        stored = self.schema_version(component)
        if stored is not None and stored != version:
            raise StoreError(
                f"store {self.path}: {component} tables have schema version {stored}, "
                f"this cloudtwin reads version {version}"
            )
        if stored is None and not self.read_only:
            with self.transaction() as con:
                for statement in ddl:
                    con.execute(statement)
                con.execute("INSERT INTO schema_version VALUES (?, ?)", [component, version])

    def schema_version(self, component: str) -> int | None:
        """The schema version a component's tables were created with, if they exist."""
        try:
            row = self.connection.execute(
                "SELECT version FROM schema_version WHERE component = ?", [component]
            ).fetchone()
        except duckdb.CatalogException:
            return None
        return int(row[0]) if row else None

    def query(self, sql: str, params: Sequence[object] = ()) -> QueryResult:
        """Run one statement written by cloudtwin itself; its columns and rows."""
        try:
            cursor = self.connection.execute(sql, list(params))
        except duckdb.Error as err:
            raise StoreError(f"query failed: {err}") from err
        columns = [d[0] for d in cursor.description or []]
        return columns, cursor.fetchall()

    def select(
        self, sql: str, *, max_rows: int = DEFAULT_MAX_ROWS, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> QueryResult:
        """Run one user-written read-only statement (SELECT, WITH ... SELECT, ...).

        Rows are fetched as they are produced: more than ``max_rows`` of them, or more
        than ``timeout_s`` seconds, is a LimitError naming that limit (the query is
        stopped, nothing is held beyond the limit).
        """
        try:
            statements = self.connection.extract_statements(sql)
        except duckdb.Error as err:
            raise StoreError(f"SQL does not parse: {_first_line(err)}") from err
        if len(statements) != 1:
            raise StoreError(f"SQL must be exactly one statement, got {len(statements)}")
        kind = statements[0].type
        if kind != duckdb.StatementType.SELECT:
            raise StoreError(f"SQL must be a read-only SELECT, got a {kind.name} statement")
        with self._deadline(timeout_s):
            try:
                cursor = self.connection.execute(sql)
                columns = [d[0] for d in cursor.description or []]
                rows = cursor.fetchmany(max_rows + 1)
            except duckdb.InterruptException as err:
                raise LimitError(
                    f"SQL stopped after {timeout_s:g} s (timeout_s); narrow the query or "
                    "raise the limit", "timeout_s",
                ) from err
            except duckdb.Error as err:
                raise StoreError(f"SQL failed: {_first_line(err)}") from err
        if len(rows) > max_rows:
            raise LimitError(
                f"SQL returns more than {max_rows:,} rows (max_rows); add a LIMIT or an "
                "aggregate, or raise the limit", "max_rows",
            )
        return columns, rows

    @contextmanager
    def _deadline(self, timeout_s: float) -> Iterator[None]:
        """Interrupt whatever the connection runs once ``timeout_s`` seconds have passed."""
        timer = threading.Timer(timeout_s, self.connection.interrupt)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()


#: Where a DuckDB file says what it is: bytes 8 to 11 of its first block.
_MAGIC_AT, _MAGIC = 8, b"DUCK"


def lock_down(connection: duckdb.DuckDBPyConnection, path: str | Path) -> None:
    """Let a read connection read no file but the store's own segments (the store at
    `path`): queries cannot reach the machine's files, whatever SQL they hold."""
    from cloudtwin.store.ops_segments import segment_dir

    folder = segment_dir(str(path))
    if folder is not None and folder.is_dir():
        allowed = str(folder.resolve()).replace("'", "''") + "/"
        connection.execute(f"SET allowed_directories = ['{allowed}']")
    connection.execute("SET enable_external_access = false")


def check_store_file(path: Path, field: str = "db") -> None:
    """Refuse (StoreError naming ``field``) a path that exists but is not a DuckDB file: a
    folder, a device or FIFO, or a file of other content. Reads 12 bytes, takes no lock.
    A missing or empty file is a store yet to be made.
    """
    if not _exists(path, field):
        return
    if not path.is_file():
        raise StoreError(f"{field}: {path} is not a regular file, so not a DuckDB store")
    with path.open("rb") as handle:
        head = handle.read(_MAGIC_AT + len(_MAGIC))
    if head and head[_MAGIC_AT:] != _MAGIC:
        raise StoreError(f"{field}: {path} is not a DuckDB database")


def _exists(path: Path, field: str) -> bool:
    """Whether ``path`` exists; a path the system cannot look up (a name too long, a
    loop of links) is a StoreError naming ``field``."""
    try:
        path.stat()
    except FileNotFoundError:
        return False
    except OSError as err:
        shown = str(path) if len(str(path)) <= 80 else str(path)[:77] + "..."
        raise StoreError(f"{field}: {shown}: {err.strerror}") from err
    return True


def is_lock_conflict(err: BaseException) -> bool:
    """Whether DuckDB refused to open a file because another process holds its lock, or
    this process holds it open the other way (read-only against read-write: a service's
    snapshot copy while its job writes), which passes as soon as the holder closes it."""
    text = str(err).lower()
    if isinstance(err, duckdb.ConnectionException):
        return "different configuration" in text
    return isinstance(err, duckdb.IOException) and "lock" in text


def _connect(
    path: str, read_only: bool, config: dict[str, str | bool | int | float | list[str]], wait_s: float
) -> duckdb.DuckDBPyConnection:
    """Open the file, waiting up to `wait_s` while another process holds its lock."""
    deadline = time.monotonic() + wait_s
    pause = 0.01
    while True:
        try:
            return duckdb.connect(path, read_only=read_only, config=config)
        except duckdb.Error as err:
            if not is_lock_conflict(err) or time.monotonic() >= deadline:
                raise StoreError(f"store {path}: cannot open it: {_first_line(err)}") from err
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
