"""Network tomography: links that degraded flows share, and that healthy flows avoid.

Each flow sample has a time, a rate and the links of the flow's path at that time. A
flow's *usual* rate is a high quantile of its own samples (what it gets when nothing is
wrong); a sample is *degraded* when its rate falls below `degraded_below` times that,
with severity `1 - rate / usual` (1 for a stalled flow). At each sample instant every
degraded flow votes its severity, split evenly over the links of its path (as in 007,
NSDI 2018), and a link's votes at that instant are weighted by the share of the flows
crossing it that are degraded: a link that carries many healthy flows is not the cause.
A link's score is the sum over instants.

Given the links' capacities, a degraded sample that contention explains does not count:
the flow is at its max-min bottleneck on a link that carries (nearly) its whole capacity
(its rate is the largest of the flows there), so it lost rate to other traffic, not to a
fault. A failed or degraded link carries less than its capacity, so its flows still vote.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SATURATED", "TomographyConfig", "contended", "degraded_samples", "link_scores", "link_votes"]

#: A link that carries this share of its capacity is saturated (tunnel headers and
#: encryption take a few percent of a gateway's or WAN link's capacity).
SATURATED = 0.9


@dataclass(frozen=True)
class TomographyConfig:
    """Thresholds of the tomography: what counts as usual and as degraded."""

    degraded_below: float = 0.5
    usual_quantile: float = 0.9

    def __post_init__(self) -> None:
        if not 0 < self.degraded_below <= 1 or not 0 < self.usual_quantile <= 1:
            raise ValueError(f"degraded_below and usual_quantile must be in (0, 1], got {self}")


def degraded_samples(
    flow: np.ndarray, rate_bps: np.ndarray, config: TomographyConfig | None = None
) -> np.ndarray:
    """Per sample: its severity (0 healthy, up to 1 stalled) against its flow's usual rate."""
    config = config or TomographyConfig()
    flow = np.asarray(flow, dtype=np.int64)
    rate = np.asarray(rate_bps, dtype=float)
    order = np.argsort(flow, kind="stable")
    keys, starts = np.unique(flow[order], return_index=True)
    ends = np.append(starts[1:], order.size)
    usual = np.zeros(flow.size)
    for start, end in zip(starts, ends, strict=True):
        rows = order[start:end]
        usual[rows] = np.quantile(rate[rows], config.usual_quantile)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(usual > 0, rate / usual, 1.0)
    return np.where(relative < config.degraded_below, 1.0 - relative, 0.0)


def contended(
    sample: np.ndarray,
    rate_bps: np.ndarray,
    path_indptr: np.ndarray,
    path_links: np.ndarray,
    capacity_bps: np.ndarray,
) -> np.ndarray:
    """Per sample: whether the flow sits at its bottleneck on a saturated link then (its
    rate above 0 and the largest there, the link carrying `SATURATED` of its capacity).

    >>> # one instant: flows 0 and 1 fill link 0 (10 bit/s); flow 2 crawls alone on link 1
    >>> contended(np.zeros(3, dtype=int), np.array([5.0, 5.0, 1.0]), np.array([0, 1, 2, 3]),
    ...           np.array([0, 0, 1]), np.array([10.0, 10.0])).tolist()
    [True, True, False]
    """
    sample = np.asarray(sample, dtype=np.int64)
    rate = np.asarray(rate_bps, dtype=float)
    lengths = np.diff(path_indptr)
    row = np.repeat(np.arange(sample.size), lengths)
    link = np.asarray(path_links, dtype=np.int64)
    links = int(capacity_bps.size)
    key = sample[row] * links + link
    size = (int(sample.max()) + 1 if sample.size else 0) * links
    load = np.bincount(key, rate[row], minlength=size)
    top = np.zeros(size)
    np.maximum.at(top, key, rate[row])
    at_bottleneck = (
        (load[key] >= SATURATED * capacity_bps[link]) & (rate[row] > 0) & (rate[row] >= top[key] * (1 - 1e-9))
    )
    return np.bincount(row, at_bottleneck, minlength=sample.size) > 0


def link_scores(
    sample: np.ndarray,
    flow: np.ndarray,
    rate_bps: np.ndarray,
    path_indptr: np.ndarray,
    path_links: np.ndarray,
    link_count: int,
    config: TomographyConfig | None = None,
    capacity_bps: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Score, degraded and healthy sample counts per link.

    Row r is flow `flow[r]` at instant `sample[r]` with `rate_bps[r]`, on the links
    `path_links[path_indptr[r]:path_indptr[r + 1]]`.

    >>> # three flows, one instant: the two stalled ones share link 2, the healthy one doesn't
    >>> score, bad, good = link_scores(
    ...     np.zeros(6, dtype=int), np.array([0, 1, 2, 0, 1, 2]),
    ...     np.array([9.0, 9.0, 9.0, 0.0, 0.0, 9.0]) * [1, 1, 1, 1, 1, 1],
    ...     np.array([0, 2, 4, 6, 8, 10, 12]), np.array([0, 1, 0, 1, 0, 1, 0, 2, 1, 2, 0, 1]), 3)
    >>> int(np.argmax(score)), bad.tolist(), good.tolist()
    (2, [1, 1, 2], [4, 4, 0])
    """
    sample = np.asarray(sample, dtype=np.int64)
    severity = degraded_samples(flow, rate_bps, config)
    if capacity_bps is not None and sample.size:
        severity = np.where(contended(sample, rate_bps, path_indptr, path_links, capacity_bps), 0.0, severity)
    return link_votes(sample, severity, path_indptr, path_links, link_count)


def link_votes(
    sample: np.ndarray, severity: np.ndarray, path_indptr: np.ndarray, path_links: np.ndarray, link_count: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Score, degraded and healthy sample counts per link, from each sample's severity."""
    sample = np.asarray(sample, dtype=np.int64)
    lengths = np.diff(path_indptr)
    row = np.repeat(np.arange(sample.size), lengths)
    link = np.asarray(path_links, dtype=np.int64)
    bad = severity[row] > 0
    instants = int(sample.max()) + 1 if sample.size else 0
    key = sample[row] * link_count + link
    size = instants * link_count
    votes = np.bincount(key, severity[row] / lengths[row], minlength=size)
    degraded = np.bincount(key, bad, minlength=size)
    healthy = np.bincount(key, ~bad, minlength=size)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(degraded > 0, degraded / (degraded + healthy), 0.0)
    score = (votes * share).reshape(instants, link_count).sum(axis=0)
    per_link = (degraded.reshape(instants, link_count).sum(axis=0),
                healthy.reshape(instants, link_count).sum(axis=0))
    return score, per_link[0].astype(np.int64), per_link[1].astype(np.int64)
