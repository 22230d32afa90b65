"""The flow cache and its slow path (AccelNet's first-packet exception path, OVS upcalls).

A flow's first packet misses the cache and takes the slow path, which sets the flow up
and inserts it; insertions are limited to R per second and serve the newest flows first (they
have the most life left to gain). Flows waiting for their insertion keep taking the
slow path; a flow that ends before its turn never leaves it.
With new flows arriving at rate r > R, the steady share of flows on the slow path is
1 - R/r. `storm` steps a connection storm through time and reports the dip in
throughput and how long recovery takes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from cloudtwin.errors import NicError

__all__ = ["StormResult", "slow_path_share", "storm"]

STEP_S = 1e-4
"""Time step of the storm model (0.1 ms)."""

MAX_STEPS = 300_000
"""The most time steps a storm is stepped over (30 s of storm model time): each step is a
turn of a Python loop, so this keeps one storm within about a minute on a loaded machine;
`duration: 1000000s` asked for 10^10 steps (80 GB per array) and ended in a MemoryError."""

RECOVERED = 0.99
"""Throughput counts as recovered at this fraction of the pre-storm throughput."""


def slow_path_share(new_flows_per_s: float, insertions_per_s: float) -> float:
    """Share of new flows that stay on the slow path: 1 - R/r when r exceeds R, else 0.

    >>> slow_path_share(200_000, 100_000)
    0.5
    """
    if new_flows_per_s <= insertions_per_s or new_flows_per_s <= 0:
        return 0.0
    return 1.0 - insertions_per_s / new_flows_per_s


@dataclass(frozen=True)
class StormResult:
    """Throughput over time through one NIC during a connection storm."""

    time_s: np.ndarray
    throughput_bps: np.ndarray
    slow_share: np.ndarray
    baseline_bps: float
    dip_bps: float
    recovery_s: float
    steady_slow_share: float

    def to_json(self) -> dict[str, float]:
        return {
            "baseline_gbps": self.baseline_bps / 1e9,
            "minimum_gbps": (self.baseline_bps - self.dip_bps) / 1e9,
            "dip_gbps": self.dip_bps / 1e9,
            "recovery_s": self.recovery_s,
            "steady_slow_path_share": self.steady_slow_share,
        }


def storm(
    fast_bps: float,
    slow_bps: float,
    base_flows_per_s: float,
    storm_flows_per_s: float,
    insertions_per_s: float,
    start_s: float,
    duration_s: float,
    lifetime_s: float,
) -> StormResult:
    """Step a storm of `storm_flows_per_s` extra new flows from `start_s` for `duration_s`.

    Traffic is shared by flows in flight: inserted ones move at the fast path's rate,
    waiting ones share the slow path's `slow_bps`. Each flow lives `lifetime_s`.
    """
    end = start_s + duration_s + 10 * lifetime_s + 0.05
    estimate = end / STEP_S
    if not estimate <= MAX_STEPS:  # NaN too
        raise NicError(
            f"nic.storm.duration: the storm's {end:.6g} s (start, duration and 10 flow lifetimes) "
            f"are {estimate:,.0f} steps of {STEP_S * 1e3:g} ms, more than the {MAX_STEPS:,} "
            f"({MAX_STEPS * STEP_S:g} s) the storm model steps through; shorten it"
        )
    steps = int(np.ceil(estimate))
    waiting: deque[list[float]] = deque()  # [arrival time, flows]
    inserted: list[list[float]] = []
    times = np.arange(steps) * STEP_S
    throughput, shares = np.zeros(steps), np.zeros(steps)
    budget = 0.0
    for k, now in enumerate(times):
        rate = base_flows_per_s + (storm_flows_per_s if start_s <= now < start_s + duration_s else 0.0)
        waiting.append([now, rate * STEP_S])
        _expire(waiting, now - lifetime_s)
        inserted = [c for c in inserted if c[0] >= now - lifetime_s]
        budget += insertions_per_s * STEP_S
        while budget > 0 and waiting:  # newest first: they have the most life left to gain
            moved = min(budget, waiting[-1][1])
            inserted.append([waiting[-1][0], moved])
            waiting[-1][1] -= moved
            budget -= moved
            if waiting[-1][1] <= 1e-12:
                waiting.pop()
        budget = min(budget, insertions_per_s * STEP_S)  # unused insertions do not accumulate
        slow = sum(c for _, c in waiting)
        fast = sum(c for _, c in inserted)
        share = slow / (slow + fast) if slow + fast > 0 else 0.0
        shares[k] = share
        throughput[k] = fast_bps * (1 - share) + min(fast_bps * share, slow_bps)
    before = times < start_s
    baseline = float(throughput[before].mean()) if before.any() else float(throughput[0])
    recovery = _recovery(times, throughput, baseline, start_s + duration_s)
    return StormResult(
        times,
        throughput,
        shares,
        baseline,
        baseline - float(throughput.min()),
        recovery,
        slow_path_share(base_flows_per_s + storm_flows_per_s, insertions_per_s),
    )


def _expire(cohorts: deque[list[float]], before: float) -> None:
    while cohorts and cohorts[0][0] < before:
        cohorts.popleft()


def _recovery(times: np.ndarray, throughput: np.ndarray, baseline: float, end_s: float) -> float:
    """Seconds from the storm's end until throughput is back to RECOVERED x baseline for good."""
    low = np.flatnonzero(throughput < RECOVERED * baseline)
    if low.size == 0:
        return 0.0
    return max(0.0, float(times[low[-1]] + (times[1] - times[0]) - end_s))
