"""The attestation lines of the operations store: a NIC whose measured boot failed.

Each row belongs to a run (the scenario whose boots failed: a cloud's name for all its
sites, or a single-fabric scenario's), so a store that holds several runs ranks each
with its own failed boots. Version 1 stores have no `run`; they are upgraded in place
when written to, and their rows belong to every run (such a store held one).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from cloudtwin.store.database import Store

__all__ = [
    "ATTESTATION_SCHEMA_VERSION",
    "attestation_runs",
    "attestation_source",
    "read_attestation_failures",
    "write_attestation_failures",
]

ATTESTATION_SCHEMA_VERSION = 2

_DDL = [
    """CREATE TABLE ops_attestation (
        ts TIMESTAMP NOT NULL, host VARCHAR NOT NULL, nic VARCHAR NOT NULL,
        stage VARCHAR NOT NULL, reason VARCHAR NOT NULL, line VARCHAR NOT NULL, run VARCHAR)"""
]


def attestation_source(run: str, site: str = "") -> str:
    """The log source of a run's (a site's, in a cloud) attestation lines."""
    return f"attestation/{run}" + (f"/{site}" if site else "")


def _ensure(store: Store) -> None:
    if store.schema_version("attestation") == 1:
        with store.transaction() as con:
            con.execute("ALTER TABLE ops_attestation ADD COLUMN run VARCHAR")
            con.execute(
                "UPDATE schema_version SET version = ? WHERE component = 'attestation'",
                [ATTESTATION_SCHEMA_VERSION],
            )
    store.ensure_schema("attestation", ATTESTATION_SCHEMA_VERSION, _DDL)


def write_attestation_failures(
    store: Store, run: str, rows: Sequence[tuple[datetime, str, str, str, str, str]]
) -> None:
    """Add (ts, host, nic, stage, reason, line) rows of `run` in one transaction; a row the
    run (or a version 1 store, for every run) already holds is not added again: recording
    the same boots twice changes nothing."""
    _ensure(store)
    unique = list(dict.fromkeys(rows))
    with store.transaction() as con:
        for row in unique:
            con.execute(
                "INSERT INTO ops_attestation SELECT ?, ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM "
                "ops_attestation WHERE ts = ? AND host = ? AND nic = ? AND stage = ? AND reason = ? "
                "AND line = ? AND (run = ? OR run IS NULL))",
                [*row, run, *row, run],
            )


def read_attestation_failures(store: Store, run: str | None = None) -> list[tuple[str, str, str, str]]:
    """(host, nic, stage, reason) of every recorded failure of `run` (of every run when
    None; none when the table is absent)."""
    version = store.schema_version("attestation")
    if version is None:
        return []
    if run is None or version == 1:
        rows = store.query("SELECT host, nic, stage, reason FROM ops_attestation ORDER BY ts, nic")[1]
    else:
        rows = store.query(
            "SELECT host, nic, stage, reason FROM ops_attestation WHERE run = ? OR run IS NULL "
            "ORDER BY ts, nic",
            [run],
        )[1]
    return [tuple(r) for r in rows]


def attestation_runs(store: Store) -> list[str]:
    """The runs with a failed boot recorded, by name (none in a version 1 store)."""
    if store.schema_version("attestation") in (None, 1):
        return []
    return [r[0] for r in store.query(
        "SELECT DISTINCT run FROM ops_attestation WHERE run IS NOT NULL ORDER BY run")[1]]
