"""Tests of the generic store: schema versions, transactions, read-only user SQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudtwin.errors import StoreError
from cloudtwin.store import Store
from cloudtwin.store.database import check_store_file


def test_a_failed_transaction_leaves_nothing(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as store:
        store.ensure_schema("t", 1, ["CREATE TABLE t (x INTEGER)"])
        with pytest.raises(RuntimeError), store.transaction() as con:
            con.execute("INSERT INTO t VALUES (1)")
            raise RuntimeError("boom")
        assert store.query("SELECT count(*) FROM t")[1] == [(0,)]


def test_schema_version_mismatch_is_an_error(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as store:
        store.ensure_schema("t", 1, ["CREATE TABLE t (x INTEGER)"])
        store.ensure_schema("t", 1, ["CREATE TABLE t (x INTEGER)"])
        with pytest.raises(StoreError, match="t tables have schema version 1.*version 2"):
            store.ensure_schema("t", 2, [])


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("DELETE FROM t", "read-only SELECT, got a DELETE"),
        ("SELECT 1; SELECT 2", "exactly one statement, got 2"),
        ("SELEC 1", "does not parse"),
        ("COPY t TO 'out.csv'", "got a COPY"),
        ("SELECT * FROM read_csv('/etc/hostname')", "file system operations are disabled"),
        ("SELECT nope FROM t", "SQL failed"),
    ],
)
def test_user_sql_is_read_only(tmp_path: Path, sql: str, reason: str) -> None:
    path = tmp_path / "s.duckdb"
    with Store(path) as store:
        store.ensure_schema("t", 1, ["CREATE TABLE t (x INTEGER)", "INSERT INTO t VALUES (4)"])
    with Store(path, read_only=True) as store:
        assert store.select("SELECT x FROM t") == (["x"], [(4,)])
        with pytest.raises(StoreError, match=reason):
            store.select(sql)
    with Store(path) as store:
        assert store.query("SELECT x FROM t")[1] == [(4,)]


def test_read_only_open_of_a_missing_store_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no store there yet"):
        Store(tmp_path / "missing.duckdb", read_only=True)


def test_a_store_path_the_system_cannot_look_up_is_refused_naming_the_field(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop")
    for path in (loop, tmp_path / ("x" * 5000)):
        with pytest.raises(StoreError, match=r"^db: .*(symbolic links|too long)"):
            check_store_file(path)
        with pytest.raises(StoreError, match=r"^db: "):
            Store(path, read_only=True)
