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
    """Append (ts, host, nic, stage, reason, line) rows in one transaction."""
    store.ensure_schema("attestation", ATTESTATION_SCHEMA_VERSION, _DDL)
    with store.transaction() as con:
        if rows:
            con.executemany("INSERT INTO ops_attestation VALUES (?, ?, ?, ?, ?, ?)", list(rows))


def read_attestation_failures(store: Store) -> list[tuple[str, str, str, str]]:
    """(host, nic, stage, reason) of every recorded failure (none when the table is absent)."""
    if store.schema_version("attestation") is None:
        return []
    rows = store.query("SELECT host, nic, stage, reason FROM ops_attestation ORDER BY ts, nic")[1]
    return [tuple(r) for r in rows]
