"""Queries over the operations tables: templates, line search, counts per time window, anomalies."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

import numpy as np
import numpy.typing as npt

from cloudtwin.errors import LimitError, StoreError
from cloudtwin.ops.anomaly import Anomaly, DetectorConfig, detect_changes
from cloudtwin.ops.pca import PcaConfig, detect_pca
from cloudtwin.store.database import QueryResult, Store
from cloudtwin.store.defaults import DEFAULT_MAX_CELLS

__all__ = [
    "DEFAULT_MAX_CELLS",
    "CountKey",
    "WindowCounts",
    "find_anomalies",
    "list_templates",
    "search_lines",
    "window_counts",
]

CountKey = Literal["template", "component"]


@dataclass(frozen=True)
class WindowCounts:
    """Line counts per consecutive time window (rows) and per key (columns)."""

    windows: list[datetime]
    keys: list[str]
    counts: npt.NDArray[np.float64]
    window: timedelta


def _require_ops(store: Store) -> None:
    if store.schema_version("ops") is None:
        raise StoreError(f"store {store.path}: holds no logs yet (ingest some first)")


def list_templates(store: Store, limit: int | None = None) -> QueryResult:
    """Templates with their line counts, most frequent first (all of them if no limit)."""
    _check_limit(limit)
    _require_ops(store)
    sql = "SELECT template_id, size AS lines, template FROM ops_templates ORDER BY size DESC, 1"
    return store.query(sql + (f" LIMIT {int(limit)}" if limit is not None else ""))


def _check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise StoreError(f"limit must be at least 1, got {limit}")


def _time_filter(since: datetime | None, until: datetime | None) -> tuple[str, list[object]]:
    clauses: list[str] = []
    params: list[object] = []
    if since is not None:
        clauses.append("l.ts >= ?")
        params.append(since)
    if until is not None:
        clauses.append("l.ts < ?")
        params.append(until)
    return "".join(f" AND {c}" for c in clauses), params


def search_lines(
    store: Store,
    text: str | None = None,
    template_id: int | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 100,
    run: str | None = None,
) -> QueryResult:
    """Lines whose message contains ``text`` (case-insensitive) or that have a template,
    optionally in ``[since, until)`` and of one twin run (`run`, its devices' lines and its
    failed boots'), in source and line order."""
    _check_limit(limit)
    _require_ops(store)
    where, params = _time_filter(since, until)
    if run is not None:
        from cloudtwin.store.twin_tables import run_sources

        sql, values = run_sources(store, run)
        where += f" AND {sql}"
        params += values
    if text is not None:
        where += " AND contains(lower(l.content), lower(?))"
        params.append(text)
    if template_id is not None:
        where += " AND l.template_id = ?"
        params.append(template_id)
    sql = (
        "SELECT s.source, l.line, l.ts, l.level, l.component, l.template_id, l.content "
        "FROM ops_lines l JOIN ops_sources s USING (source_id) "
        f"WHERE TRUE{where} ORDER BY s.source, l.line LIMIT {int(limit)}"
    )
    return store.query(sql, params)


def window_counts(
    store: Store,
    window: timedelta,
    by: CountKey = "template",
    since: datetime | None = None,
    until: datetime | None = None,
    max_cells: int = DEFAULT_MAX_CELLS,
) -> WindowCounts:
    """Counts of timestamped lines per window and per template (id) or component.

    The windows x keys matrix may hold at most ``max_cells`` cells (LimitError).
    """
    _require_ops(store)
    if window <= timedelta(0):
        raise StoreError(f"window must be positive, got {window}")
    key = "CAST(l.template_id AS VARCHAR)" if by == "template" else "coalesce(l.component, '-')"
    where, params = _time_filter(since, until)
    rows = store.query(
        f"SELECT time_bucket(?, l.ts) AS w, {key} AS k, count(*) FROM ops_lines l "
        f"WHERE l.ts IS NOT NULL{where} GROUP BY ALL ORDER BY 1, 2",
        [window, *params],
    )[1]
    if not rows:
        return WindowCounts([], [], np.zeros((0, 0)), window)
    first, last = rows[0][0], rows[-1][0]
    n = int((last - first) / window) + 1
    keys = sorted({r[1] for r in rows}, key=lambda k: (len(k), k) if by == "template" else k)
    if n * len(keys) > max_cells:
        raise LimitError(
            f"window {window} gives {n:,} windows x {len(keys):,} {by}s = "
            f"{n * len(keys):,} counts between {first} and {last}, above the limit of "
            f"{max_cells:,} (max_cells); use a larger window, narrow the time range "
            "(since, until) or raise the limit", "max_cells",
        )
    column = {k: i for i, k in enumerate(keys)}
    counts = np.zeros((n, len(keys)))
    for w, k, c in rows:
        counts[int((w - first) / window), column[k]] = c
    return WindowCounts([first + i * window for i in range(n)], keys, counts, window)


def find_anomalies(
    store: Store,
    window: timedelta,
    by: CountKey = "template",
    since: datetime | None = None,
    until: datetime | None = None,
    config: DetectorConfig | None = None,
    pca: PcaConfig | None = None,
    max_cells: int = DEFAULT_MAX_CELLS,
) -> list[Anomaly]:
    """Bursts, new and silent keys (and, if ``pca`` is given, PCA outlier windows)."""
    data = window_counts(store, window, by, since, until, max_cells)
    if not data.windows:
        return []
    found = detect_changes(data.counts, data.windows, data.keys, config)
    if pca is not None:
        found += detect_pca(data.counts, data.windows, data.keys, pca)
    return found
