"""Resiliency metrics: how deep a fault cuts throughput, how fast it recovers, what it costs.

Both runs (without and with faults) give the aggregate sending rate as a step function
(`SimResult.timeline_*`). For each fault that takes a link down:

- the *pre-fault level* is the faulted run's aggregate rate just before the fault;
- it has *recovered* at the first instant when no flow in flight sits on a dead link and
  the rate is at least 95% of the pre-fault level, or of the fault-free run's rate at
  that instant if that is lower (flows that finish lower the level on their own);
- the *dip* is the deepest shortfall between the fault and the recovery, 1 - rate /
  that same reference (so flows finishing on their own do not count as a dip).

Instants less than `SAME_INSTANT_S` apart count as one, judged at the latest of them: the
two runs reach the same event (a step of an unaffected job) at times that differ in the
last bits, and in between one run would seem idle while the other sends.

`bytes_delayed` is the most bytes the faulted run was ever behind the fault-free one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cloudtwin.engine.simulator import SimResult
from cloudtwin.evaluation.results import FaultOutcome, Timeline, TimelineBins
from cloudtwin.faults.plan import RepairPlan
from cloudtwin.twin.timeline import bytes_behind, delivered_bits

__all__ = [
    "RECOVERY_LEVEL",
    "SAME_INSTANT_S",
    "PLOT_BINS",
    "TIMELINE_POINTS",
    "FaultOutcome",
    "binned_timeline",
    "bytes_behind",
    "fault_outcomes",
    "sample_timeline",
    "stall_seconds",
    "step_value",
]

RECOVERY_LEVEL = 0.95
SAME_INSTANT_S = 1e-9
TIMELINE_POINTS = 1500
PLOT_BINS = 400


def step_value(times: np.ndarray, values: np.ndarray, at: np.ndarray | float) -> np.ndarray:
    """The value of a step function (value i holds from times[i] on; 0 before) at `at`.

    >>> step_value(np.array([0.0, 1.0]), np.array([5.0, 2.0]), np.array([-1.0, 0.5, 1.0]))
    array([0., 5., 2.])
    """
    index = np.searchsorted(times, at, side="right") - 1
    return np.where(index >= 0, values[np.maximum(index, 0)], 0.0)


def _before(times: np.ndarray, values: np.ndarray, at: float) -> float:
    """The rate just before `at` (an event within `SAME_INSTANT_S` before it is the same instant)."""
    index = int(np.searchsorted(times, at - SAME_INSTANT_S, side="left")) - 1
    return float(values[index]) if index >= 0 else 0.0


def _instants(points: np.ndarray) -> np.ndarray:
    """Sorted `points` less the ones within `SAME_INSTANT_S` of the next (the last one stays).

    >>> _instants(np.array([1.0, 1.0 + 1e-15, 2.0]))
    array([1., 2.])
    """
    if points.size < 2:
        return points
    keep = np.append(np.diff(points) >= SAME_INSTANT_S, True)
    return points[keep]


def _stalled_in_flight(plan: RepairPlan, start: np.ndarray, finish: np.ndarray, at: float) -> bool:
    segment = int(np.searchsorted(plan.segment_s, at, side="right")) - 1
    if segment < 0:
        return False
    flying = (start <= at) & (finish > at)
    return bool(np.any(plan.stalled[segment] & flying))


def fault_outcomes(
    baseline: SimResult,
    faulted: SimResult,
    plan: RepairPlan,
    fault_times: Sequence[float],
    start: np.ndarray,
    finish: np.ndarray,
) -> list[FaultOutcome]:
    """Dip and recovery of each fault (`start`/`finish` per connection, faulted run)."""
    bt, bv = baseline.timeline_s, baseline.timeline_bps
    ft, fv = faulted.timeline_s, faulted.timeline_bps
    assert bt is not None and bv is not None and ft is not None and fv is not None
    outcomes = []
    for at in fault_times:
        pre = _before(ft, fv, at) or float(step_value(bt, bv, at))
        points = np.union1d(np.union1d(ft, bt), plan.segment_s)
        points = _instants(np.concatenate(([at], points[points > at])))
        rate = step_value(ft, fv, points)
        reference = np.minimum(pre, step_value(bt, bv, points))
        recovered_at = None
        for i, point in enumerate(points.tolist()):
            if rate[i] >= RECOVERY_LEVEL * reference[i] * (1 - 1e-9) and not _stalled_in_flight(
                plan, start, finish, point
            ):
                recovered_at = i
                break
        if recovered_at is None:
            end = baseline.completion_s if baseline.completion_s > at else points[-1]
            window = np.flatnonzero(points < end) if np.any(points < end) else np.array([0])
        else:
            window = np.arange(max(recovered_at, 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            shortfall = np.where(reference[window] > 0, 1 - rate[window] / reference[window], 0.0)
        dip = float(np.clip(shortfall.max(), 0.0, 1.0))
        outcomes.append(
            FaultOutcome(
                at_s=float(at),
                pre_fault_gbps=pre / 1e9,
                dip=dip,
                recovered=recovered_at is not None,
                time_to_recover_s=None if recovered_at is None else float(points[recovered_at] - at),
            )
        )
    return outcomes


def stall_seconds(
    plan: RepairPlan, start: np.ndarray, finish: np.ndarray, which: str = "stalled"
) -> np.ndarray:
    """Per connection: seconds in flight on a dead link (`stalled`) or a dead/degraded one (`impaired`)."""
    mask = plan.stalled if which == "stalled" else plan.impaired
    total = np.zeros(start.size)
    ends = np.append(plan.segment_s[1:], np.inf)[: plan.segment_s.size]  # none: no change
    for begin, end, row in zip(plan.segment_s, ends, mask, strict=True):
        overlap = np.minimum(end, finish) - np.maximum(begin, start)
        total += np.where(row, np.maximum(overlap, 0.0), 0.0)
    return total


def sample_timeline(
    baseline: SimResult, faulted: SimResult, marks: Sequence[float] = ()
) -> Timeline:
    """Both runs' aggregate rates (Gbps) at their breakpoints up to the last flow's finish
    (sampled evenly, plus the fault and repair times, when there are more than TIMELINE_POINTS)."""
    bt, bv = baseline.timeline_s, baseline.timeline_bps
    ft, fv = faulted.timeline_s, faulted.timeline_bps
    assert bt is not None and bv is not None and ft is not None and fv is not None
    end = max(baseline.completion_s, faulted.completion_s)
    points = np.union1d(bt, ft)
    points = np.union1d(points[points < end], [end])  # changes after the last flow show nothing
    if points.size > TIMELINE_POINTS:
        marks_in = np.asarray([m for m in marks if points[0] <= m <= end], dtype=float)
        points = np.union1d(np.linspace(points[0], end, TIMELINE_POINTS), marks_in)
    return Timeline(
        t_s=[round(float(t), 9) for t in points],
        baseline_gbps=[round(float(v) / 1e9, 3) for v in step_value(bt, bv, points)],
        faulted_gbps=[round(float(v) / 1e9, 3) for v in step_value(ft, fv, points)],
    )


def binned_timeline(baseline: SimResult, faulted: SimResult, bins: int = PLOT_BINS) -> TimelineBins:
    """Both runs' average rates (Gbps) over `bins` equal bins up to the last finish: what a
    plot shows (a collective's instantaneous rate swings between its pipeline steps)."""
    bt, bv = baseline.timeline_s, baseline.timeline_bps
    ft, fv = faulted.timeline_s, faulted.timeline_bps
    assert bt is not None and bv is not None and ft is not None and fv is not None
    end = max(baseline.completion_s, faulted.completion_s)
    edges = np.linspace(0.0, end, bins + 1)
    width = end / bins if end > 0 else 1.0

    def average(times: np.ndarray, values: np.ndarray) -> list[float]:
        sent = delivered_bits(times, values, edges)
        return [round(float(v) / 1e9, 3) for v in np.diff(sent) / width]

    return TimelineBins(
        bin_s=width,
        t_s=[round(float(t), 9) for t in edges[:-1]],
        baseline_gbps=average(bt, bv),
        faulted_gbps=average(ft, fv),
    )
