"""The driver: stored points are skipped, results are stored once whatever the executor,
a killed worker loses nothing, short points are batched."""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cloudtwin.store.database import Store
from cloudtwin.sweep import Plan, PoolExecutor, SerialExecutor, Task, parse_vary, run_points

SMALL = """name: small
fabric: {kind: leaf-spine, leaves: 4, spines: 2, hosts_per_leaf: 2}
workload: {kind: perftest, pattern: permutation, size: 1MiB}
"""


def small_task(command: str = "run") -> Task:
    return Task(SMALL, "small.yaml", command)


def plan(*varies: str) -> Plan:
    return Plan(tuple(parse_vary(v) for v in varies))


def stored(db: Path) -> list[tuple[Any, ...]]:
    with Store(db, read_only=True) as store:
        return store.query(
            "SELECT point_key, task_digest, scenario, command, overrides, version, status, result, error "
            "FROM sweep_points ORDER BY point_key"
        )[1]


def test_serial_and_pool_store_identical_results(tmp_path: Path) -> None:
    task, p = small_task(), plan("seed=1..6", "routing.strategy=ecmp,pinning")
    points = p.points(task.digest)
    for name, executor in (("serial", SerialExecutor()), ("pool", PoolExecutor(2))):
        with Store(tmp_path / f"{name}.duckdb") as store:
            run = run_points(points, task, store, executor, "small")
        assert (run.executed, run.skipped, run.failed, run.crashed) == (12, 0, 0, 0)
    serial, pool = stored(tmp_path / "serial.duckdb"), stored(tmp_path / "pool.duckdb")
    assert len(serial) == 12 and serial == pool
    assert {row[6] for row in serial} == {"ok"}


def test_a_rerun_runs_only_the_points_not_stored(tmp_path: Path) -> None:
    task = small_task()
    db = tmp_path / "s.duckdb"
    with Store(db) as store:
        first = run_points(plan("seed=1..6").points(task.digest), task, store, SerialExecutor(), "small")
        more = run_points(plan("seed=1..10").points(task.digest), task, store, SerialExecutor(), "small")
        again = run_points(plan("seed=1..10").points(task.digest), task, store, SerialExecutor(), "small")
    assert (first.executed, more.skipped, more.executed, again.executed) == (6, 6, 4, 0)
    assert len(stored(db)) == 10


def test_a_changed_scenario_is_a_different_point(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    other = Task(SMALL.replace("1MiB", "2MiB"), "small.yaml", "run")
    with Store(db) as store:
        run_points(plan("seed=1..3").points(small_task().digest), small_task(), store, SerialExecutor(), "s")
        run = run_points(plan("seed=1..3").points(other.digest), other, store, SerialExecutor(), "s")
    assert run.executed == 3 and len(stored(db)) == 6


def test_a_point_that_fails_is_stored_with_its_error_and_not_rerun(tmp_path: Path) -> None:
    task, db = small_task(), tmp_path / "s.duckdb"
    points = plan("fabric.spines=2,0").points(task.digest)
    with Store(db) as store:
        run = run_points(points, task, store, SerialExecutor(), "small")
        again = run_points(points, task, store, SerialExecutor(), "small")
    assert (run.executed, run.failed, again.executed) == (2, 1, 0)
    assert "fabric.spines=0" in (run.first_error or "") and "spines" in (run.first_error or "")
    statuses = sorted(row[6] for row in stored(db))
    assert statuses == ["error", "ok"]


class Crashing(Task):
    """A task with a bug at seed 2 (an exception that is not a CloudtwinError)."""

    def __call__(self, overrides: Sequence[str]) -> dict[str, Any]:
        if "seed=2" in overrides:
            raise ZeroDivisionError("a bug")
        return super().__call__(overrides)


def test_a_crash_is_reported_not_stored_and_retried_next_run(tmp_path: Path) -> None:
    task, db = Crashing(SMALL, "small.yaml", "run"), tmp_path / "s.duckdb"
    points = plan("seed=1..3").points(task.digest)
    with Store(db) as store:
        run = run_points(points, task, store, SerialExecutor(), "small")
        again = run_points(points, task, store, SerialExecutor(), "small")
    assert (run.executed, run.crashed, again.executed) == (3, 1, 1)
    assert "ZeroDivisionError: a bug" in (run.first_error or "")
    assert len(stored(db)) == 2


def test_short_points_are_batched(tmp_path: Path) -> None:
    task = small_task()
    with Store(tmp_path / "s.duckdb") as store:
        run = run_points(plan("seed=1..60").points(task.digest), task, store, SerialExecutor(), "small")
    assert run.executed == 60
    assert run.batches < 30


def test_a_killed_worker_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    task, db = small_task("compare"), tmp_path / "s.duckdb"
    points = plan("seed=1..30").points(task.digest)
    executor = PoolExecutor(2)
    killed: list[int] = []

    def kill_one(done: int, total: int) -> None:
        if done > 0 and not killed and executor.worker_pids():
            killed.append(executor.worker_pids()[0])
            os.kill(killed[0], signal.SIGKILL)

    with Store(db) as store:
        run = run_points(points, task, store, executor, "small", progress=kill_one, target_batch_s=0.5)
    assert killed, "no worker was killed"
    assert (run.executed, run.crashed, run.failed) == (30, 0, 0)
    rows = stored(db)
    assert len(rows) == 30 and {r[0] for r in rows} == {p.key for p in points}


@pytest.mark.parametrize("workers", [1, 2])
def test_the_pool_stops_its_workers(tmp_path: Path, workers: int) -> None:
    task = small_task()
    executor = PoolExecutor(workers)
    seen: list[int] = []
    with Store(tmp_path / "s.duckdb") as store:
        run_points(plan("seed=1..4").points(task.digest), task, store, executor, "small",
                   progress=lambda d, t: seen.extend(executor.worker_pids()))
    for pid in set(seen):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
