"""The twin's telemetry tables in the store: inventory, flow samples and NIC counters.

`cloudtwin diagnose` emits them (diagnosis/emit.py, diagnosis/cloud.py); their logs go
to the operations tables through `ingest_records`, what is not free text lives here, one
set of rows per emitted run (`run` is the scenario name: one store holds the runs of
several scenarios side by side, and emitting a scenario again replaces its own rows). The
store owns every table it holds.

A flow sample (a NIC's counters) stands for one sample instant (`until_ts` NULL) or for
every sample instant from `ts` to `until_ts` (a flow whose rate and path stayed the
same, counters that stayed the same per interval: a cloud's telemetry is stored on
change). Version 1 stores lack `until_ts`, version 2 stores the order runs were written
in (`seq`); both are upgraded in place when written to, and read as they are (every row
one instant; their one run the latest).
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
    "run_names",
    "run_sources",
    "unknown_run",
    "until_column",
]

TWIN_SCHEMA_VERSION = 3

_DDL = [
    "CREATE TABLE twin_runs (run VARCHAR PRIMARY KEY, strategy VARCHAR, start_ts TIMESTAMP, "
    "end_ts TIMESTAMP, sample_s DOUBLE, log_prefix VARCHAR, seq BIGINT)",
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
    """Create the twin tables if needed (upgrading version 1 and 2 tables in place)."""
    version = store.schema_version("twin")
    if version in (1, 2) and not store.read_only:
        with store.transaction() as con:
            if version == 1:
                con.execute("ALTER TABLE twin_flow_samples ADD COLUMN until_ts TIMESTAMP")
                con.execute("ALTER TABLE twin_nic_counters ADD COLUMN until_ts TIMESTAMP")
            con.execute("ALTER TABLE twin_runs ADD COLUMN seq BIGINT")
            con.execute(
                "UPDATE schema_version SET version = ? WHERE component = 'twin'", [TWIN_SCHEMA_VERSION]
            )
    store.ensure_schema("twin", TWIN_SCHEMA_VERSION, _DDL)


def until_column(store: Store) -> str:
    """The SQL that reads a flow sample's `until_ts` (NULL in a version 1 store)."""
    return "until_ts" if store.schema_version("twin") != 1 else "CAST(NULL AS TIMESTAMP) AS until_ts"


def replace_rows(store: Store, meta: TwinMeta, rows: Mapping[str, Mapping[str, Sequence[Any]]]) -> None:
    """Write one run's rows (columns per table), replacing what the run had before; the
    store's other runs are left as they are, and this one becomes the latest."""
    ensure_twin_schema(store)
    with store.transaction() as con:
        seq = con.execute("SELECT coalesce(max(seq), 0) + 1 FROM twin_runs").fetchone()
        con.execute("DELETE FROM twin_runs WHERE run = ?", [meta.run])
        con.execute(
            "INSERT INTO twin_runs VALUES (?, ?, ?, ?, ?, ?, ?)",
            [meta.run, meta.strategy, meta.start, meta.end, meta.sample_s, meta.log_prefix,
             seq[0] if seq else 1],
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


def run_names(store: Store) -> list[str]:
    """The twin runs in the store, the latest written first (none without twin tables)."""
    if store.schema_version("twin") is None:
        return []
    order = "seq DESC NULLS LAST, run" if _has_seq(store) else "run"
    return [r[0] for r in store.query(f"SELECT run FROM twin_runs ORDER BY {order}")[1]]


def run_sources(store: Store, run: str) -> tuple[str, list[str]]:
    """SQL (on `s.source`) and its parameters that keep the log lines of the run `run`: its
    devices' (`twin/<run>/...`) and its failed boots' (`attestation/<run>`, and
    `attestation/<run>/<site>` in a cloud); StoreError when the store holds no such run."""
    from cloudtwin.store.attestation import attestation_runs, attestation_source

    twins = run_names(store)
    known = twins + [r for r in attestation_runs(store) if r not in twins]
    if run not in known:
        raise unknown_run(store, run, known)
    prefix = store.query("SELECT log_prefix FROM twin_runs WHERE run = ?", [run])[1] if run in twins else []
    sql = "(s.source = ? OR starts_with(s.source, ?)" + (" OR starts_with(s.source, ?))" if prefix else ")")
    params = [attestation_source(run), attestation_source(run) + "/"] + ([prefix[0][0]] if prefix else [])
    return sql, params


def _has_seq(store: Store) -> bool:
    version = store.schema_version("twin")
    return version is not None and version >= 3


def unknown_run(store: Store, run: str, known: Sequence[str]) -> StoreError:
    """The one-line error for a run name the store does not hold (HTTP 404)."""
    held = ", ".join(known) if known else "none"
    err = StoreError(f"--run {run}: store {store.path} holds no twin run of that name (it holds: {held})",
                     field="run")
    err.status = 404
    return err


def read_meta(store: Store, run: str | None = None) -> TwinMeta:
    """The twin run named `run`, or the latest written one; StoreError when there is none
    or the store holds no run of that name."""
    names = run_names(store)
    if not names:
        if run is not None:
            raise unknown_run(store, run, names)
        raise StoreError(
            f"store {store.path}: holds no twin run (diagnose a scenario into it first)"
        )
    name = names[0] if run is None else run
    if name not in names:
        raise unknown_run(store, name, names)
    rows = store.query(
        "SELECT run, strategy, start_ts, end_ts, sample_s, log_prefix FROM twin_runs WHERE run = ?", [name]
    )[1]
    run_name, strategy, start, end, sample_s, prefix = rows[0]
    return TwinMeta(run_name, strategy, start, end, float(sample_s), prefix)
