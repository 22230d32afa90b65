"""Evaluation runs in the store: one row per run, per strategy, per flow, per timeline point.

A run is written in one transaction: an interrupted write leaves no trace, and the
runs before it stay as they were. The store keeps a run's results as their JSON and
indexes the figures its tables hold; it reads them from the typed results through the
small protocol `RunResults` (the types themselves live with the evaluation, above the
store), so a figure is described once, where the evaluation computes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from cloudtwin.errors import StoreError
from cloudtwin.store.database import Store
from cloudtwin.store.run_pages import RunRow

__all__ = [
    "RUNS_SCHEMA_VERSION",
    "FlowRows",
    "RunResults",
    "StoredDocument",
    "ensure_runs_schema",
    "list_runs",
    "load_run",
    "save_run",
]

RUNS_SCHEMA_VERSION = 1

_DDL = [
    """CREATE TABLE eval_runs (
        run_id INTEGER PRIMARY KEY, created_at TIMESTAMP NOT NULL, scenario VARCHAR NOT NULL,
        seed BIGINT NOT NULL, strategies VARCHAR NOT NULL, recommendation VARCHAR,
        document VARCHAR NOT NULL)""",
    """CREATE TABLE eval_strategies (
        run_id INTEGER NOT NULL, strategy VARCHAR NOT NULL, aggregate_gbps DOUBLE,
        recovered BOOLEAN, time_to_recover_s DOUBLE, dip DOUBLE, bytes_delayed DOUBLE,
        complexity_score DOUBLE, PRIMARY KEY (run_id, strategy))""",
    """CREATE TABLE eval_flows (
        run_id INTEGER NOT NULL, strategy VARCHAR NOT NULL, flow BIGINT NOT NULL,
        job VARCHAR, tenant VARCHAR, src BIGINT, dst BIGINT, size_bytes DOUBLE,
        start_s DOUBLE, finish_s DOUBLE, baseline_finish_s DOUBLE, stall_s DOUBLE,
        affected BOOLEAN)""",
    """CREATE TABLE eval_timelines (
        run_id INTEGER NOT NULL, strategy VARCHAR NOT NULL, t_s DOUBLE NOT NULL,
        baseline_gbps DOUBLE, faulted_gbps DOUBLE)""",
]


class _Timeline(Protocol):
    @property
    def t_s(self) -> Sequence[float]: ...
    @property
    def baseline_gbps(self) -> Sequence[float]: ...
    @property
    def faulted_gbps(self) -> Sequence[float]: ...


class _Performance(Protocol):
    @property
    def aggregate_gbps(self) -> float: ...


class _Resiliency(Protocol):
    @property
    def recovered(self) -> bool: ...
    @property
    def time_to_recover_s(self) -> float | None: ...
    @property
    def dip(self) -> float: ...
    @property
    def bytes_delayed(self) -> float: ...
    @property
    def timeline(self) -> _Timeline: ...


class _Complexity(Protocol):
    @property
    def score(self) -> float: ...


class _Strategy(Protocol):
    @property
    def performance(self) -> _Performance: ...
    @property
    def resiliency(self) -> _Resiliency: ...
    @property
    def complexity(self) -> _Complexity: ...


class RunResults(Protocol):
    """What the store reads of a run's typed results: the columns of `eval_runs` and
    `eval_strategies`, each strategy's timeline, and the JSON it keeps whole."""

    @property
    def scenario(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def recommendation(self) -> str | None: ...
    @property
    def strategies(self) -> Mapping[str, _Strategy]: ...
    def to_json(self) -> Mapping[str, object]: ...


@dataclass(frozen=True)
class StoredDocument:
    """A stored run: its id, when it was stored (UTC), its per-flow row count and its results
    as the JSON text the store keeps (the evaluation reads it back as its type)."""

    run_id: int
    created_at: str
    flow_rows: int
    json: str


@dataclass(frozen=True, eq=False)
class FlowRows:
    """Per-connection results of one strategy (arrays of equal length)."""

    strategy: str
    job: list[str]
    tenant: list[str]
    src: np.ndarray
    dst: np.ndarray
    size_bytes: np.ndarray
    start_s: np.ndarray
    finish_s: np.ndarray
    baseline_finish_s: np.ndarray
    stall_s: np.ndarray
    affected: np.ndarray


def ensure_runs_schema(store: Store) -> None:
    """Create the evaluation tables if they are missing."""
    store.ensure_schema("runs", RUNS_SCHEMA_VERSION, _DDL)


def _flows_table(run_id: int, rows: FlowRows) -> pa.Table:
    n = rows.src.size
    return pa.table(
        {
            "run_id": pa.array(np.full(n, run_id, dtype=np.int32)),
            "strategy": pa.array([rows.strategy] * n, pa.string()),
            "flow": pa.array(np.arange(n, dtype=np.int64)),
            "job": pa.array(rows.job, pa.string()),
            "tenant": pa.array(rows.tenant, pa.string()),
            "src": pa.array(rows.src.astype(np.int64)),
            "dst": pa.array(rows.dst.astype(np.int64)),
            "size_bytes": pa.array(rows.size_bytes.astype(float)),
            "start_s": pa.array(rows.start_s.astype(float)),
            "finish_s": pa.array(rows.finish_s.astype(float)),
            "baseline_finish_s": pa.array(rows.baseline_finish_s.astype(float)),
            "stall_s": pa.array(rows.stall_s.astype(float)),
            "affected": pa.array(rows.affected.astype(bool)),
        }
    )


def _insert_arrow(con: Any, target: str, table: pa.Table) -> None:
    con.register("arrow_rows", table)
    try:
        con.execute(f"INSERT INTO {target} SELECT * FROM arrow_rows")
    finally:
        con.unregister("arrow_rows")


def _insert_flows(con: Any, run_id: int, flows: list[FlowRows]) -> None:
    for rows in flows:
        _insert_arrow(con, "eval_flows", _flows_table(run_id, rows))


def _insert_timelines(con: Any, run_id: int, results: RunResults) -> None:
    for name, strategy in results.strategies.items():
        timeline = strategy.resiliency.timeline
        table = pa.table(
            {
                "run_id": pa.array(np.full(len(timeline.t_s), run_id, dtype=np.int32)),
                "strategy": pa.array([name] * len(timeline.t_s), pa.string()),
                "t_s": pa.array(timeline.t_s, pa.float64()),
                "baseline_gbps": pa.array(timeline.baseline_gbps, pa.float64()),
                "faulted_gbps": pa.array(timeline.faulted_gbps, pa.float64()),
            }
        )
        _insert_arrow(con, "eval_timelines", table)


def save_run(store: Store, results: RunResults, flows: list[FlowRows]) -> int:
    """Store one evaluation (its results, kept as their JSON, and per-flow rows); its run id."""
    document = json.dumps(results.to_json())
    ensure_runs_schema(store)
    with store.transaction() as con:
        row = con.execute("SELECT coalesce(max(run_id), 0) + 1 FROM eval_runs").fetchone()
        run_id = int(row[0]) if row else 1
        con.execute(
            "INSERT INTO eval_runs VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                run_id,
                datetime.now(UTC).replace(tzinfo=None),
                results.scenario,
                results.seed,
                ",".join(results.strategies),
                results.recommendation,
                document,
            ],
        )
        for name, s in results.strategies.items():
            res = s.resiliency
            con.execute(
                "INSERT INTO eval_strategies VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    run_id,
                    name,
                    s.performance.aggregate_gbps,
                    res.recovered,
                    res.time_to_recover_s,
                    res.dip,
                    res.bytes_delayed,
                    s.complexity.score,
                ],
            )
        _insert_flows(con, run_id, flows)
        _insert_timelines(con, run_id, results)
    return run_id


def list_runs(store: Store) -> list[RunRow]:
    """Every stored run, newest first: id, time, scenario, seed, strategies, recommendation."""
    if store.schema_version("runs") is None:
        return []
    _, rows = store.query(
        "SELECT run_id, created_at, scenario, seed, strategies, recommendation "
        "FROM eval_runs ORDER BY run_id DESC"
    )
    return [
        RunRow(
            run_id=r[0], created_at=str(r[1]), scenario=r[2], seed=r[3], strategies=r[4], recommendation=r[5]
        )
        for r in rows
    ]


def load_run(store: Store, run_id: int) -> StoredDocument:
    """A stored run: its results' JSON, its id, time and flow count."""
    if store.schema_version("runs") is None:
        raise StoreError(f"run {run_id}: the store holds no evaluation runs")
    _, rows = store.query("SELECT document, created_at FROM eval_runs WHERE run_id = ?", [run_id])
    if not rows:
        raise StoreError(f"run {run_id}: no such run in the store")
    _, counts = store.query("SELECT count(*) FROM eval_flows WHERE run_id = ?", [run_id])
    return StoredDocument(run_id, str(rows[0][1]), int(counts[0][0]), rows[0][0])
