"""Migration runs in the store: rows per run, migration and round; each cloud's log as operations data.

A run is written in one transaction (its logs follow as their own ingest, one source
per cloud: `mobility/<run>/<cloud>`), so an interrupted write leaves earlier runs intact.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TypedDict

from cloudtwin.ops.record import LogRecord
from cloudtwin.store.database import Store
from cloudtwin.store.documents import Document

__all__ = ["MIGRATIONS_SCHEMA_VERSION", "MigrationRunRow", "list_migration_runs", "save_migration_run"]

MIGRATIONS_SCHEMA_VERSION = 1
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""Simulated time 0 of every run, for the timestamps of its log records."""

_DDL = [
    """CREATE TABLE mig_runs (
        run_id INTEGER PRIMARY KEY, created_at TIMESTAMP NOT NULL, scenario VARCHAR NOT NULL,
        document VARCHAR NOT NULL)""",
    """CREATE TABLE mig_migrations (
        run_id INTEGER NOT NULL, vm VARCHAR NOT NULL, source VARCHAR, destination VARCHAR,
        converged BOOLEAN, outcome VARCHAR, total_time_s DOUBLE, downtime_s DOUBLE, bytes DOUBLE,
        rounds INTEGER, PRIMARY KEY (run_id, vm))""",
    """CREATE TABLE mig_rounds (
        run_id INTEGER NOT NULL, vm VARCHAR NOT NULL, phase VARCHAR NOT NULL, round INTEGER,
        start_s DOUBLE, end_s DOUBLE, bytes DOUBLE)""",
]


def _ensure(store: Store) -> None:
    store.ensure_schema("migrations", MIGRATIONS_SCHEMA_VERSION, _DDL)


def save_migration_run(store: Store, scenario: str, document: Document, logs: list[Document]) -> int:
    """Store a `migrate run` result and each cloud's log; returns the run id."""
    from cloudtwin.store.ops_ingest import ingest_records

    _ensure(store)
    with store.transaction() as con:
        row = con.execute("SELECT coalesce(max(run_id), 0) + 1 FROM mig_runs").fetchone()
        run_id = int(row[0]) if row else 1
        con.execute(
            "INSERT INTO mig_runs VALUES (?, ?, ?, ?)",
            [run_id, datetime.now(UTC).replace(tzinfo=None), scenario, json.dumps(document)],
        )
        for m in document["migrations"]:
            con.execute(
                "INSERT INTO mig_migrations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    run_id,
                    m["vm"],
                    m.get("from"),
                    m.get("to"),
                    m["converged"],
                    m["outcome"],
                    m["total_time_s"],
                    m["downtime_s"],
                    m["bytes"],
                    m["rounds"],
                ],
            )
            con.executemany(
                "INSERT INTO mig_rounds VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    [run_id, m["vm"], e["phase"], e["round"], e["start_s"], e["end_s"], e["bytes"]]
                    for e in m["timeline"]
                ],
            )
    by_cloud: dict[str, list[LogRecord]] = {}
    for entry in sorted(logs, key=lambda r: r["time_s"]):
        fields = " ".join(f"{k}={v}" for k, v in entry.items() if k not in ("time_s", "cloud", "event"))
        by_cloud.setdefault(entry["cloud"], []).append(
            LogRecord(
                timestamp=EPOCH + timedelta(seconds=entry["time_s"]),
                source=entry["cloud"],
                level="INFO",
                component="mobility",
                content=f"{entry['event']} {fields}".strip(),
            )
        )
    for cloud, records in by_cloud.items():
        ingest_records(store, records, f"mobility/{run_id}/{cloud}")
    return run_id


class MigrationRunRow(TypedDict):
    """One migration of a stored `migrate run`."""

    run_id: int
    scenario: str
    vm: str
    converged: bool
    total_time_s: float
    downtime_s: float
    rounds: int


def list_migration_runs(store: Store) -> list[MigrationRunRow]:
    """Stored migration runs, newest first, with per-migration outcomes (none yet: empty)."""
    if store.schema_version("migrations") is None:
        return []
    _ensure(store)
    _, rows = store.query(
        "SELECT r.run_id, r.scenario, m.vm, m.converged, m.total_time_s, m.downtime_s, m.rounds "
        "FROM mig_runs r JOIN mig_migrations m USING (run_id) ORDER BY r.run_id DESC, m.vm"
    )
    return [
        MigrationRunRow(run_id=r[0], scenario=r[1], vm=r[2], converged=r[3], total_time_s=r[4],
                        downtime_s=r[5], rounds=r[6])
        for r in rows
    ]
