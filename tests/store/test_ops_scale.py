"""Tests of chunked, columnar, scaled-out log ingest: every executor gives the same store,
a dead worker's chunk is mined again, chunk size never changes what a line is stored as,
and stores whose parameters were rows of their own keep them."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.store.test_ops_ingest import _generated_log

from cloudtwin.ops import PRESETS, log_stream
from cloudtwin.ops.chunks import Chunk
from cloudtwin.ops.columnar import ChunkMiner, MinedChunk
from cloudtwin.ops.executors import mine_in_order
from cloudtwin.store import Store, ingest_stream
from cloudtwin.store.ops_tables import ensure_ops_schema
from cloudtwin.sweep import PoolExecutor

HDFS = PRESETS["hdfs"]
TABLES = ("ops_lines", "ops_params", "ops_templates", "ops_unparsed", "ops_miner_cache")
PRELOAD = ("cloudtwin.ops.columnar",)


def _tables(path: Path) -> dict[str, list[Any]]:
    """Every table as a reader sees it (a pool's lines are segments, read as ops_lines)."""
    with Store(path, read_only=True) as store:
        con = store.connection
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in TABLES}


def _ingest(path: Path, log: Path, executor: Any = None, chunk_bytes: int = 40_000) -> None:
    with Store(path) as store, log_stream(log.open("rb"), "the-log") as stream:
        ingest_stream(store, stream, HDFS, chunk_bytes=chunk_bytes, executor=executor)


@pytest.fixture(scope="module")
def mixed_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6,000 HDFS-style lines from four templates with malformed lines: about 15 chunks."""
    path = tmp_path_factory.mktemp("logs") / "mixed.log"
    _generated_log(path, 6000)
    return path


def test_serial_and_a_process_pool_give_identical_stores(tmp_path: Path, mixed_log: Path) -> None:
    _ingest(tmp_path / "serial.duckdb", mixed_log)
    _ingest(tmp_path / "pool.duckdb", mixed_log, PoolExecutor(2, PRELOAD))
    serial = _tables(tmp_path / "serial.duckdb")
    assert len(serial["ops_lines"]) + len(serial["ops_unparsed"]) == 6000
    assert len(serial["ops_params"]) > 6000
    assert serial == _tables(tmp_path / "pool.duckdb")


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="the ray extra is not installed")
def test_a_local_ray_cluster_gives_the_same_store_as_serial(tmp_path: Path, mixed_log: Path) -> None:
    from cloudtwin.sweep.ray_executor import RayExecutor

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    _ingest(tmp_path / "serial.duckdb", mixed_log)
    _ingest(tmp_path / "ray.duckdb", mixed_log, RayExecutor(None, 2))
    assert _tables(tmp_path / "serial.duckdb") == _tables(tmp_path / "ray.duckdb")


class DiesOnce:
    """A chunk job whose worker process dies the first time it meets chunk 3."""

    def __init__(self, job: ChunkMiner, marker: Path) -> None:
        self.job = job
        self.marker = marker

    def __call__(self, chunk: Chunk) -> MinedChunk:
        if chunk.index == 3 and not self.marker.exists():
            self.marker.write_text("died")
            os._exit(9)
        return self.job(chunk)


def test_a_chunk_whose_worker_died_is_mined_again_and_stored_once(
    tmp_path: Path, mixed_log: Path
) -> None:
    from cloudtwin.ops.chunks import read_chunks
    from cloudtwin.ops.miner import TemplateMiner

    miner = TemplateMiner(HDFS.miner_config())
    job = ChunkMiner(HDFS.format, miner.snapshot())
    with mixed_log.open("rb") as raw:
        plain = [m.end_offset for m in mine_in_order(job, read_chunks(raw, "x", chunk_bytes=40_000))]
    dies = DiesOnce(job, tmp_path / "marker")
    with mixed_log.open("rb") as raw:
        chunks = read_chunks(raw, "x", chunk_bytes=40_000)
        retried = [m.end_offset for m in mine_in_order(dies, chunks, PoolExecutor(2, PRELOAD))]
    assert (tmp_path / "marker").read_text() == "died"
    assert retried == plain
    assert len(plain) > 5


_LINES = st.sampled_from([
    "081109 203615 148 INFO dfs.DataNode: PacketResponder 1 for block blk_38 terminating",
    "081109 203807 222 INFO dfs.DataNode: Receiving block blk_-16 src: /10.0.0.1:50010 dest: "
    "/10.0.0.2:50010",
    "081109 204005 35 INFO dfs.FSNamesystem: BLOCK* NameSystem.addStoredBlock: blockMap "
    "updated: 10.251.73.220:50010 is added to blk_71 size 67108864",
    "not a header at all",
    "",
    "   ",
    "081109 203615 148 INFO dfs.DataNode:   ",
    "081109 203615 148 INFO dfs.DataNode: caf\u00e9 \u00fcber  two  spaces\tand a tab",
])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_LINES, min_size=1, max_size=60), chunk_bytes=st.integers(1, 3000),
       crlf=st.booleans(), last_newline=st.booleans())
def test_chunk_size_never_changes_what_a_line_is_stored_as(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], chunk_bytes: int, crlf: bool,
    last_newline: bool,
) -> None:
    folder = tmp_path_factory.mktemp("chunks")
    end = "\r\n" if crlf else "\n"
    log = folder / "x.log"
    data = (end.join(lines) + (end if last_newline else "")).encode()
    log.write_bytes(data)
    starts = [0] + [i + 1 for i, byte in enumerate(data) if byte == 10]
    if starts[-1] == len(data):  # the last line ends with its newline
        starts.pop()
    stored = {}
    for size in (chunk_bytes, 1 << 22):
        db = folder / f"{size}.duckdb"
        _ingest(db, log, chunk_bytes=size)
        with duckdb.connect(str(db), read_only=True) as con:
            stored[size] = (
                con.execute("SELECT byte_offset, line, ts, level, component, content FROM ops_lines "
                            "ORDER BY line").fetchall(),
                con.execute("SELECT byte_offset, line, text, reason FROM ops_unparsed "
                            "ORDER BY line").fetchall(),
                con.execute("SELECT next_offset, next_line FROM ops_sources").fetchall(),
            )
    assert stored[chunk_bytes] == stored[1 << 22]
    kept, bad, marker = stored[1 << 22]
    assert sorted(r[1] for r in kept + bad) == list(range(1, len(starts) + 1))
    assert sorted(r[0] for r in kept + bad) == starts
    assert marker == [(len(data), len(starts) + 1)]


def test_parameters_kept_as_rows_move_into_the_lines(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    with duckdb.connect(str(db)) as con:  # a store written before parameters were a list
        con.execute("CREATE TABLE schema_version (component VARCHAR PRIMARY KEY, version INTEGER)")
        con.execute("INSERT INTO schema_version VALUES ('ops', 1)")
        con.execute("""CREATE TABLE ops_lines (source_id INTEGER NOT NULL, byte_offset BIGINT NOT NULL,
            line BIGINT NOT NULL, ts TIMESTAMP, level VARCHAR, component VARCHAR,
            template_id INTEGER NOT NULL, content VARCHAR NOT NULL)""")
        con.execute("""CREATE TABLE ops_params (source_id INTEGER NOT NULL, byte_offset BIGINT NOT NULL,
            position SMALLINT NOT NULL, value VARCHAR NOT NULL)""")
        con.execute("""CREATE TABLE ops_sources (source_id INTEGER PRIMARY KEY, source VARCHAR NOT NULL
            UNIQUE, format VARCHAR, fingerprint VARCHAR, fingerprint_bytes BIGINT,
            next_offset BIGINT NOT NULL, next_line BIGINT NOT NULL, lines BIGINT NOT NULL,
            unparsed BIGINT NOT NULL, updated_at TIMESTAMP)""")
        con.execute("INSERT INTO ops_lines VALUES (1, 0, 1, NULL, NULL, NULL, 1, 'port 7 up fast'),"
                    " (1, 15, 2, NULL, NULL, NULL, 2, 'fan ok')")
        con.execute("INSERT INTO ops_params VALUES (1, 0, 1, 'fast'), (1, 0, 0, '7')")
    with Store(db) as store:
        ensure_ops_schema(store)
        params = store.query("SELECT byte_offset, params FROM ops_lines ORDER BY 1")[1]
        rows = store.query("SELECT * FROM ops_params ORDER BY byte_offset, position")[1]
    assert params == [(0, ["7", "fast"]), (15, None)]
    assert rows == [(1, 0, 0, "7"), (1, 0, 1, "fast")]


@pytest.mark.parametrize(
    "system", ["HDFS", "Hadoop", "Spark", "Zookeeper", "BGL", "OpenSSH", "Apache", "Linux"]
)
def test_chunks_mined_apart_group_lines_about_as_well_as_one_pass(
    loghub: Path, system: str
) -> None:
    """Thirty chunks of 10 kB, each mined from the same snapshot and merged in order, lose
    no grouping accuracy against one pass over the whole Loghub-2k file (measured: equal
    on all eight; the groups themselves differ on Hadoop and BGL)."""
    import csv

    from cloudtwin.ops import grouping_accuracy

    log = loghub / system / f"{system}_2k.log"
    with (loghub / system / f"{system}_2k.log_structured.csv").open(encoding="utf-8") as handle:
        truth = [row["EventId"] for row in csv.DictReader(handle)]
    scores = []
    for chunk_bytes in (10_000, 1 << 22):
        with Store(":memory:") as store, log_stream(log.open("rb"), system) as stream:
            ingest_stream(store, stream, PRESETS[system.lower()], chunk_bytes=chunk_bytes)
            ids = [r[0] for r in store.query("SELECT template_id FROM ops_lines ORDER BY line")[1]]
        assert len(ids) == 2000
        scores.append(grouping_accuracy(truth, ids))
    assert scores[0] >= scores[1] - 0.002


def test_commits_of_one_chunk_or_of_many_give_the_same_store(tmp_path: Path, mixed_log: Path) -> None:
    # a transaction takes whole chunks until it holds commit_lines lines; the progress
    # hook hears of each commit, and the bytes it is told of cover the log once
    stores = {}
    for commit_lines in (1, 2500, 10**9):
        path, covered = tmp_path / f"{commit_lines}.duckdb", []
        with Store(path) as store, log_stream(mixed_log.open("rb"), "the-log") as stream:
            ingest_stream(store, stream, HDFS, chunk_bytes=40_000, commit_lines=commit_lines,
                          progress=covered.append)
        assert sum(covered) == mixed_log.stat().st_size
        stores[commit_lines] = (_tables(path), len(covered))
    (one, commits_1), (some, commits_some), (all_, commits_all) = stores.values()
    assert one == some == all_
    assert commits_1 > commits_some > commits_all == 1


def test_a_failed_commit_stores_nothing_of_its_chunks(
    tmp_path: Path, mixed_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the third chunk's append fails: the commit holding it is rolled back whole and the
    # marker stays after the last commit, so the next ingest stores exactly the rest
    from cloudtwin.store import ops_tables

    append, calls = ops_tables._append_lines, []

    def failing(*args: Any) -> None:
        calls.append(1)
        if len(calls) == 3:
            raise duckdb.IOException("disk full")
        append(*args)

    path = tmp_path / "failed.duckdb"
    monkeypatch.setattr(ops_tables, "_append_lines", failing)
    with Store(path) as store, log_stream(mixed_log.open("rb"), "the-log") as stream:
        with pytest.raises(duckdb.IOException):
            ingest_stream(store, stream, HDFS, chunk_bytes=40_000, commit_lines=500)
        [(stored, marked)] = store.query(
            "SELECT (SELECT count(*) FROM ops_lines) + (SELECT count(*) FROM ops_unparsed), "
            "(SELECT lines + unparsed FROM ops_sources)"
        )[1]
        assert 0 < stored == marked < 6000
    monkeypatch.setattr(ops_tables, "_append_lines", append)
    _ingest(path, mixed_log)
    _ingest(tmp_path / "clean.duckdb", mixed_log)
    assert _tables(path) == _tables(tmp_path / "clean.duckdb")


def test_an_ingest_reports_where_its_cpu_went(tmp_path: Path, mixed_log: Path) -> None:
    from cloudtwin.store.ops_ingest import IngestCpu

    meters = {}
    for name, executor in (("serial", None), ("pool", PoolExecutor(2, PRELOAD))):
        meter = IngestCpu()
        with Store(tmp_path / f"{name}.duckdb") as store, log_stream(mixed_log.open("rb"), "x") as log:
            summary = ingest_stream(store, log, HDFS, chunk_bytes=40_000, executor=executor, cpu=meter)
        assert meter.lines == summary.lines + summary.unparsed == 6000
        assert min(meter.mine_s, meter.driver_s, meter.writer_s) >= 0.0
        meters[name] = meter.mined_in
    assert meters == {"serial": "process", "pool": "workers"}
