"""Summaries: metric paths, the t interval by hand, grouping over seeds, and the plot."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudtwin.errors import SweepError
from cloudtwin.store.sweeps import PointRecord
from cloudtwin.sweep import Plan, interval95, metric_value, parse_vary, summarize
from cloudtwin.sweep.plot import plot_summary
from cloudtwin.sweep.summary import numeric_keys


def test_metric_paths_reach_into_dicts_and_lists() -> None:
    document = {"ratios": {"pinning": 1.5}, "results": {"ecmp": [{"busbw_GBps": 12.0}]}, "ok": True}
    assert metric_value(document, "ratios.pinning") == 1.5
    assert metric_value(document, "results.ecmp.0.busbw_GBps") == 12.0
    assert metric_value(document, "results.ecmp.1.busbw_GBps") is None
    assert metric_value(document, "ok") is None  # a flag is not a number
    assert numeric_keys(document) == ["ratios.pinning", "results.ecmp.0.busbw_GBps"]


def test_interval_by_hand() -> None:
    # mean 2, sample sd 1, t(0.975, 2) = 4.302652729911275: half-width 4.3027 / sqrt(3)
    mean, low, high = interval95([1.0, 2.0, 3.0])
    half = 4.302652729911275 / math.sqrt(3)
    assert mean == 2.0 and low == pytest.approx(2 - half) and high == pytest.approx(2 + half)
    assert interval95([5.0]) == (5.0, 5.0, 5.0)


@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=30))
def test_interval_holds_the_mean_and_is_symmetric(values: list[float]) -> None:
    mean, low, high = interval95(values)
    assert low <= mean + 1e-6 and mean <= high + 1e-6
    assert high - mean == pytest.approx(mean - low, rel=1e-9, abs=1e-6)


def records_for(plan: Plan, value: dict[str, float]) -> tuple[list, dict[str, PointRecord]]:
    points = plan.points("t")
    records = {}
    for p in points:
        seed = int(dict(o.split("=") for o in p.overrides)["seed"])
        strategy = dict(o.split("=") for o in p.overrides)["routing.strategy"]
        document = {"aggregate_gbps": value[strategy] * seed}
        records[p.key] = PointRecord(p.key, p.overrides, "ok", json.dumps(document), None, 0.0)
    return points, records


def test_groups_are_the_non_seed_values_over_seeds() -> None:
    plan = Plan((parse_vary("seed=1..4"), parse_vary("routing.strategy=ecmp,pinning")))
    points, records = records_for(plan, {"ecmp": 1.0, "pinning": 2.0})
    del records[points[0].key]  # seed 1, ecmp: not stored yet
    summary = summarize(plan, points, records, "aggregate_gbps")
    assert summary.keys == ["routing.strategy"]
    ecmp, pinning = summary.groups
    assert ecmp.values == {"routing.strategy": "ecmp"}
    assert (ecmp.n, ecmp.mean, ecmp.least, ecmp.most) == (3, 3.0, 2, 4)
    assert (pinning.n, pinning.mean) == (4, 5.0)
    figure = plot_summary(summary, "routing.strategy", [], "title")
    assert len(figure.axes[0].containers) == 1  # one line with error bars


def test_a_metric_nowhere_in_the_results_is_an_error() -> None:
    plan = Plan((parse_vary("seed=1..2"), parse_vary("routing.strategy=ecmp")))
    points, records = records_for(plan, {"ecmp": 1.0})
    with pytest.raises(SweepError, match="metric nope: no such number in the results .*aggregate_gbps"):
        summarize(plan, points, records, "nope")
