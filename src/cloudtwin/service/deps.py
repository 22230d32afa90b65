"""What a route gets from the running service: a read store, the job queue, the settings."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import Request

from cloudtwin.service.jobs import JobQueue
from cloudtwin.service.settings import ServiceSettings
from cloudtwin.store.database import Store

__all__ = ["read_store", "job_queue", "settings"]


def read_store(request: Request) -> Iterator[Store]:
    """A read-only Store over the current snapshot, for the time of one request."""
    with request.app.state.snapshots.store() as store:
        yield store


def job_queue(request: Request) -> JobQueue:
    """The service's job queue (its one writer)."""
    queue: JobQueue = request.app.state.jobs
    return queue


def settings(request: Request) -> ServiceSettings:
    """The settings the service was started with."""
    value: ServiceSettings = request.app.state.settings
    return value
