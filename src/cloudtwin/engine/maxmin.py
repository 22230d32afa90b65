"""Exact max-min fair rates by progressive filling (water-filling), vectorised over entries.

Every flow has a rate cap (its NIC line rate) and crosses links with a weight (the
fraction of its rate on that link: 1 on a single path). All unfrozen flows rise together;
a flow freezes when a link it crosses saturates or when it reaches its cap. The result
meets the max-min conditions: every flow is at its cap or crosses a saturated link on
which no flow gets more.
"""

from __future__ import annotations

import numpy as np

from cloudtwin.engine.compiled import AVAILABLE as COMPILED
from cloudtwin.engine.compiled import compiled_fill
from cloudtwin.errors import EngineError

__all__ = ["COMPILED", "RELATIVE_TOLERANCE", "max_min_rates", "water_fill"]

RELATIVE_TOLERANCE = 1e-9


def water_fill(
    entry_flow: np.ndarray,
    entry_link: np.ndarray,
    entry_weight: np.ndarray,
    capacity_bps: np.ndarray,
    rate_cap_bps: np.ndarray,
    compiled: bool | None = None,
) -> np.ndarray:
    """Max-min rates for flows 0..len(rate_cap_bps)-1 given their link entries.

    `entry_link` indexes `capacity_bps`; links that no entry uses cost nothing, so callers
    may pass compact arrays. Flows without entries get their cap. `compiled` picks the
    numba kernel (default: when numba is installed) or the numpy one.
    """
    if compiled is None:
        compiled = COMPILED
    if compiled:
        return compiled_fill(
            np.ascontiguousarray(entry_flow, dtype=np.int64),
            np.ascontiguousarray(entry_link, dtype=np.int64),
            np.ascontiguousarray(entry_weight, dtype=np.float64),
            np.ascontiguousarray(capacity_bps, dtype=np.float64),
            np.ascontiguousarray(rate_cap_bps, dtype=np.float64),
            RELATIVE_TOLERANCE,
        )
    return _water_fill_numpy(entry_flow, entry_link, entry_weight, capacity_bps, rate_cap_bps)


def _water_fill_numpy(
    entry_flow: np.ndarray,
    entry_link: np.ndarray,
    entry_weight: np.ndarray,
    capacity_bps: np.ndarray,
    rate_cap_bps: np.ndarray,
) -> np.ndarray:
    flows = rate_cap_bps.size
    rate = np.array(rate_cap_bps, dtype=float)
    if flows == 0:
        return rate
    links = capacity_bps.size
    residual = np.array(capacity_bps, dtype=float)
    threshold = RELATIVE_TOLERANCE * residual
    unfrozen = np.bincount(entry_flow, minlength=flows) > 0
    level = 0.0
    flow, link, weight = entry_flow, entry_link, entry_weight
    while flow.size:
        load = np.bincount(link, weight, minlength=links)
        used = load > 0
        link_step = np.min(residual[used] / load[used]) if used.any() else np.inf
        cap_step = np.min(rate_cap_bps[unfrozen]) - level
        step = max(min(link_step, cap_step), 0.0)
        level += step
        residual[used] -= step * load[used]
        saturated = used & (residual <= threshold)
        done = unfrozen & (rate_cap_bps <= level * (1 + RELATIVE_TOLERANCE))
        done[flow[saturated[link]]] = True
        if not done.any():  # pragma: no cover - guarded by the steps above
            raise EngineError("water-filling made no progress")
        rate[done & unfrozen] = level
        unfrozen &= ~done
        keep = unfrozen[flow]
        flow, link, weight = flow[keep], link[keep], weight[keep]
    return rate


def max_min_rates(
    indptr: np.ndarray,
    link_ids: np.ndarray,
    capacity_bps: np.ndarray,
    rate_cap_bps: np.ndarray,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """Max-min fair rates of flows given as CSR paths (see `Paths`).

    >>> # two flows share a 10 bit/s link; one is capped at 2: the other gets 8
    >>> max_min_rates(np.array([0, 1, 2]), np.array([0, 0]), np.array([10.0]), np.array([2.0, 99.0]))
    array([2., 8.])
    """
    indptr = np.asarray(indptr)
    link_ids = np.asarray(link_ids)
    flows = indptr.size - 1
    if np.asarray(rate_cap_bps).size != flows:
        raise EngineError(
            f"rate_cap_bps has {np.asarray(rate_cap_bps).size} entries for {flows} flows"
        )
    entry_flow = np.repeat(np.arange(flows), np.diff(indptr))
    entry_weight = np.ones(link_ids.size) if weights is None else np.asarray(weights, dtype=float)
    return water_fill(
        entry_flow,
        link_ids,
        entry_weight,
        np.asarray(capacity_bps, dtype=float),
        np.asarray(rate_cap_bps, dtype=float),
    )
