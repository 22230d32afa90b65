"""The read snapshot and the job queue on their own."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

from cloudtwin.service.jobs import JobQueue, JobState
from cloudtwin.service.snapshot import Snapshots

HOLD = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("INSERT INTO t VALUES (2), (3)")
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _count(snapshots: Snapshots) -> int:
    with snapshots.store() as store:
        return int(store.query("SELECT count(*) FROM t")[1][0][0])


def test_a_writer_holding_the_file_leaves_reads_on_the_last_copy(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t (x INTEGER)")
        con.execute("INSERT INTO t VALUES (1)")
    snapshots = Snapshots(db, tmp_path, interval_s=0.0)
    assert snapshots.refresh() and _count(snapshots) == 1
    # the service holds no lock on the store: a writer opens it at once
    writer = subprocess.Popen([sys.executable, "-c", HOLD, str(db), "2"], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "holding"
        assert snapshots.refresh() is False  # the writer holds it: try again later
        assert _count(snapshots) == 1
    finally:
        writer.wait(timeout=30)
    assert snapshots.refresh() and _count(snapshots) == 3
    assert snapshots.refreshes == 2 and snapshots.busy >= 1
    snapshots.close()
    assert not list(tmp_path.glob("snapshot-*"))  # every copy deleted once unused


def test_a_request_in_flight_keeps_its_copy(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    snapshots = Snapshots(db, tmp_path, interval_s=0.0)
    snapshots.refresh()
    with snapshots.store() as old:
        with duckdb.connect(str(db)) as con:
            con.execute("INSERT INTO t VALUES (7)")
        snapshots.refresh()
        assert old.query("SELECT count(*) FROM t")[1][0][0] == 0
        assert len(list(tmp_path.glob("snapshot-*.duckdb"))) == 2
    assert _count(snapshots) == 1
    assert len(list(tmp_path.glob("snapshot-*.duckdb"))) == 1
    snapshots.close()


def test_jobs_run_in_order_report_progress_and_cancel() -> None:
    order: list[str] = []
    gate = threading.Event()
    seen: list[float] = []
    queue = JobQueue()

    def first(progress):  # type: ignore[no-untyped-def]
        gate.wait(10)
        progress("a", 1, 2)
        seen.append(job.fraction)  # half of the first of two stages
        progress("b", 0, 4)
        seen.append(job.fraction)
        order.append("first")
        return {"ok": 1}

    job = queue.submit("test", "s", ["a", "b"], first)
    waiting = queue.submit("test", "s", ["a"], lambda progress: order.append("second") or {})
    queue.cancel(waiting)
    assert waiting.state == JobState.CANCELLED
    gate.set()
    assert queue.wait(job, 10)
    assert seen == [0.25, 0.5] and job.result == {"ok": 1} and job.fraction == 1.0
    time.sleep(0.1)
    assert order == ["first"]  # the cancelled job never ran
    queue.close()


def test_a_running_job_stops_at_its_next_report_and_a_failing_one_says_why() -> None:
    queue = JobQueue()
    started = threading.Event()

    def endless(progress):  # type: ignore[no-untyped-def]
        started.set()
        for i in range(10_000):
            progress("loop", i, 10_000)
            time.sleep(0.001)
        return {}

    job = queue.submit("test", "s", ["loop"], endless)
    started.wait(10)
    queue.cancel(job)
    assert queue.wait(job, 10) and job.state == JobState.CANCELLED and job.result is None
    broken = queue.submit("test", "s", ["x"], lambda progress: 1 / 0)
    assert queue.wait(broken, 10) and broken.state == JobState.FAILED
    assert broken.error == "internal error: ZeroDivisionError: division by zero"
    queue.close()


def test_a_job_of_this_process_writing_the_store_leaves_reads_on_the_last_copy(tmp_path: Path) -> None:
    """The service's own job holds the file read-write: a refresh waits instead of failing."""
    db = tmp_path / "s.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t (x INTEGER)")
        con.execute("INSERT INTO t VALUES (1)")
    snapshots = Snapshots(db, tmp_path, interval_s=0.0)
    assert snapshots.refresh()
    with duckdb.connect(str(db)) as writing:
        writing.execute("INSERT INTO t VALUES (2)")
        assert not snapshots.refresh()
        assert _count(snapshots) == 1
    assert snapshots.refresh() and _count(snapshots) == 2
    snapshots.close()


def test_a_job_past_its_deadline_fails_at_its_next_report() -> None:
    queue = JobQueue()
    reports = []

    def work(progress: Callable[[str, int, int], None]) -> dict[str, object]:
        while True:
            time.sleep(0.01)
            progress("step", len(reports), 0)
            reports.append(1)

    job = queue.submit("test", "x", ["step"], work, deadline_s=0.0)
    assert queue.wait(job, 60)
    assert job.state == JobState.FAILED and job.error is not None
    assert job.error.startswith("deadline: the job ran longer than its 0 s")
    queue.close()


def test_a_copy_reads_the_segments_of_its_moment_after_the_store_compacts(tmp_path: Path) -> None:
    # a pool's lines are segments beside the store: the copy gets links to them, so a
    # request keeps reading them after `logs compact` deleted the store's, and a
    # released copy leaves no folder behind
    from tests.store.test_ops_ingest import _generated_log

    from cloudtwin.ops import PRESETS, log_stream
    from cloudtwin.store import Store, ingest_stream
    from cloudtwin.store.ops_segments import compact

    log, db = tmp_path / "x.log", tmp_path / "store" / "s.duckdb"
    db.parent.mkdir()
    _generated_log(log, 3000)
    with Store(db) as store, log_stream(log.open("rb"), "x") as stream:
        lines = ingest_stream(store, stream, PRESETS["hdfs"], chunk_bytes=40_000, segments=True).lines
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    snapshots = Snapshots(db, snaps, interval_s=0.0)
    assert snapshots.refresh()
    with snapshots.store() as store:
        with Store(db) as writer:
            assert compact(writer).segments > 2
        assert not list(Path(str(db) + ".segments").glob("*.parquet"))
        assert store.query("SELECT count(*) FROM ops_lines")[1] == [(lines,)]
        snapshots.refresh()
    with snapshots.store() as store:  # the new copy: the lines are in the table now
        assert store.query("SELECT count(*) FROM ops_lines")[1] == [(lines,)]
    snapshots.close()
    assert not list(snaps.iterdir())


def test_a_request_reads_the_copy_and_nothing_outside_it(tmp_path: Path) -> None:
    import pytest

    outside = tmp_path / "outside.csv"
    outside.write_text("secret\n1\n")
    db = tmp_path / "s.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    snapshots = Snapshots(db, tmp_path, interval_s=0.0)
    # before the first copy: the empty snapshot
    with snapshots.store() as store, pytest.raises(duckdb.Error, match="disabled|Permission"):
        store.connection.execute(f"SELECT * FROM read_csv('{outside}')").fetchall()
    assert snapshots.refresh() and _count(snapshots) == 0
    with snapshots.store() as store:
        with pytest.raises(duckdb.Error, match="disabled|Permission"):
            store.connection.execute(f"SELECT * FROM read_csv('{outside}')").fetchall()
        with pytest.raises(duckdb.Error, match="disabled|Permission"):
            store.connection.execute(f"COPY t TO '{tmp_path / 'out.csv'}'").fetchall()
    assert not (tmp_path / "out.csv").exists()
    snapshots.close()
