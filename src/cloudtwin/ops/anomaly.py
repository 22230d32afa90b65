"""Anomalies in counts over time windows: bursts, new templates and templates that fall silent."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = ["Anomaly", "AnomalyKind", "DetectorConfig", "detect_changes"]

AnomalyKind = Literal["burst", "new", "silent", "pca"]
Counts = npt.NDArray[np.float64]


@dataclass(frozen=True)
class DetectorConfig:
    """Settings of the change detector.

    A window's count is compared with the mean of the same key's previous ``history``
    windows; the score is the surprise ``-log10 P`` under a Poisson law with that mean
    (``P(X >= count)`` for a burst, ``P(X = 0)`` for silence). ``threshold`` is the
    score from which a burst or silence is flagged; 6 means odds of one in a million.
    A burst needs the key to have been seen in ``min_history`` earlier windows, and is
    measured against the larger of that mean and the key's mean count over all earlier
    windows in which it was active.
    A key never seen before is always flagged as new once ``min_history`` windows
    passed, scored against a prior of one line spread over its history.
    """

    history: int = 24
    min_history: int = 3
    threshold: float = 6.0

    def __post_init__(self) -> None:
        if self.history < 1 or self.min_history < 1:
            raise ValueError(f"history and min_history must be >= 1, got {self}")
        if self.threshold < 0:
            raise ValueError(f"threshold must be >= 0, got {self.threshold}")


@dataclass(frozen=True)
class Anomaly:
    """One flagged change: what, where (window and key), how many lines, and how surprising."""

    kind: AnomalyKind
    window_start: datetime
    key: str
    count: int
    expected: float
    score: float


def detect_changes(
    counts: Counts,
    windows: Sequence[datetime],
    keys: Sequence[str],
    config: DetectorConfig | None = None,
) -> list[Anomaly]:
    """Flag bursts, new keys and keys that fall silent in a windows x keys count matrix.

    Windows must be consecutive (including empty ones). The result is sorted by score,
    highest first, then by window and key, so it is deterministic.

    >>> from datetime import datetime, timedelta
    >>> t0 = datetime(2026, 1, 1)
    >>> counts = np.array([[20, 0], [22, 0], [19, 0], [21, 0], [0, 3]], dtype=float)
    >>> found = detect_changes(counts, [t0 + timedelta(hours=h) for h in range(5)],
    ...                        ["link up", "fan failed"])
    >>> [(a.kind, a.key, a.window_start.hour) for a in found]
    [('silent', 'link up', 4), ('new', 'fan failed', 4)]
    """
    config = config or DetectorConfig()
    counts = np.asarray(counts, dtype=np.float64)
    n_windows, n_keys = counts.shape
    if n_windows != len(windows) or n_keys != len(keys):
        raise ValueError(f"counts are {counts.shape}, windows {len(windows)}, keys {len(keys)}")
    expected, active, depth = _baseline(counts, config.history)
    seen_before = active > 0
    # A key that comes and goes in bursts (sessions, cron jobs) is judged by its usual
    # size when active, not by a rolling mean that its quiet windows pull to zero.
    totals = np.vstack([np.zeros((1, n_keys)), np.cumsum(counts, axis=0)])[:-1]
    when_active = np.divide(totals, active, out=np.zeros_like(totals), where=active > 0)
    usual = np.maximum(expected, when_active)
    found: list[Anomaly] = []
    ready = depth >= config.min_history
    established = ready[:, None] & (active >= config.min_history)
    for w, k in zip(*np.nonzero(established & (counts > usual)), strict=True):
        score = _burst_score(counts[w, k], usual[w, k])
        if score >= config.threshold:
            found.append(_anomaly("burst", w, k, counts, usual, score, windows, keys))
    first_seen = (counts > 0) & ~seen_before
    for w, k in zip(*np.nonzero(ready[:, None] & first_seen), strict=True):
        prior = 1.0 / (depth[w] + 1.0)  # one pseudo-line spread over the history
        score = _burst_score(counts[w, k], prior)
        found.append(_anomaly("new", w, k, counts, expected, score, windows, keys, prior))
    active_before = np.vstack([np.zeros((1, n_keys), bool), counts[:-1] > 0])
    went_silent = (counts == 0) & active_before & ready[:, None]
    for w, k in zip(*np.nonzero(went_silent), strict=True):
        score = expected[w, k] / math.log(10)
        if score >= config.threshold:
            found.append(_anomaly("silent", w, k, counts, expected, score, windows, keys))
    found.sort(key=lambda a: (-a.score, a.window_start, a.key, a.kind))
    return found


def _baseline(
    counts: Counts, history: int
) -> tuple[Counts, npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """Per window: the mean of each key's previous ``history`` windows, in how many of
    all previous windows the key was seen, and how many history windows there are."""
    n_windows = counts.shape[0]
    zeros = np.zeros((1, counts.shape[1]))
    cumulative = np.vstack([zeros, np.cumsum(counts, axis=0)])
    seen = np.vstack([zeros, np.cumsum(counts > 0, axis=0)])
    idx = np.arange(n_windows)
    start = np.maximum(idx - history, 0)
    depth = idx - start
    sums = cumulative[idx] - cumulative[start]
    expected = np.divide(sums, depth[:, None], out=np.zeros_like(sums), where=depth[:, None] > 0)
    return expected, seen[idx], depth


def _burst_score(count: float, expected: float) -> float:
    """``-log10 P(X >= count)`` for ``X ~ Poisson(expected)``, summed in log space.

    >>> round(_burst_score(3, 0.2), 2)  # P(X >= 3) = 0.00115
    2.94
    """
    mu = max(expected, 1e-9)
    k = int(count)
    if k <= 0:
        return 0.0
    if k <= mu:  # not in the upper tail: take the complement of the lower terms
        lower = sum(math.exp(_log_pmf(j, mu)) for j in range(k))
        return -math.log10(max(1.0 - lower, 1e-300))
    log_terms = [_log_pmf(k, mu)]
    j = k
    while len(log_terms) < 10_000 and log_terms[-1] - log_terms[0] > -40.0:
        j += 1
        log_terms.append(log_terms[-1] + math.log(mu / j))
    top = log_terms[0]
    log_sf = top + math.log(sum(math.exp(t - top) for t in log_terms))
    return -log_sf / math.log(10)


def _log_pmf(k: int, mu: float) -> float:
    return -mu + k * math.log(mu) - math.lgamma(k + 1)


def _anomaly(
    kind: AnomalyKind,
    w: int,
    k: int,
    counts: Counts,
    expected: Counts,
    score: float,
    windows: Sequence[datetime],
    keys: Sequence[str],
    prior: float | None = None,
) -> Anomaly:
    mean = float(expected[w, k]) if prior is None else prior
    return Anomaly(kind, windows[w], keys[k], int(counts[w, k]), round(mean, 4), round(score, 3))
