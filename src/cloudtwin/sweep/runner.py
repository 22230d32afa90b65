"""The driver of a sweep: skip stored points, batch the rest, stream results into the store.

The driver is the one process that writes the store. It writes each result as it
comes back, grouping the results that arrive within `flush_s` of each other into one
transaction, so a killed driver loses at most the points still running (and those of
the last `flush_s`), which the next run computes again. Stored points are keyed, so
nothing is ever stored twice.

Points shorter than `target_batch_s` are batched: the batch size follows the measured
time per point so that each batch takes about `target_batch_s`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cloudtwin import __version__
from cloudtwin.store.database import Store
from cloudtwin.store.sweeps import PointRecord, ensure_sweeps_schema, finished_keys, save_points
from cloudtwin.sweep.executors import Executor, Outcome, points_job
from cloudtwin.sweep.points import Point
from cloudtwin.sweep.task import Task

__all__ = ["MAX_ATTEMPTS", "Progress", "SweepRun", "run_points"]

#: A point whose worker died this many times is given up (reported, not stored).
MAX_ATTEMPTS = 3
#: Largest batch, whatever the points' duration.
MAX_BATCH = 1000

#: Called with (points executed so far, points to execute).
Progress = Callable[[int, int], None]


@dataclass
class SweepRun:
    """What a run of a sweep did."""

    points: int
    skipped: int
    executed: int = 0
    failed: int = 0
    crashed: int = 0
    first_error: str | None = None
    seconds: float = 0.0
    first_result_s: float | None = None
    batches: int = 0
    interrupted: bool = False
    #: The points that crashed in this run (not stored, so not in the store's errors):
    #: each one's overrides and message.
    crashes: list[tuple[tuple[str, ...], str]] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """`{"points", "skipped", "executed", "failed", "crashed", "first_error", "seconds", "batches",
        "interrupted"}`."""
        return {
            "points": self.points,
            "skipped": self.skipped,
            "executed": self.executed,
            "failed": self.failed,
            "crashed": self.crashed,
            "first_error": self.first_error,
            "seconds": self.seconds,
            "batches": self.batches,
            "interrupted": self.interrupted,
        }


class _Batcher:
    """Batch sizes that follow the measured seconds per point."""

    def __init__(self, target_s: float, workers: int) -> None:
        self.target_s = target_s
        self.workers = workers
        self.per_point_s: float | None = None

    def observe(self, outcomes: Sequence[Outcome]) -> None:
        mean = sum(o.seconds for o in outcomes) / len(outcomes)
        self.per_point_s = mean if self.per_point_s is None else 0.7 * self.per_point_s + 0.3 * mean

    def size(self, queued: int) -> int:
        if self.per_point_s is None or self.target_s <= 0:
            return 1
        wanted = int(self.target_s / max(self.per_point_s, 1e-7))
        fair = -(-queued // self.workers)  # never leave a worker without its share of the tail
        return max(1, min(wanted, fair, MAX_BATCH))


class _Writer:
    """Buffers finished points and writes them in one transaction per `flush_s`."""

    def __init__(self, store: Store, task: Task, scenario: str, flush_s: float) -> None:
        self.store, self.task, self.scenario, self.flush_s = store, task, scenario, flush_s
        self.buffer: list[PointRecord] = []
        self.last = 0.0

    def add(self, record: PointRecord) -> None:
        self.buffer.append(record)

    def flush(self, force: bool = False) -> None:
        if not self.buffer or (not force and time.monotonic() - self.last < self.flush_s):
            return
        save_points(
            self.store, self.buffer, self.task.digest, self.scenario, self.task.command, __version__
        )
        self.buffer = []
        self.last = time.monotonic()


def run_points(
    points: Sequence[Point],
    task: Task,
    store: Store,
    executor: Executor,
    scenario: str,
    progress: Progress | None = None,
    target_batch_s: float = 0.1,
    flush_s: float = 0.1,
    should_stop: Callable[[], bool] | None = None,
) -> SweepRun:
    """Run the points not yet in the store on `executor`, storing each result as it comes.

    `should_stop` is asked between batches; when it says yes, the finished results are
    written, the workers stopped, and the run returns with `interrupted` set.
    """
    started = time.monotonic()
    ensure_sweeps_schema(store)
    stored = finished_keys(store, task.digest)
    todo = [p for p in points if p.key not in stored]
    run = SweepRun(points=len(points), skipped=len(points) - len(todo))
    if progress is not None:
        progress(0, len(todo))
    if not todo:
        return run
    queue: deque[Point] = deque(todo)
    retry: deque[Point] = deque()
    attempts: dict[str, int] = {}
    pending: dict[int, list[Point]] = {}
    writer = _Writer(store, task, scenario, flush_s)
    try:
        executor.start(points_job(task))
        batcher = _Batcher(target_batch_s, executor.workers)
        window = 2 * executor.workers
        while queue or retry or pending:
            if should_stop is not None and should_stop():
                run.interrupted = True
                break
            while (queue or retry) and len(pending) < window:
                if retry:
                    batch = [retry.popleft()]
                else:
                    batch = [queue.popleft() for _ in range(min(batcher.size(len(queue)), len(queue)))]
                run.batches += 1
                pending[run.batches] = batch
                executor.submit(run.batches, [p.overrides for p in batch])
            for handle, outcomes in executor.finished(timeout_s=flush_s):
                batch = pending.pop(handle)
                if outcomes is None:
                    _requeue(batch, retry, attempts, run)
                    continue
                batcher.observe(outcomes)
                for point, outcome in zip(batch, outcomes, strict=True):
                    _record(point, outcome, writer, run)
                if run.first_result_s is None:
                    run.first_result_s = time.monotonic() - started
                if progress is not None:
                    progress(run.executed, len(todo))
            writer.flush()
    finally:
        try:
            writer.flush(force=True)
        finally:
            executor.close()
            run.seconds = time.monotonic() - started
    return run


def _record(point: Point, outcome: Outcome, writer: _Writer, run: SweepRun) -> None:
    run.executed += 1
    if outcome.status == "crash":
        run.crashed += 1
        run.first_error = run.first_error or f"{' '.join(point.overrides)}: {outcome.error}"
        run.crashes.append((point.overrides, str(outcome.error)))
        return
    if outcome.status == "error":
        run.failed += 1
        run.first_error = run.first_error or f"{' '.join(point.overrides)}: {outcome.error}"
    status, result, error = outcome.status, outcome.result, outcome.error
    writer.add(PointRecord(point.key, point.overrides, status, result, error, outcome.seconds))


def _requeue(batch: list[Point], retry: deque[Point], attempts: dict[str, int], run: SweepRun) -> None:
    """Points of a batch whose worker died: run again one by one (a point that kills its
    worker every time is given up after MAX_ATTEMPTS, without holding up the others)."""
    for point in batch:
        attempts[point.key] = attempts.get(point.key, 0) + 1
        if attempts[point.key] >= MAX_ATTEMPTS:
            run.executed += 1
            run.crashed += 1
            message = f"the worker died {MAX_ATTEMPTS} times running it"
            run.first_error = run.first_error or f"{' '.join(point.overrides)}: {message}"
            run.crashes.append((point.overrides, message))
            continue
        retry.append(point)
