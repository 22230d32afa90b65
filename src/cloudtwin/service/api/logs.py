"""/api/logs: search the stored lines, list templates, find anomalies, a timeline of counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query

from cloudtwin.ops.anomaly import DetectorConfig
from cloudtwin.service.auth import require_read
from cloudtwin.service.deps import read_store
from cloudtwin.store.database import QueryResult, Store
from cloudtwin.store.ops_query import find_anomalies, list_templates, search_lines, window_counts

__all__ = ["router"]

router = APIRouter(prefix="/api/logs", tags=["logs"], dependencies=[Depends(require_read)])

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


@router.get("/templates")
def templates(store: StoreDep, limit: Annotated[int, Query(ge=1, le=10_000)] = 100) -> dict[str, Any]:
    """Mined templates with their line counts, most frequent first."""
    return {"templates": _rows(list_templates(store, limit))}


@router.get("/search")
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


@router.get("/anomalies")
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


@router.get("/timeline")
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
