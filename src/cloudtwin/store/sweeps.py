"""Sweep points in the store: one row per finished point, keyed on the point's digest.

The point key is the primary key and rows are inserted with `INSERT OR IGNORE`, so a
point stored twice (a re-run racing a killed one) is still one row. A batch of rows is
one transaction: an interrupted write leaves the points before it as they were.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import pyarrow as pa

from cloudtwin.store.database import Store

__all__ = [
    "SWEEPS_SCHEMA_VERSION",
    "PointRecord",
    "ensure_sweeps_schema",
    "finished_keys",
    "load_points",
    "save_points",
]

SWEEPS_SCHEMA_VERSION = 1

_DDL = [
    """CREATE TABLE sweep_points (
        point_key VARCHAR PRIMARY KEY, task_digest VARCHAR NOT NULL, scenario VARCHAR NOT NULL,
        command VARCHAR NOT NULL, overrides VARCHAR NOT NULL, version VARCHAR NOT NULL,
        status VARCHAR NOT NULL, result VARCHAR, error VARCHAR,
        seconds DOUBLE, finished_at TIMESTAMP)""",
    "CREATE INDEX sweep_points_task ON sweep_points (task_digest)",
]

Status = Literal["ok", "error"]


@dataclass(frozen=True)
class PointRecord:
    """A finished point: its overrides, and its result document (JSON) or its error."""

    key: str
    overrides: tuple[str, ...]
    status: Status
    result: str | None
    error: str | None
    seconds: float


def ensure_sweeps_schema(store: Store) -> None:
    """Create the sweep table if it is missing."""
    store.ensure_schema("sweeps", SWEEPS_SCHEMA_VERSION, _DDL)


def finished_keys(store: Store, task_digest: str) -> set[str]:
    """The keys of every stored point of a task (scenario, command and version)."""
    if store.schema_version("sweeps") is None:
        return set()
    _, rows = store.query("SELECT point_key FROM sweep_points WHERE task_digest = ?", [task_digest])
    return {row[0] for row in rows}


def save_points(
    store: Store, records: Sequence[PointRecord], task_digest: str, scenario: str, command: str,
    version: str,
) -> None:
    """Store finished points in one transaction; points already stored are left as they are."""
    if not records:
        return
    n = len(records)
    now = datetime.now(UTC).replace(tzinfo=None)
    table = pa.table(
        {
            "point_key": pa.array([r.key for r in records], pa.string()),
            "task_digest": pa.array([task_digest] * n, pa.string()),
            "scenario": pa.array([scenario] * n, pa.string()),
            "command": pa.array([command] * n, pa.string()),
            "overrides": pa.array([json.dumps(list(r.overrides)) for r in records], pa.string()),
            "version": pa.array([version] * n, pa.string()),
            "status": pa.array([r.status for r in records], pa.string()),
            "result": pa.array([r.result for r in records], pa.string()),
            "error": pa.array([r.error for r in records], pa.string()),
            "seconds": pa.array([r.seconds for r in records], pa.float64()),
            "finished_at": pa.array([now] * n, pa.timestamp("us")),
        }
    )
    with store.transaction() as con:
        con.register("sweep_rows", table)
        try:
            con.execute("INSERT OR IGNORE INTO sweep_points SELECT * FROM sweep_rows")
        finally:
            con.unregister("sweep_rows")


def load_points(store: Store, keys: Sequence[str]) -> dict[str, PointRecord]:
    """The stored points among `keys`, by key."""
    if store.schema_version("sweeps") is None or not keys:
        return {}
    con = store.connection.cursor()  # its own cursor: results left open elsewhere do not block it
    con.register("sweep_keys", pa.table({"point_key": pa.array(list(keys), pa.string())}))
    try:
        rows = con.execute(
            "SELECT p.point_key, p.overrides, p.status, p.result, p.error, p.seconds "
            "FROM sweep_points p JOIN sweep_keys k USING (point_key)"
        ).fetchall()
    finally:
        con.unregister("sweep_keys")
        con.close()
    return {
        row[0]: PointRecord(row[0], tuple(json.loads(row[1])), row[2], row[3], row[4], float(row[5] or 0))
        for row in rows
    }
