"""A sweep's results, summarised: one metric per combination of the varied keys other than
the seed, as its mean and 95% confidence interval over the seeds (Student's t)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cloudtwin.errors import SweepError
from cloudtwin.store.sweeps import PointRecord
from cloudtwin.sweep.points import SEED, Plan, Point

__all__ = ["Group", "Summary", "interval95", "metric_value", "numeric_keys", "summarize"]


def metric_value(document: Any, metric: str) -> float | None:
    """The number at a dotted path (`ratios.pinning`, `results.ecmp.0.busbw_GBps`), or None.

    >>> metric_value({"a": {"b": [1, 2.5]}}, "a.b.1")
    2.5
    """
    node = document
    for part in metric.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isascii() and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    if isinstance(node, bool) or not isinstance(node, int | float):
        return None
    return float(node)


def numeric_keys(document: Any, prefix: str = "") -> list[str]:
    """Every dotted path to a number in a result document (what `metric` can name)."""
    if isinstance(document, Mapping):
        items: Sequence[tuple[str, Any]] = [(str(k), v) for k, v in document.items()]
    elif isinstance(document, list):
        items = [(str(i), v) for i, v in enumerate(document)]
    else:
        keep = isinstance(document, int | float) and not isinstance(document, bool)
        return [prefix] if keep else []
    return [key for name, value in items for key in numeric_keys(value, f"{prefix}.{name}".lstrip("."))]


def interval95(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean and the two ends of its 95% confidence interval (t distribution, n - 1 degrees).

    With one value the interval is the value itself.

    >>> interval95([1.0, 2.0, 3.0])[0]
    2.0
    """
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, mean, mean
    from scipy.special import stdtrit  # what scipy.stats.t.ppf computes, without scipy.stats' import (~1 s)

    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(stdtrit(n - 1, 0.975)) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


@dataclass(frozen=True)
class Group:
    """The points that differ only in their seed, and the metric over them."""

    values: dict[str, str]
    n: int
    mean: float
    low: float
    high: float
    least: float
    most: float
    failed: int

    def to_json(self) -> dict[str, object]:
        """`{"values", "n", "mean", "ci95_low", "ci95_high", "min", "max", "failed"}`."""
        return {
            "values": self.values,
            "n": self.n,
            "mean": self.mean,
            "ci95_low": self.low,
            "ci95_high": self.high,
            "min": self.least,
            "max": self.most,
            "failed": self.failed,
        }


@dataclass(frozen=True)
class Summary:
    """A metric summarised per group of the varied keys other than the seed."""

    metric: str
    keys: list[str]
    groups: list[Group]

    def to_json(self) -> dict[str, object]:
        """`{"metric", "keys", "groups": [...]}`."""
        return {"metric": self.metric, "keys": self.keys, "groups": [g.to_json() for g in self.groups]}


def _value_of(override: str) -> tuple[str, str]:
    key, _, value = override.partition("=")
    return key, value


def summarize(
    plan: Plan,
    points: Sequence[Point],
    records: Mapping[str, PointRecord],
    metric: str,
    by_seed: bool = False,
) -> Summary:
    """Group the stored points by their non-seed values and summarise `metric` over seeds
    (`by_seed`: group by the seed too, one point a group, to show the metric per seed)."""
    keys = [k for k in plan.keys if by_seed or k != SEED]
    grouped: dict[tuple[str, ...], list[float]] = {}
    failed: dict[tuple[str, ...], int] = {}
    sample: Any = None
    for point in points:
        values = dict(_value_of(o) for o in point.overrides)
        group = tuple(values[k] for k in keys)
        grouped.setdefault(group, [])
        failed.setdefault(group, 0)
        record = records.get(point.key)
        if record is None or record.status != "ok" or record.result is None:
            failed[group] += record is not None
            continue
        document = json.loads(record.result)
        sample = document if sample is None else sample
        value = metric_value(document, metric)
        if value is not None:
            grouped[group].append(value)
    if sample is not None and not any(grouped.values()):
        known = ", ".join(numeric_keys(sample)[:12])
        raise SweepError(f"metric {metric}: no such number in the results (some there: {known})")
    groups = []
    for group, found in grouped.items():
        mean, low, high = interval95(found) if found else (math.nan, math.nan, math.nan)
        least, most = (min(found), max(found)) if found else (math.nan, math.nan)
        values = dict(zip(keys, group, strict=True))
        groups.append(Group(values, len(found), mean, low, high, least, most, failed[group]))
    return Summary(metric, keys, groups)
