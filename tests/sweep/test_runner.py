"""The driver: stored points are skipped, results are stored once whatever the executor,
a killed worker loses nothing, short points are batched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cloudtwin.store.database import Store
from cloudtwin.sweep import Plan, PoolExecutor, SerialExecutor, Task, parse_vary, run_points
from cloudtwin.sweep.executors import run_batch

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


class Instant(Task):
    """A task whose points cost nothing to run (what is tested is around them)."""

    def __call__(self, overrides: Sequence[str]) -> dict[str, Any]:
        return {"aggregate_gbps": 1.0}


class FixedCost(SerialExecutor):
    """Runs points in this process but reports each as taking `seconds`, so that batching,
    which follows the measured time per point, does not depend on the machine's load."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.sizes: list[int] = []

    def submit(self, handle: int, payload: Any) -> None:
        super().submit(handle, payload)
        self.sizes.append(len(payload))
        handle, outcomes = self._done[-1]
        self._done[-1] = (handle, [replace(o, seconds=self.seconds) for o in outcomes])


@pytest.mark.parametrize(
    ("seconds", "sizes"),
    [
        # the first two batches (the window of one worker) go before any time is known;
        # then 1 ms a point, 0.1 s a batch: 100 wanted, but never more than the 58 queued
        (0.001, [1, 1, 58]),
        # 40 ms a point: 0.1 / 0.04 = 2.5, so batches of 2 (the estimate stays 40 ms)
        (0.04, [1, 1] + [2] * 29),
        # points longer than a batch run one at a time
        (0.5, [1] * 60),
    ],
)
def test_short_points_are_batched(tmp_path: Path, seconds: float, sizes: list[int]) -> None:
    task, executor = Instant(SMALL, "small.yaml", "run"), FixedCost(seconds)
    with Store(tmp_path / "s.duckdb") as store:
        run = run_points(plan("seed=1..60").points(task.digest), task, store, executor, "small",
                         target_batch_s=0.1)
    assert run.executed == 60 and run.batches == len(sizes)
    assert executor.sizes == sizes


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


class OutOfMemory(Task):
    """A task whose point asks for more memory than the machine has."""

    def __call__(self, overrides: Sequence[str]) -> dict[str, Any]:
        raise MemoryError("Unable to allocate 224. GiB for an array")


def test_a_point_out_of_memory_is_an_error_naming_limits_memory() -> None:
    (outcome,) = run_batch(OutOfMemory(SMALL, "small.yaml", "run"), [("seed=1",)])
    assert outcome.status == "error" and outcome.result is None
    assert (outcome.error or "").startswith("limits.memory: the point ran out of memory (Unable to allocate")


def test_an_error_in_the_driver_stops_the_workers(tmp_path: Path) -> None:
    task, executor = small_task(), PoolExecutor(2)
    seen: list[int] = []

    def fail(done: int, total: int) -> None:
        seen.extend(executor.worker_pids())
        if done:
            raise MemoryError("the driver ran out of memory")

    with Store(tmp_path / "s.duckdb") as store, pytest.raises(MemoryError):
        run_points(plan("seed=1..6").points(task.digest), task, store, executor, "small", progress=fail)
    assert seen and not [pid for pid in set(seen) if _alive(pid)]


DRIVER = """
import math, sys
from cloudtwin.sweep.executors import PoolExecutor
pool = PoolExecutor(1, preload=())
pool.start(math.factorial)
pool.submit(1, 10**7)  # minutes in one call into C: the worker's watch thread cannot run
while not pool.worker_pids():
    pass
print(pool.worker_pids()[0], flush=True)
sys.stdin.read()
"""


def _alive(pid: int) -> bool:
    """Whether a process runs (a zombie nobody reaped has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_a_killed_driver_leaves_no_worker_computing() -> None:
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    assert driver.stdout is not None
    worker = int(driver.stdout.readline())
    try:
        while _alive(worker) and _cpu_ticks(worker) < 20:  # inside the long call
            pass
        driver.kill()
        driver.wait()
        deadline = time.monotonic() + 60  # a bound on the wait, not a measured duration
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(worker), "the worker outlived its driver"
    finally:
        if _alive(worker):
            os.kill(worker, signal.SIGKILL)
