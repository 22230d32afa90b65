"""Performance metrics of a run, computed per connection as perftest reports each pair."""

from __future__ import annotations

import numpy as np

from cloudtwin.engine.simulator import SimResult
from cloudtwin.evaluation.frozen import Frozen
from cloudtwin.twin.jobs import Workbench

__all__ = ["RunSummary", "summarize", "summarize_rows"]


class RunSummary(Frozen):
    """The summary `cloudtwin run` prints; its JSON form (`to_json()`) is its fields in order:
    `{"scenario", "strategy", "flows", "aggregate_gbps", "per_flow_gbps", "fct_s", ...}`."""

    scenario: str
    strategy: str
    flows: int
    aggregate_gbps: float
    per_flow_gbps: dict[str, float]
    fct_s: dict[str, float]
    completion_s: float
    utilization: float


def summarize(
    scenario: str,
    strategy: str,
    connection: np.ndarray,
    size_bytes: np.ndarray,
    start_s: np.ndarray,
    finish_s: np.ndarray,
    line_rate_bps: np.ndarray,
) -> RunSummary:
    """Per connection: bytes over (last QP finish - first QP start); then the statistics.

    >>> s = summarize("x", "ecmp", np.array([0, 1]), np.array([125e6, 125e6]),
    ...               np.zeros(2), np.array([0.01, 0.02]), np.array([100e9, 100e9]))
    >>> s.aggregate_gbps, s.utilization
    (150.0, 0.75)
    """
    ids, conn = np.unique(connection, return_inverse=True)
    count = ids.size
    bytes_ = np.bincount(conn, size_bytes, minlength=count)
    begin = np.full(count, np.inf)
    np.minimum.at(begin, conn, start_s)
    end = np.full(count, -np.inf)
    np.maximum.at(end, conn, finish_s)
    rate = np.full(count, np.inf)
    np.minimum.at(rate, conn, line_rate_bps)
    fct = end - begin
    gbps = bytes_ * 8.0 / fct / 1e9
    return RunSummary(
        scenario=scenario,
        strategy=strategy,
        flows=int(count),
        aggregate_gbps=float(gbps.sum()),
        per_flow_gbps=_stats(gbps, ("min", "p50", "mean", "max")),
        fct_s=_stats(fct, ("p50", "p99", "max")),
        completion_s=float(end.max() - begin.min()),
        utilization=float(np.mean(gbps * 1e9 / rate)),
    )


def summarize_rows(
    scenario: str, strategy: str, bench: Workbench, result: SimResult, rows: np.ndarray | None = None
) -> RunSummary:
    """The summary of these engine flows' network QPs (all flows by default); NVLink
    segments inside hosts are left out unless nothing else runs (a single host)."""
    rows = np.arange(result.finish_s.size) if rows is None else rows
    network = rows[bench.owner[rows] >= 0]
    rows = network if network.size else rows
    return summarize(
        scenario,
        strategy,
        bench.group[rows],
        bench.size_bytes[rows],
        result.start_s[rows],
        result.finish_s[rows],
        bench.rate_cap_bps[rows],
    )


def _stats(values: np.ndarray, keys: tuple[str, ...]) -> dict[str, float]:
    table = {
        "min": lambda v: np.min(v),
        "p50": lambda v: np.percentile(v, 50),
        "p99": lambda v: np.percentile(v, 99),
        "mean": lambda v: np.mean(v),
        "max": lambda v: np.max(v),
    }
    return {key: float(table[key](values)) for key in keys}
