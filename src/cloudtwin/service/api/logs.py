"""/api/logs: search the stored lines, list templates, find anomalies, a timeline of counts,
and ingest uploaded log text (the `cloudtwin logs` use cases)."""

from __future__ import annotations

import io
from collections import defaultdict
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from cloudtwin.errors import LogFormatError
from cloudtwin.ops.anomaly import DetectorConfig
from cloudtwin.ops.reader import log_stream
from cloudtwin.service.auth import require_read, require_token
from cloudtwin.service.deps import job_queue, read_store
from cloudtwin.service.jobs import JobQueue, Progress
from cloudtwin.service.models import (
    Anomaly,
    AnomalyList,
    JobDetail,
    JobResult,
    JsonObject,
    LineList,
    LogLine,
    LogTimeline,
    Template,
    TemplateList,
)
from cloudtwin.store.database import Store
from cloudtwin.store.ops_usecases import (
    AnomalyRow,
    LogInput,
    count_logs,
    detect_log_anomalies,
    ingest_logs,
    log_preset,
    search_logs,
    templates,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["router"]

router = APIRouter(prefix="/api/logs", tags=["logs"])
read = [Depends(require_read)]
#: The most log text one request may carry (larger files: `cloudtwin logs ingest`).
MAX_INGEST_BYTES = 8 * 2**20
#: The most seconds an ingest job may run (8 MiB take a few seconds; parsing is linear).
INGEST_DEADLINE_S = 300.0

StoreDep = Annotated[Store, Depends(read_store)]
Since = Annotated[datetime | None, Query(description="Lines at or after (ISO 8601)")]
Until = Annotated[datetime | None, Query(description="Lines before (ISO 8601)")]
#: Windows from a millisecond to a week; the store refuses more than its maximum of windows.
WindowS = Annotated[float, Query(gt=0.001, le=7 * 86400, description="Window length in seconds")]


def _json(row: DataclassInstance) -> JsonObject:
    """A dataclass row as JSON, its times as ISO 8601 text (as stored: UTC, no zone)."""
    return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in asdict(row).items()}


def _anomaly(row: AnomalyRow) -> Anomaly:
    return Anomaly.model_validate(_json(row))


def _naive(value: datetime | None, field: str) -> datetime | None:
    """Stored times are UTC without a zone: compare like with like. A time whose UTC
    falls outside years 1 to 9999 (9999-12-31T23:59:59-14:00) is refused naming `field`."""
    if value is None or value.tzinfo is None:
        return value
    try:
        return value.astimezone(UTC).replace(tzinfo=None)
    except OverflowError:
        raise LogFormatError(
            f"{field}: {value.isoformat()} is outside the years 1 to 9999 in UTC", field=field
        ) from None


@router.get("/templates", dependencies=read)
def list_templates(store: StoreDep, limit: Annotated[int, Query(ge=1, le=10_000)] = 100) -> TemplateList:
    """Mined templates with their line counts, most frequent first."""
    return TemplateList(templates=[Template.model_validate(_json(t)) for t in templates(store, limit)])


@router.get("/search", dependencies=read)
def search(
    store: StoreDep,
    text: Annotated[str | None, Query(max_length=500, description="Message contains (any case)")] = None,
    template_id: Annotated[int | None, Query(ge=0, lt=2**31)] = None,
    since: Since = None,
    until: Until = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    run: Annotated[str | None, Query(max_length=500, description="Only this twin run's lines")] = None,
) -> LineList:
    """Lines containing a text or of a template, in a time range, of one twin run or of
    every source, in source and line order."""
    found = search_logs(
        store, text, template_id, _naive(since, "since"), _naive(until, "until"), limit, run
    )
    return LineList(lines=[LogLine.model_validate(_json(line)) for line in found])


@router.get("/anomalies", dependencies=read)
def anomalies(
    store: StoreDep,
    window_s: WindowS = 3600.0,
    by: Literal["template", "component"] = "template",
    threshold: Annotated[float, Query(ge=0, le=1000)] = 6.0,
    history: Annotated[int, Query(ge=1, le=10_000)] = 24,
    since: Since = None,
    until: Until = None,
) -> AnomalyList:
    """Bursts, new and silent templates (or components), scored by surprise (-log10 p)."""
    found = detect_log_anomalies(
        store, timedelta(seconds=window_s), by, _naive(since, "since"), _naive(until, "until"),
        DetectorConfig(history=history, threshold=threshold),
    )
    return AnomalyList(anomalies=[_anomaly(a) for a in found])


@router.get("/timeline", dependencies=read)
def timeline(
    store: StoreDep, window_s: WindowS = 3600.0, since: Since = None, until: Until = None
) -> LogTimeline:
    """Lines per window (windows without lines left out), and the anomalies flagged in them."""
    window = timedelta(seconds=window_s)
    lines: dict[datetime, int] = defaultdict(int)
    start, end = _naive(since, "since"), _naive(until, "until")
    for count in count_logs(store, window, "template", start, end):
        lines[count.window_start] += count.lines
    found = detect_log_anomalies(store, window, "template", start, end) if lines else []
    return LogTimeline(
        windows=[w.isoformat() for w in sorted(lines)],
        lines=[lines[w] for w in sorted(lines)],
        anomalies=[_anomaly(a) for a in found],
    )


class IngestRequest(BaseModel):
    """Log text to ingest under a source name, in a known format (`cloudtwin logs ingest`)."""

    model_config = ConfigDict(extra="forbid")

    format: str = Field(..., max_length=200, description="A preset (hdfs, syslog, ...) or a format string")
    source: str = Field(..., min_length=1, max_length=500, description="Source name; re-using it appends")
    text: str = Field(..., max_length=MAX_INGEST_BYTES, description="The log lines")


@router.post("/ingest", status_code=202, dependencies=[Depends(require_token)])
def ingest(
    body: IngestRequest, request: Request, queue: Annotated[JobQueue, Depends(job_queue)]
) -> JobDetail:
    """Queue an ingest (needs the token); the job's result is what `logs ingest --json` prints
    for the same lines read from stdin under the same `--source`."""
    try:
        preset = log_preset(body.format)
    except LogFormatError as err:
        err.field = "format"
        raise
    data = body.text.encode("utf-8")
    db, snapshots = request.app.state.settings.db, request.app.state.snapshots

    def work(progress: Progress) -> JobResult:
        done = 0

        def hook(count: int) -> None:
            nonlocal done
            done += count
            progress("ingest", done, len(data))

        with Store(db) as store, log_stream(io.BytesIO(data), body.source) as log:
            item = LogInput(log, body.source, "append")
            summaries = ingest_logs(store, [item], preset, progress=lambda _: hook)
        snapshots.refresh()
        return summaries[0]

    return queue.submit("logs-ingest", body.source, ["ingest"], work, INGEST_DEADLINE_S).detail()
