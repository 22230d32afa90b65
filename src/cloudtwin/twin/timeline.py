"""What a run delivered over time: the integral of the engine's aggregate-rate timeline, and
how far one run fell behind another (the bytes a fault delayed)."""

from __future__ import annotations

import numpy as np

from cloudtwin.engine.simulator import SimResult

__all__ = ["bytes_behind", "delivered_bits"]


def delivered_bits(times: np.ndarray, values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Bits sent by each instant of `at` (the integral of the step function `values` at `times`)."""
    if times.size == 0:
        return np.zeros_like(at)
    cumulative = np.concatenate(([0.0], np.cumsum(values[:-1] * np.diff(times))))
    index = np.searchsorted(times, at, side="right") - 1
    safe = np.maximum(index, 0)
    return np.where(index >= 0, cumulative[safe] + values[safe] * (at - times[safe]), 0.0)


def bytes_behind(baseline: SimResult, faulted: SimResult) -> float:
    """The most bytes the faulted run was ever behind the fault-free one (0 without timelines).

    >>> import numpy as np
    >>> def ran(times, bps):  # one flow; the aggregate rate after each event
    ...     t, v = np.array(times), np.array(bps)
    ...     return SimResult(np.zeros(1), np.ones(1), 1, 1, timeline_s=t, timeline_bps=v)
    >>> bytes_behind(ran([0.0, 1.0], [8.0, 0.0]), ran([0.0, 2.0], [4.0, 0.0]))
    0.5
    """
    bt, bv, ft, fv = baseline.timeline_s, baseline.timeline_bps, faulted.timeline_s, faulted.timeline_bps
    if bt is None or bv is None or ft is None or fv is None or not bt.size or not ft.size:
        return 0.0
    at = np.union1d(bt, ft)
    gap = delivered_bits(bt, bv, at) - delivered_bits(ft, fv, at)
    return float(max(gap.max(initial=0.0), 0.0) / 8.0)
