"""Run summaries: per-connection throughput as perftest reports it, and the stable JSON."""

from __future__ import annotations

import numpy as np
import pytest

from cloudtwin.evaluation import summarize


def test_connection_throughput_spans_its_qps() -> None:
    # connection 0: two QPs of 125 MB each, start 0 and 0.002 s, finish 0.010 and 0.020 s:
    # 250 MB * 8 / 0.020 s = 100 Gbit/s -> utilization 1.0 at 100G.
    # connection 1: one QP of 125 MB, 0..0.040 s -> 25 Gbit/s, utilization 0.25.
    summary = summarize(
        "s",
        "ecmp",
        connection=np.array([0, 0, 1]),
        size_bytes=np.array([125e6, 125e6, 125e6]),
        start_s=np.array([0.0, 0.002, 0.0]),
        finish_s=np.array([0.010, 0.020, 0.040]),
        line_rate_bps=np.full(3, 100e9),
    )
    assert summary.flows == 2
    assert summary.aggregate_gbps == pytest.approx(125.0)
    assert summary.per_flow_gbps == pytest.approx(
        {"min": 25.0, "p50": 62.5, "mean": 62.5, "max": 100.0}
    )
    assert summary.fct_s == pytest.approx({"p50": 0.030, "p99": 0.0398, "max": 0.040})
    assert summary.completion_s == pytest.approx(0.040)
    assert summary.utilization == pytest.approx((1.0 + 0.25) / 2)


def test_json_is_stable() -> None:
    summary = summarize(
        "s",
        "pinning",
        np.array([0]),
        np.array([1e6]),
        np.zeros(1),
        np.array([1e-3]),
        np.array([1e10]),
    )
    data = summary.to_json()
    assert list(data) == [
        "scenario",
        "strategy",
        "flows",
        "aggregate_gbps",
        "per_flow_gbps",
        "fct_s",
        "completion_s",
        "utilization",
    ]
    assert list(data["per_flow_gbps"]) == ["min", "p50", "mean", "max"]
    assert list(data["fct_s"]) == ["p50", "p99", "max"]
    assert data["scenario"] == "s" and data["strategy"] == "pinning" and data["flows"] == 1
    assert data["aggregate_gbps"] == pytest.approx(8.0)  # 8 Mbit in 1 ms
    assert data["utilization"] == pytest.approx(0.8)
