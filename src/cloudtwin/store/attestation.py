"""The attestation lines of the operations store: a NIC whose measured boot failed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from cloudtwin.store.database import Store

__all__ = ["ATTESTATION_SCHEMA_VERSION", "read_attestation_failures", "write_attestation_failures"]

ATTESTATION_SCHEMA_VERSION = 1

_DDL = [
    """CREATE TABLE ops_attestation (
        ts TIMESTAMP NOT NULL, host VARCHAR NOT NULL, nic VARCHAR NOT NULL,
        stage VARCHAR NOT NULL, reason VARCHAR NOT NULL, line VARCHAR NOT NULL)"""
]


def write_attestation_failures(
    store: Store, rows: Sequence[tuple[datetime, str, str, str, str, str]]
) -> None:
    """Add (ts, host, nic, stage, reason, line) rows in one transaction; a row the table
    already holds is not added again (recording the same boots twice changes nothing)."""
    store.ensure_schema("attestation", ATTESTATION_SCHEMA_VERSION, _DDL)
    unique = list(dict.fromkeys(rows))
    with store.transaction() as con:
        for row in unique:
            con.execute(
                "INSERT INTO ops_attestation SELECT ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM "
                "ops_attestation WHERE ts = ? AND host = ? AND nic = ? AND stage = ? AND reason = ? "
                "AND line = ?)",
                [*row, *row],
            )


def read_attestation_failures(store: Store) -> list[tuple[str, str, str, str]]:
    """(host, nic, stage, reason) of every recorded failure (none when the table is absent)."""
    if store.schema_version("attestation") is None:
        return []
    rows = store.query("SELECT host, nic, stage, reason FROM ops_attestation ORDER BY ts, nic")[1]
    return [tuple(r) for r in rows]
