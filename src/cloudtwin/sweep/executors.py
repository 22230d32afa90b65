"""Where work runs: in this process, on a local process pool, or on a Ray cluster.

An executor runs one job (a picklable callable) on payloads and hands back each result
as it finishes: a sweep's job runs a batch of points (`points_job`), a log ingest's job
mines a chunk of lines. Workers only compute: they return results to the driver, which
alone writes the store (DuckDB admits one writing process). A payload whose worker died
comes back as lost (None), and the driver sends it again.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent import futures
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, Protocol

from cloudtwin.errors import CloudtwinError

if TYPE_CHECKING:  # a type only: `cloudtwin sweep --help` and `logs --help` read this module
    from cloudtwin.sweep.task import Task

__all__ = [
    "Batch",
    "Executor",
    "Finished",
    "Outcome",
    "PoolExecutor",
    "SerialExecutor",
    "die_with_parent",
    "stop_pool_servers",
    "points_job",
    "run_batch",
]

OutcomeStatus = Literal["ok", "error", "crash"]


@dataclass(frozen=True)
class Outcome:
    """What one point gave: a JSON result, a CloudtwinError message, or an unexpected crash."""

    status: OutcomeStatus
    result: str | None
    error: str | None
    seconds: float


#: A batch: the overrides of each of its points.
Batch = list[tuple[str, ...]]

#: A job: what workers run on each payload (picklable, for process pools and Ray).
Job = Callable[[Any], Any]

#: A finished payload: its handle and the job's result, or None when its worker died.
Finished = tuple[int, Any]


def _one(task: Task, overrides: Sequence[str]) -> Outcome:
    start = time.perf_counter()
    try:
        document = task(overrides)
    except CloudtwinError as err:
        return Outcome("error", None, str(err), time.perf_counter() - start)
    except MemoryError as err:  # the point needs more than the machine has: its input, not a bug
        return Outcome("error", None, _out_of_memory(err), time.perf_counter() - start)
    except Exception as err:  # a bug, not bad input: reported, not stored, retried next run
        return Outcome("crash", None, f"{type(err).__name__}: {err}", time.perf_counter() - start)
    return Outcome("ok", json.dumps(document), None, time.perf_counter() - start)


def _out_of_memory(err: MemoryError) -> str:
    detail = f" ({' '.join(str(err).split())})" if str(err) else ""
    return (
        f"limits.memory: the point ran out of memory{detail}; its estimate is within "
        "limits.memory, so that limit is above what this machine has: lower it to refuse such points"
    )


def run_batch(task: Task, batch: Batch) -> list[Outcome]:
    """Run a batch of points in this process."""
    return [_one(task, overrides) for overrides in batch]


def points_job(task: Task) -> Job:
    """The job that runs a sweep's batches of points: a batch in, its outcomes out."""
    return partial(run_batch, task)


class Executor(Protocol):
    """Runs a job on payloads and reports the results as they finish."""

    #: How many payloads can run at the same time.
    workers: int

    def start(self, job: Job) -> None:
        """Get ready to run `job` (start processes, connect, ship the job)."""

    def submit(self, handle: int, payload: Any) -> None:
        """Run the job on a payload; its result comes back from `finished` under `handle`."""

    def finished(self, timeout_s: float) -> list[Finished]:
        """Payloads done (waiting up to `timeout_s` for the first)."""

    def close(self) -> None:
        """Stop every worker this executor started."""


class SerialExecutor:
    """Every payload in the driver process, one after the other (for debugging and tests)."""

    workers = 1

    def __init__(self) -> None:
        self._job: Job | None = None
        self._done: list[Finished] = []

    def start(self, job: Job) -> None:
        self._job = job

    def submit(self, handle: int, payload: Any) -> None:
        assert self._job is not None, "start() first"
        self._done.append((handle, self._job(payload)))

    def finished(self, timeout_s: float) -> list[Finished]:
        done, self._done = self._done, []
        return done

    def close(self) -> None:
        self._job = None


_WORKER_JOB: list[Job] = []

#: The preload that makes a fork server end with its driver.
_SERVER_GUARD = "cloudtwin.sweep.serverguard"

#: Modules the fork server imports once, so that each worker starts with them: what a
#: sweep's points need (a log ingest's pool names its own).
SWEEP_PRELOAD = ("cloudtwin.evaluation.run",)


#: prctl's option that sends a signal to a process when its parent ends (linux/prctl.h).
_PR_SET_PDEATHSIG = 1

#: How often a worker checks that its driver is still there.
_WATCH_S = 0.5


def _watch(driver_pid: int) -> None:
    """End this worker once its driver is gone (a killed driver cannot stop its workers)."""
    while True:
        time.sleep(_WATCH_S)
        try:
            os.kill(driver_pid, 0)
        except ProcessLookupError:
            os._exit(1)
        except PermissionError:  # the pid now belongs to another user's process
            os._exit(1)


def die_with_parent() -> None:
    """Ask the kernel (Linux) to kill this process when its parent ends: a worker when its
    fork server ends, the fork server when its driver does (`serverguard`). The watch
    thread cannot run while a point holds the interpreter (a long call into C), and a
    killed driver must not leave its workers computing."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent ended before the kernel was asked
        os._exit(1)


def _install(job: Job, driver_pid: int) -> None:
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the driver decides
    _WORKER_JOB[:] = [job]
    threading.Thread(target=_watch, args=(driver_pid,), name="driver-watch", daemon=True).start()


def _run_installed(payload: Any) -> Any:
    return _WORKER_JOB[0](payload)


class PoolExecutor:
    """A local pool of worker processes (started by a fork server: small and quick)."""

    def __init__(self, workers: int, preload: Sequence[str] = SWEEP_PRELOAD) -> None:
        self.workers = workers
        self._preload = list(preload)
        self._job: Job | None = None
        self._pool: futures.ProcessPoolExecutor | None = None
        self._pending: dict[futures.Future[Any], int] = {}
        self._lost: list[Finished] = []

    def _open(self) -> futures.ProcessPoolExecutor:
        assert self._job is not None, "start() first"
        context = multiprocessing.get_context("forkserver")
        # workers fork from a server that has already imported what every job needs
        # (and ends with the driver: serverguard)
        context.set_forkserver_preload([_SERVER_GUARD, "__main__", __name__, *self._preload])
        return futures.ProcessPoolExecutor(
            self.workers, mp_context=context, initializer=_install, initargs=(self._job, os.getpid())
        )

    def start(self, job: Job) -> None:
        self._job = job
        self._pool = self._open()

    def submit(self, handle: int, payload: Any) -> None:
        if self._pool is None:
            self._pool = self._open()
        try:
            future = self._pool.submit(_run_installed, payload)
        except BrokenProcessPool:  # a worker died since the last look: start a new pool
            self._lose_pending()
            self._pool = self._open()
            future = self._pool.submit(_run_installed, payload)
        self._pending[future] = handle

    def _lose_pending(self) -> None:
        """Every batch still on a dead pool is lost with it."""
        self._lost.extend((handle, None) for handle in self._pending.values())
        self._pending.clear()
        self._shutdown()

    def finished(self, timeout_s: float) -> list[Finished]:
        results, self._lost = self._lost, []
        if not self._pending:
            return results
        wait_s = 0 if results else timeout_s
        done, _ = futures.wait(self._pending, timeout=wait_s, return_when=futures.FIRST_COMPLETED)
        broken = False
        for future in done:
            handle = self._pending.pop(future)
            try:
                results.append((handle, future.result()))
            except BrokenProcessPool:
                broken = True
                results.append((handle, None))
        if broken:
            self._lose_pending()
            results.extend(self._lost)
            self._lost = []
        return results

    def worker_pids(self) -> list[int]:
        """The process ids of the pool's workers (for monitoring, and tests that kill one)."""
        processes = getattr(self._pool, "_processes", None) or {}
        return list(processes)

    def _shutdown(self) -> None:
        if self._pool is None:
            return
        processes = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:  # a killed sweep stops its points now, not when they finish
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(timeout=5)
            if process.is_alive():  # deaf to SIGTERM (stuck in a call): it must not outlive the pool
                process.kill()
                process.join(timeout=5)
        self._pool = None

    def close(self) -> None:
        self._pending.clear()
        self._shutdown()


def stop_pool_servers() -> None:
    """Stop the fork server and resource tracker that process pools started in this process.

    Left alone, they end a moment after the command that started them, so a caller that
    waits for the command's whole session (a test harness, a job runner) sees processes
    outlive it. Pools started later start them again.
    """
    from multiprocessing import forkserver, resource_tracker

    for server in (forkserver._forkserver, resource_tracker._resource_tracker):
        stop = getattr(server, "_stop", None)
        if stop is not None:
            stop()
