"""Tests of log lines kept as Parquet segments: a pool's store reads as the serial one, a
segment written but never registered is no part of the store, compaction folds segments
into the table, and a read-only store reads its own segments and no other file."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.store.test_ops_ingest import _generated_log
from tests.store.test_ops_scale import _LINES

from cloudtwin.errors import StoreError
from cloudtwin.ops import PRESETS, log_stream
from cloudtwin.store import Store, ingest_stream
from cloudtwin.store.ops_segments import compact, segment_dir
from cloudtwin.sweep import PoolExecutor

HDFS = PRESETS["hdfs"]
TABLES = ("ops_lines", "ops_params", "ops_templates", "ops_unparsed", "ops_miner_cache")
PRELOAD = ("cloudtwin.ops.columnar", "cloudtwin.store.ops_segments")


def _tables(path: Path) -> dict[str, list[Any]]:
    with Store(path, read_only=True) as store:
        con = store.connection
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in TABLES}


def _ingest(path: Path, log: Path, executor: Any = None, segments: bool | None = None) -> Any:
    with Store(path) as store, log_stream(log.open("rb"), "the-log") as stream:
        return ingest_stream(store, stream, HDFS, chunk_bytes=40_000, executor=executor,
                             segments=segments)


def _segments(path: Path) -> list[str]:
    folder = segment_dir(path)
    assert folder is not None
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@pytest.fixture(scope="module")
def mixed_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6,000 HDFS-style lines from four templates with malformed lines: about 15 chunks."""
    path = tmp_path_factory.mktemp("logs") / "mixed.log"
    _generated_log(path, 6000)
    return path


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory, mixed_log: Path) -> dict[str, list[Any]]:
    path = tmp_path_factory.mktemp("serial") / "serial.duckdb"
    _ingest(path, mixed_log)
    assert _segments(path) == []
    return _tables(path)


def test_a_pool_stores_lines_as_segments_that_read_as_the_serial_store(
    tmp_path: Path, mixed_log: Path, serial: dict[str, list[Any]]
) -> None:
    path = tmp_path / "pool.duckdb"
    summary = _ingest(path, mixed_log, PoolExecutor(2, PRELOAD))
    files = _segments(path)
    assert len(files) > 5 and all(f.endswith(".parquet") for f in files)
    with Store(path, read_only=True) as store:
        [(stored, registered, in_table)] = store.query(
            "SELECT (SELECT count(*) FROM ops_lines), (SELECT sum(lines) FROM ops_segments), "
            f"(SELECT count(*) FROM {_table(store)})"
        )[1]
    assert stored == registered == summary.lines and in_table == 0
    assert _tables(path) == serial


def _table(store: Store) -> str:
    from cloudtwin.store.ops_tables import stored_lines

    return stored_lines(store.connection)


def test_segments_mined_in_this_process_read_the_same_and_a_second_ingest_adds_nothing(
    tmp_path: Path, mixed_log: Path, serial: dict[str, list[Any]]
) -> None:
    path = tmp_path / "in-process.duckdb"
    first = _ingest(path, mixed_log, segments=True)
    files = _segments(path)
    again = _ingest(path, mixed_log, segments=True)
    assert first.lines > 0 and again.lines == again.unparsed == 0
    assert _segments(path) == files
    assert _tables(path) == serial


def test_compaction_folds_the_segments_into_the_table_and_deletes_them(
    tmp_path: Path, mixed_log: Path, serial: dict[str, list[Any]]
) -> None:
    path = tmp_path / "compact.duckdb"
    _ingest(path, mixed_log, segments=True)
    orphan = segment_dir(path) / "seg-999999999.parquet"  # type: ignore[operator]
    orphan.write_bytes(b"left by a killed ingest")
    with Store(path) as store:
        done = compact(store)
        assert store.query("SELECT count(*) FROM ops_segments")[1] == [(0,)]
    assert done.lines == sum(1 for _ in serial["ops_lines"]) and done.removed_orphans == 1
    assert done.segments > 5
    assert _segments(path) == []
    assert _tables(path) == serial
    with duckdb.connect(str(path), read_only=True) as con:  # the table alone holds them now
        assert con.execute("SELECT * FROM ops_lines ORDER BY ALL").fetchall() == serial["ops_lines"]
    with Store(path) as store:
        assert compact(store).segments == 0


def test_a_segment_written_but_never_registered_is_no_part_of_the_store(
    tmp_path: Path, mixed_log: Path, monkeypatch: pytest.MonkeyPatch,
    serial: dict[str, list[Any]],
) -> None:
    # the third commit fails after its segments were written: they stay on disk,
    # unregistered; readers never see them and the next ingest removes them and stores
    # exactly the rest
    from cloudtwin.store import ops_tables

    move, calls = ops_tables._move_marker, []

    def failing(*args: Any) -> None:
        calls.append(1)
        if len(calls) == 3:
            raise duckdb.IOException("disk full")
        move(*args)

    path = tmp_path / "killed.duckdb"
    monkeypatch.setattr(ops_tables, "_move_marker", failing)
    with (Store(path) as store, log_stream(mixed_log.open("rb"), "the-log") as stream,
          pytest.raises(duckdb.IOException)):
        ingest_stream(store, stream, HDFS, chunk_bytes=40_000, commit_lines=500, segments=True)
    with Store(path, read_only=True) as store:
        [(stored, marked, registered)] = store.query(
            "SELECT (SELECT count(*) FROM ops_lines) + (SELECT count(*) FROM ops_unparsed), "
            "(SELECT lines + unparsed FROM ops_sources), (SELECT count(*) FROM ops_segments)"
        )[1]
    assert 0 < stored == marked < 6000
    assert len(_segments(path)) > registered  # the failed commit's files are still there
    monkeypatch.setattr(ops_tables, "_move_marker", move)
    _ingest(path, mixed_log, segments=True)
    with Store(path, read_only=True) as store:
        [(registered,)] = store.query("SELECT count(*) FROM ops_segments")[1]
    assert len(_segments(path)) == registered
    assert _tables(path) == serial


def test_a_read_only_store_reads_its_segments_and_no_other_file(
    tmp_path: Path, mixed_log: Path
) -> None:
    path = tmp_path / "ro.duckdb"
    _ingest(path, mixed_log, segments=True)
    elsewhere = tmp_path / "elsewhere.parquet"
    shutil.copyfile(next(segment_dir(path).iterdir()), elsewhere)  # type: ignore[union-attr]
    with Store(path, read_only=True) as store:
        assert store.select("SELECT count(*) FROM ops_lines")[1][0][0] > 5000
        for sql in (f"SELECT * FROM read_parquet('{elsewhere}')", "SELECT * FROM read_csv('/etc/passwd')",
                    f"SELECT * FROM read_parquet('{segment_dir(path)}/../elsewhere.parquet')",
                    "SET enable_external_access = true"):
            with pytest.raises(StoreError):
                store.select(sql)


def test_a_moved_store_reads_its_segments_where_they_now_are(
    tmp_path: Path, mixed_log: Path, serial: dict[str, list[Any]]
) -> None:
    path = tmp_path / "a" / "store.duckdb"
    path.parent.mkdir()
    _ingest(path, mixed_log, segments=True)
    moved = tmp_path / "b"
    shutil.move(path.parent, moved)
    assert _tables(moved / "store.duckdb") == serial


def test_an_in_memory_store_has_no_segments() -> None:
    line = b"081109 203615 148 INFO dfs.DataNode: PacketResponder 1 terminating\n"
    with (Store(":memory:") as store, log_stream(io.BytesIO(line), "x") as stream,
          pytest.raises(StoreError, match="segments")):
        ingest_stream(store, stream, HDFS, segments=True)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_LINES, min_size=1, max_size=60), chunk_bytes=st.integers(1, 3000))
def test_segments_and_the_table_store_every_line_alike(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], chunk_bytes: int
) -> None:
    folder = tmp_path_factory.mktemp("alike")
    log = folder / "x.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    stores = []
    for segments in (False, True):
        path = folder / f"{segments}.duckdb"
        with Store(path) as store, log_stream(log.open("rb"), "x") as stream:
            ingest_stream(store, stream, HDFS, chunk_bytes=chunk_bytes, segments=segments)
        stores.append(_tables(path))
    assert stores[0] == stores[1]


def test_a_store_whose_segments_are_gone_or_broken_says_so(tmp_path: Path, mixed_log: Path) -> None:
    path = tmp_path / "broken.duckdb"
    _ingest(path, mixed_log, segments=True)
    first, second = sorted(segment_dir(path).iterdir())[:2]  # type: ignore[union-attr]
    first.write_bytes(b"PAR1 not a parquet file")
    with pytest.raises(StoreError, match=r"segment seg-0+1\.parquet in .* is 23 bytes, registered as"):
        Store(path, read_only=True)
    second.unlink()
    with pytest.raises(StoreError, match=r"1 of its \d+ segments are missing .*seg-0+2"):
        Store(path, read_only=True)


def test_segments_give_a_year_to_timestamps_without_one_as_the_table_does(
    tmp_path: Path, loghub: Path
) -> None:
    # OpenSSH's syslog times have no year: --year gives them one, in both forms alike
    log = loghub / "OpenSSH" / "OpenSSH_2k.log"
    stores = []
    for segments in (False, True):
        path = tmp_path / f"{segments}.duckdb"
        with Store(path) as store, log_stream(log.open("rb"), "ssh") as stream:
            ingest_stream(store, stream, PRESETS["openssh"], chunk_bytes=50_000, year=2026,
                          segments=segments)
        stores.append(_tables(path))
        assert _segments(path) if segments else not _segments(path)
    table, segmented = stores
    assert {row[3].year for row in segmented["ops_lines"]} == {2026}
    assert table == segmented


def _registered_store(tmp_path: Path, mixed_log: Path) -> tuple[Path, list[Path]]:
    path = tmp_path / "store.duckdb"
    _ingest(path, mixed_log, segments=True)
    return path, sorted(segment_dir(path).iterdir())  # type: ignore[union-attr]


def _swap(a: Path, b: Path) -> None:
    parked = a.with_name("parked")
    a.rename(parked)
    b.rename(a)
    parked.rename(b)


def test_a_segment_replaced_by_a_link_to_another_is_refused_naming_it(
    tmp_path: Path, mixed_log: Path
) -> None:
    path, files = _registered_store(tmp_path, mixed_log)
    files[1].unlink()
    files[1].symlink_to(files[2].name)  # a link to a registered segment, read twice otherwise
    with pytest.raises(StoreError, match=rf"segment {files[1].name} in .* is a symbolic link"):
        Store(path, read_only=True)
    files[1].unlink()
    files[1].symlink_to(tmp_path / "elsewhere.parquet")  # dangling, outside the folder
    with pytest.raises(StoreError, match=rf"segment {files[1].name} in .* is a symbolic link"):
        Store(path, read_only=True)


@pytest.mark.parametrize("change", ["swap", "same-size-rewrite"])
def test_segments_swapped_or_rewritten_are_refused_and_compaction_stores_nothing(
    tmp_path: Path, mixed_log: Path, change: str
) -> None:
    path, files = _registered_store(tmp_path, mixed_log)
    with Store(path, read_only=True) as store:
        lines_before = store.query("SELECT count(*), count(DISTINCT template_id) FROM ops_lines")[1]
    writer = Store(path)  # opened while the segments were right: compact checks them again
    if change == "swap":
        _swap(files[0], files[1])
        culprit = files[0]
    else:
        data = bytearray(files[3].read_bytes())
        data[len(data) // 2] ^= 0x01
        files[3].write_bytes(bytes(data))
        culprit = files[3]
    message = rf"segment {culprit.name} in .* (has other contents|is \d+ bytes, registered)"
    with writer, pytest.raises(StoreError, match=message):
        compact(writer)
    with pytest.raises(StoreError, match=message):
        Store(path, read_only=True)
    if change == "swap":
        _swap(files[0], files[1])  # put back: the store reads as before, nothing was compacted
    else:
        data[len(data) // 2] ^= 0x01
        files[3].write_bytes(bytes(data))
    with Store(path, read_only=True) as store:
        assert store.query("SELECT count(*), count(DISTINCT template_id) FROM ops_lines")[1] == lines_before
        assert store.query("SELECT count(*) FROM ops_segments")[1] == [(len(files),)]


def test_a_store_from_before_segment_identities_gets_them_on_its_next_write(
    tmp_path: Path, mixed_log: Path
) -> None:
    path, files = _registered_store(tmp_path, mixed_log)
    with Store(path) as store:
        store.connection.execute("UPDATE ops_segments SET size_bytes = NULL, sha256 = NULL")
    with Store(path) as store:
        from cloudtwin.store.ops_tables import ensure_ops_schema

        ensure_ops_schema(store)
        rows = store.query("SELECT file, size_bytes, sha256 FROM ops_segments ORDER BY file")[1]
    assert [(f, s) for f, s, _ in rows] == [(p.name, p.stat().st_size) for p in files]
    _swap(files[0], files[1])
    with pytest.raises(StoreError, match=files[0].name):
        Store(path, read_only=True)
