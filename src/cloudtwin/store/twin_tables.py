"""The twin's telemetry tables in the store: inventory, flow samples and NIC counters.

`cloudtwin diagnose` emits them (diagnosis/emit.py, diagnosis/cloud.py); their logs go
to the operations tables through `ingest_records`, what is not free text lives here, one
set of rows per emitted run (`run` is the scenario name). The store owns every table it
holds.

A flow sample (a NIC's counters) stands for one sample instant (`until_ts` NULL) or for
every sample instant from `ts` to `until_ts` (a flow whose rate and path stayed the
same, counters that stayed the same per interval: a cloud's telemetry is stored on
change). Version 1 stores lack `until_ts`; they are upgraded in
place when written to, and read as if every row were one instant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa

from cloudtwin.errors import StoreError
from cloudtwin.store.database import Store

__all__ = [
    "TWIN_SCHEMA_VERSION",
    "TwinMeta",
    "ensure_twin_schema",
    "read_meta",
    "replace_rows",
    "until_column",
]

TWIN_SCHEMA_VERSION = 2

_DDL = [
    "CREATE TABLE twin_runs (run VARCHAR PRIMARY KEY, strategy VARCHAR, start_ts TIMESTAMP, "
    "end_ts TIMESTAMP, sample_s DOUBLE, log_prefix VARCHAR)",
    "CREATE TABLE twin_nodes (run VARCHAR, node INTEGER, name VARCHAR, kind VARCHAR, address VARCHAR)",
    "CREATE TABLE twin_links (run VARCHAR, link_id INTEGER, name VARCHAR, src VARCHAR, dst VARCHAR, "
    "device VARCHAR, interface VARCHAR, capacity_bps DOUBLE)",
    "CREATE TABLE twin_flow_samples (run VARCHAR, ts TIMESTAMP, flow INTEGER, src VARCHAR, "
    "dst VARCHAR, rate_bps DOUBLE, cap_bps DOUBLE, path INTEGER[], until_ts TIMESTAMP)",
    "CREATE TABLE twin_nic_counters (run VARCHAR, ts TIMESTAMP, nic VARCHAR, pfc_pause_rx BIGINT, "
    "ecn_marked BIGINT, cnp_sent BIGINT, ack_timeouts BIGINT, until_ts TIMESTAMP)",
]
TABLES = ("twin_nodes", "twin_links", "twin_flow_samples", "twin_nic_counters")


@dataclass(frozen=True)
class TwinMeta:
    """What the diagnoser needs to know about an emitted run: its name, time span, interval."""

    run: str
    strategy: str
    start: datetime
    end: datetime
    sample_s: float
    log_prefix: str


def ensure_twin_schema(store: Store) -> None:
    """Create the twin tables if needed (upgrading version 1 tables in place)."""
    if store.schema_version("twin") == 1 and not store.read_only:
        with store.transaction() as con:
            con.execute("ALTER TABLE twin_flow_samples ADD COLUMN until_ts TIMESTAMP")
            con.execute("ALTER TABLE twin_nic_counters ADD COLUMN until_ts TIMESTAMP")
            con.execute(
                "UPDATE schema_version SET version = ? WHERE component = 'twin'", [TWIN_SCHEMA_VERSION]
            )
    store.ensure_schema("twin", TWIN_SCHEMA_VERSION, _DDL)


def until_column(store: Store) -> str:
    """The SQL that reads a flow sample's `until_ts` (NULL in a version 1 store)."""
    return "until_ts" if store.schema_version("twin") != 1 else "CAST(NULL AS TIMESTAMP) AS until_ts"


def replace_rows(store: Store, meta: TwinMeta, rows: Mapping[str, Mapping[str, Sequence[Any]]]) -> None:
    """Write one run's rows (columns per table), replacing what the run had before."""
    ensure_twin_schema(store)
    other = store.query("SELECT run FROM twin_runs WHERE run <> ?", [meta.run])[1]
    if other:
        raise StoreError(
            f"store {store.path}: already holds the twin run {other[0][0]!r}; "
            "diagnose one run per store (use another store)"
        )
    with store.transaction() as con:
        con.execute("DELETE FROM twin_runs WHERE run = ?", [meta.run])
        con.execute(
            "INSERT INTO twin_runs VALUES (?, ?, ?, ?, ?, ?)",
            [meta.run, meta.strategy, meta.start, meta.end, meta.sample_s, meta.log_prefix],
        )
        for table in TABLES:
            con.execute(f"DELETE FROM {table} WHERE run = ?", [meta.run])
            columns = rows.get(table)
            if not columns or not len(next(iter(columns.values()))):
                continue
            data = pa.table({"run": [meta.run] * len(next(iter(columns.values()))), **columns})
            con.register("twin_rows", data)
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM twin_rows")
            con.unregister("twin_rows")


def read_meta(store: Store) -> TwinMeta:
    """The one twin run in the store; StoreError when there is none."""
    if store.schema_version("twin") is None:
        raise StoreError(
            f"store {store.path}: holds no twin run (diagnose a scenario into it first)"
        )
    rows = store.query("SELECT * FROM twin_runs ORDER BY run")[1]
    if not rows:
        raise StoreError(f"store {store.path}: holds no twin run")
    run, strategy, start, end, sample_s, prefix = rows[0]
    return TwinMeta(run, strategy, start, end, float(sample_s), prefix)
