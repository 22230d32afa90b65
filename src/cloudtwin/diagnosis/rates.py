"""Per-flow rates at sample instants, recomputed from the engine's own model.

The fluid engine keeps rates piecewise constant between events and reports only when
each flow started and finished. At a sample instant t the flows in flight are those
with `start <= t < finish - latency` (still sending), the fabric is the base capacity
with every change at or before t applied, and each flow sits on its path after every
repair at or before t. Their max-min rates (the engine's solver) are the rates the
engine used at t, so the samples are the model's rates, not an approximation of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cloudtwin.engine.maxmin import max_min_rates
from cloudtwin.topology.paths import Paths
from cloudtwin.twin import FaultedRun

__all__ = ["DEFAULT_SAMPLE_S", "MAX_SAMPLES", "FlowSamples", "sample_rates"]

#: Telemetry export interval (per-flow rate samples, NIC counter windows).
DEFAULT_SAMPLE_S = 5e-3
#: At most this many sample instants per run (the interval widens for long runs).
MAX_SAMPLES = 400


@dataclass(frozen=True, eq=False)
class FlowSamples:
    """`rate_bps[i, j]`: rate of network flow `flows[j]` at `times_s[i]` (NaN: not in flight);
    `port_share_bps[i, j]`: what it would get if only its sender's own port limited it
    (max-min over the first hops alone); `paths[epoch[i]]`: every engine flow's path."""

    times_s: np.ndarray
    flows: np.ndarray
    rate_bps: np.ndarray
    port_share_bps: np.ndarray
    epoch: np.ndarray
    paths: list[Paths]
    interval_s: float


def _epochs(run: FaultedRun, times: np.ndarray) -> tuple[list[np.ndarray], list[Paths], np.ndarray]:
    """Capacity and paths after each change, and the epoch of each sample instant."""
    capacity = run.capacity_bps.astype(float).copy()
    paths = run.paths
    capacities, all_paths, change_times = [capacity.copy()], [paths], [-np.inf]
    for change in sorted(run.changes, key=lambda c: c.time_s):
        if change.link_ids.size:
            capacity[np.asarray(change.link_ids)] = change.capacity_bps
        if change.paths is not None:
            paths = paths.replace(np.asarray(change.flows, dtype=np.int64), change.paths)
        capacities.append(capacity.copy())
        all_paths.append(paths)
        change_times.append(change.time_s)
    epoch = np.searchsorted(np.array(change_times), times, side="right") - 1
    return capacities, all_paths, epoch


def sample_rates(run: FaultedRun, interval_s: float = DEFAULT_SAMPLE_S) -> FlowSamples:
    """Every network flow's rate every `interval_s` from the first start to the last finish."""
    result = run.result
    begin, end = float(result.start_s.min()), float(result.finish_s.max())
    interval_s = max(interval_s, (end - begin) / MAX_SAMPLES)
    times = np.arange(begin, end, interval_s)
    flows = np.flatnonzero(run.network)
    sending_until = result.finish_s - run.latency_s
    capacities, all_paths, epoch = _epochs(run, times)
    rates = np.full((times.size, flows.size), np.nan)
    shares = np.full((times.size, flows.size), np.nan)
    for i, t in enumerate(times):
        live = (result.start_s <= t) & (t < sending_until)
        active = np.flatnonzero(live)
        if active.size == 0:
            continue
        sub = all_paths[epoch[i]].take(active)
        rate = max_min_rates(
            sub.indptr, sub.link_ids, capacities[epoch[i]], run.rate_cap_bps[active], sub.weights
        )
        first = sub.link_ids[sub.indptr[:-1]]
        share = max_min_rates(
            np.arange(active.size + 1), first, capacities[epoch[i]], run.rate_cap_bps[active]
        )
        full = np.full((2, live.size), np.nan)
        full[0, active], full[1, active] = rate, share
        rates[i], shares[i] = full[0, flows], full[1, flows]
    return FlowSamples(times, flows, rates, shares, epoch, all_paths, interval_s)
