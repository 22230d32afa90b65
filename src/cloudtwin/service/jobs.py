"""Jobs the service runs for its users, one at a time, on one worker thread.

The worker is the service's only writer: a job that keeps results opens the store for
as long as the write takes, then refreshes the read snapshot. Jobs live in memory; a
restarted service starts with an empty list (what they stored stays in the store).
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TypedDict

from cloudtwin.errors import CloudtwinError, LimitError
from cloudtwin.service.models import JobDetail, JobResult, JobSummary

__all__ = ["Job", "JobCancelled", "JobQueue", "JobState", "Progress", "Work"]

#: How many finished jobs are kept for listing; older ones are forgotten.
KEEP_FINISHED = 200
#: At shutdown, how long the running job has to stop at its next progress report before
#: the service exits without it (what it stored is whole: each write is a transaction).
CLOSE_WAIT_S = 1.0


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class JobCancelled(Exception):
    """Raised inside a job's progress callback once the job was cancelled."""


#: progress(stage, done, total), as the use cases report it.
Progress = Callable[[str, int, int], None]
#: The work of a job: given a progress callback, returns its typed result.
Work = Callable[[Progress], JobResult]


@dataclass(eq=False)
class Job:
    """One submitted job and what is known of it so far."""

    job_id: int
    kind: str
    scenario: str
    stages: list[str]
    work: Work
    state: JobState = JobState.QUEUED
    stage: str | None = None
    stage_done: int = 0
    stage_total: int = 0
    stages_done: int = 0
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None
    result: JobResult | None = None
    error: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    #: The most seconds the job may run; past it, its next progress report fails it.
    deadline_s: float | None = None
    started: float | None = None

    @property
    def overdue(self) -> bool:
        """Whether the job has run longer than its deadline."""
        if self.deadline_s is None or self.started is None:
            return False
        return time.monotonic() - self.started > self.deadline_s

    @property
    def fraction(self) -> float:
        """How much of the job is done, 0..1 (stages count equally)."""
        if self.state == JobState.DONE:
            return 1.0
        part = self.stage_done / self.stage_total if self.stage_total else 0.0
        return min(1.0, (self.stages_done + part) / max(1, len(self.stages)))

    def report(self, stage: str, done: int, total: int) -> None:
        """The progress callback handed to the use case; raises once cancelled."""
        if self.cancel.is_set():
            raise JobCancelled
        if self.overdue:
            raise LimitError(f"deadline: the job ran longer than its {self.deadline_s:g} s", "deadline")
        if stage != self.stage:
            if self.stage is not None:
                self.stages_done += 1
            self.stage = stage
        self.stage_done, self.stage_total = done, total

    def summary(self) -> JobSummary:
        """The job as the API lists it (without its result)."""
        return JobSummary(**self._fields())

    def detail(self) -> JobDetail:
        """The job as the API shows it, with its result."""
        return JobDetail(**self._fields(), result=self.result)

    def _fields(self) -> _JobFields:
        return {
            "job_id": self.job_id,
            "kind": self.kind,
            "scenario": self.scenario,
            "state": self.state.value,
            "progress": round(self.fraction, 4),
            "stage": self.stage,
            "stages": self.stages,
            "created_at": self.created_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "error": self.error,
        }


class _JobFields(TypedDict):
    job_id: int
    kind: str
    scenario: str
    state: str
    progress: float
    stage: str | None
    stages: list[str]
    created_at: str
    finished_at: str | None
    error: str | None


class JobQueue:
    """Runs submitted jobs in order on one thread; `after` runs after each job (e.g. refresh)."""

    def __init__(self, after: Callable[[], object] | None = None) -> None:
        self._jobs: dict[int, Job] = {}
        self._ids = itertools.count(1)
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self._after = after
        self._thread = threading.Thread(target=self._loop, name="cloudtwin-jobs", daemon=True)
        self._thread.start()

    def submit(
        self, kind: str, scenario: str, stages: list[str], work: Work, deadline_s: float | None = None
    ) -> Job:
        """Queue a job; it runs after the ones before it, for at most ``deadline_s`` seconds."""
        with self._lock:
            job = Job(next(self._ids), kind, scenario, stages, work, deadline_s=deadline_s)
            self._jobs[job.job_id] = job
            self._forget_old()
        self._queue.put(job)
        return job

    def get(self, job_id: int) -> Job | None:
        """A job by id (None when unknown or forgotten)."""
        return self._jobs.get(job_id)

    def list(self) -> list[Job]:
        """Every kept job, newest first."""
        with self._lock:
            return sorted(self._jobs.values(), key=lambda j: -j.job_id)

    def cancel(self, job: Job) -> None:
        """Ask a job to stop: a queued one never starts, a running one stops at its next
        progress report. A finished job stays as it is."""
        job.cancel.set()
        with self._lock:
            if job.state == JobState.QUEUED:
                self._finish(job, JobState.CANCELLED)

    def wait(self, job: Job, timeout_s: float) -> bool:
        """Wait until a job has finished; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while job.finished_at is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def close(self) -> None:
        """Cancel what runs and stop the worker, waiting at most CLOSE_WAIT_S for it."""
        for job in self.list():
            self.cancel(job)
        self._queue.put(None)
        self._thread.join(timeout=CLOSE_WAIT_S)

    @property
    def stopped(self) -> bool:
        """Whether the worker has ended (after `close`, unless a job still runs)."""
        return not self._thread.is_alive()

    def _loop(self) -> None:
        while (job := self._queue.get()) is not None:
            with self._lock:
                if job.state != JobState.QUEUED:
                    continue
                job.state = JobState.RUNNING
                job.started = time.monotonic()
            self._run(job)

    def _run(self, job: Job) -> None:
        try:
            result = job.work(job.report)
        except JobCancelled:
            self._finish(job, JobState.CANCELLED)
        except CloudtwinError as err:
            job.error = str(err)
            self._finish(job, JobState.FAILED)
        except Exception as err:  # a job's bug must not stop the worker
            job.error = f"internal error: {type(err).__name__}: {err}"
            self._finish(job, JobState.FAILED)
        else:
            job.result = result
            self._finish(job, JobState.DONE)
        finally:
            if self._after is not None:
                self._after()

    def _finish(self, job: Job, state: JobState) -> None:
        job.state = state
        job.finished_at = datetime.now(UTC)

    def _forget_old(self) -> None:
        finished = [j for j in self._jobs.values() if j.finished_at is not None]
        for job in sorted(finished, key=lambda j: j.job_id)[:-KEEP_FINISHED]:
            del self._jobs[job.job_id]
