"""/api/logs: search the stored lines, list templates, find anomalies, a timeline of counts."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from cloudtwin.ops.anomaly import DetectorConfig
from cloudtwin.ops.presets import resolve_format
from cloudtwin.service.auth import require_read, require_token
from cloudtwin.service.deps import job_queue, read_store
from cloudtwin.service.jobs import JobQueue, Progress
from cloudtwin.store.database import QueryResult, Store
from cloudtwin.store.ops_ingest import ingest_stream
from cloudtwin.store.ops_query import find_anomalies, list_templates, search_lines, window_counts

__all__ = ["router"]

router = APIRouter(prefix="/api/logs", tags=["logs"])
read = [Depends(require_read)]
#: The most log text one request may carry (larger files: `cloudtwin logs ingest`).
MAX_INGEST_BYTES = 8 * 2**20

StoreDep = Annotated[Store, Depends(read_store)]
Since = Annotated[datetime | None, Query(description="Lines at or after (ISO 8601)")]
Until = Annotated[datetime | None, Query(description="Lines before (ISO 8601)")]
#: Windows from a millisecond to a week; the store refuses more than its maximum of windows.
WindowS = Annotated[float, Query(gt=0.001, le=7 * 86400, description="Window length in seconds")]


def _rows(result: QueryResult) -> list[dict[str, Any]]:
    columns, rows = result
    return [
        {c: (v.isoformat() if isinstance(v, datetime) else v) for c, v in zip(columns, row, strict=True)}
        for row in rows
    ]


def _naive(value: datetime | None) -> datetime | None:
    """Stored times are UTC without a zone: compare like with like."""
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


@router.get("/templates", dependencies=read)
def templates(store: StoreDep, limit: Annotated[int, Query(ge=1, le=10_000)] = 100) -> dict[str, Any]:
    """Mined templates with their line counts, most frequent first."""
    return {"templates": _rows(list_templates(store, limit))}


@router.get("/search", dependencies=read)
def search(
    store: StoreDep,
    text: Annotated[str | None, Query(max_length=500, description="Message contains (any case)")] = None,
    template_id: Annotated[int | None, Query(ge=0, lt=2**31)] = None,
    since: Since = None,
    until: Until = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> dict[str, Any]:
    """Lines containing a text or of a template, in a time range, in source and line order."""
    found = search_lines(store, text, template_id, _naive(since), _naive(until), limit)
    return {"lines": _rows(found)}


@router.get("/anomalies", dependencies=read)
def anomalies(
    store: StoreDep,
    window_s: WindowS = 3600.0,
    by: Literal["template", "component"] = "template",
    threshold: Annotated[float, Query(ge=0, le=1000)] = 6.0,
    history: Annotated[int, Query(ge=1, le=10_000)] = 24,
    since: Since = None,
    until: Until = None,
) -> dict[str, Any]:
    """Bursts, new and silent templates (or components), scored by surprise (-log10 p)."""
    found = find_anomalies(
        store, timedelta(seconds=window_s), by, _naive(since), _naive(until),
        DetectorConfig(history=history, threshold=threshold),
    )
    return {"anomalies": [_anomaly(a) for a in found]}


@router.get("/timeline", dependencies=read)
def timeline(
    store: StoreDep,
    window_s: WindowS = 3600.0,
    since: Since = None,
    until: Until = None,
) -> dict[str, Any]:
    """Lines per window (all templates together), and the anomalies flagged in them."""
    window = timedelta(seconds=window_s)
    counts = window_counts(store, window, "template", _naive(since), _naive(until))
    found = find_anomalies(store, window, "template", _naive(since), _naive(until)) if counts.windows else []
    return {
        "windows": [w.isoformat() for w in counts.windows],
        "lines": [int(x) for x in counts.counts.sum(axis=1)] if counts.windows else [],
        "anomalies": [_anomaly(a) for a in found],
    }


def _anomaly(a: Any) -> dict[str, Any]:
    return {
        "kind": a.kind, "window_start": a.window_start.isoformat(), "key": a.key,
        "count": int(a.count), "expected": float(a.expected), "score": float(a.score),
    }


class IngestRequest(BaseModel):
    """Log text to ingest under a source name, in a known format (`cloudtwin logs ingest`)."""

    model_config = ConfigDict(extra="forbid")

    format: str = Field(..., max_length=200, description="A preset (hdfs, syslog, ...) or a format string")
    source: str = Field(..., min_length=1, max_length=500, description="Source name; re-using it resumes")
    text: str = Field(..., max_length=MAX_INGEST_BYTES, description="The log lines")


@router.post("/ingest", status_code=202, dependencies=[Depends(require_token)])
def ingest(body: IngestRequest, request: Request,
           queue: Annotated[JobQueue, Depends(job_queue)]) -> dict[str, Any]:
    """Queue an ingest (needs the token); the job's result is what `logs ingest --json` prints."""
    preset = resolve_format(body.format)
    data = body.text.encode("utf-8")
    db, snapshots = request.app.state.settings.db, request.app.state.snapshots

    def work(progress: Progress) -> dict[str, Any]:
        done = 0

        def hook(count: int) -> None:
            nonlocal done
            done += count
            progress("ingest", done, len(data))

        with Store(db) as store:  # held only while the lines are written
            summary = ingest_stream(store, io.BytesIO(data), body.source, preset, progress=hook)
        snapshots.refresh()
        return dict(summary.__dict__)

    return queue.submit("logs-ingest", body.source, ["ingest"], work).to_json()
