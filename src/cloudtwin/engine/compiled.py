"""Max-min rates by the bottleneck-link algorithm, as loops compiled with numba when present.

Progressive filling (numpy, `maxmin.py`) raises every unfrozen flow together and pays
a pass over all entries per distinct rate level; with hundreds of levels that is the
cost of every event in a large run. This kernel gives the same answer by the classic
equivalent: repeatedly take the link whose fair share (residual capacity over the
weight of its unfrozen flows) is smallest, freeze its flows at that share, and update
only the links those flows cross; a flow's cap acts as a link of its own. Shares only
grow as flows freeze, so a heap with lazy deletion gives O(entries x log entries).
Without numba, `AVAILABLE` is False and callers use the numpy version.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import numpy as np

__all__ = ["AVAILABLE", "bottleneck_fill", "compiled_fill", "compiled_settle", "settle_region"]


def bottleneck_fill(
    entry_flow: np.ndarray,
    entry_link: np.ndarray,
    entry_weight: np.ndarray,
    capacity_bps: np.ndarray,
    rate_cap_bps: np.ndarray,
    tolerance: float,
) -> np.ndarray:  # pragma: no cover - exercised compiled; checked against numpy in tests
    """Max-min rates; same contract as `cloudtwin.engine.maxmin.water_fill`."""
    flows = rate_cap_bps.size
    links = capacity_bps.size
    nnz = entry_flow.size
    rate = rate_cap_bps.astype(np.float64).copy()
    residual = capacity_bps.astype(np.float64).copy()
    weight_sum = np.zeros(links)
    # entries grouped by link (their flows) and by flow (their links and weights)
    link_ptr = np.zeros(links + 1, dtype=np.int64)
    flow_ptr = np.zeros(flows + 1, dtype=np.int64)
    grouped = True  # entries already in flow order (the usual case)
    for e in range(nnz):
        weight_sum[entry_link[e]] += entry_weight[e]
        link_ptr[entry_link[e] + 1] += 1
        flow_ptr[entry_flow[e] + 1] += 1
        if e and entry_flow[e] < entry_flow[e - 1]:
            grouped = False
    for i in range(links):
        link_ptr[i + 1] += link_ptr[i]
    for i in range(flows):
        flow_ptr[i + 1] += flow_ptr[i]
    link_flow = np.empty(nnz, dtype=np.int64)
    link_fill = link_ptr[:-1].copy()
    for e in range(nnz):
        link_flow[link_fill[entry_link[e]]] = entry_flow[e]
        link_fill[entry_link[e]] += 1
    if grouped:
        flow_link = entry_link
        flow_weight = entry_weight
    else:
        flow_link = np.empty(nnz, dtype=np.int64)
        flow_weight = np.empty(nnz)
        flow_fill = flow_ptr[:-1].copy()
        for e in range(nnz):
            flow_link[flow_fill[entry_flow[e]]] = entry_link[e]
            flow_weight[flow_fill[entry_flow[e]]] = entry_weight[e]
            flow_fill[entry_flow[e]] += 1
    frozen = np.zeros(flows, dtype=np.bool_)
    keys = np.empty(links + 1)
    nodes = np.empty(links + 1, dtype=np.int64)
    stamps = np.zeros(links + 1, dtype=np.int64)
    size = 0
    for link in range(links):
        if weight_sum[link] > 0.0:
            size = _push(keys, nodes, stamps, size, residual[link] / weight_sum[link], link, 0)
    # A flow's cap acts as a link of its own: caps are taken in ascending order.
    lowest = np.inf
    highest = -np.inf
    for f in range(flows):
        lowest = min(lowest, rate_cap_bps[f])
        highest = max(highest, rate_cap_bps[f])
    by_cap = np.arange(flows) if lowest == highest else np.argsort(rate_cap_bps, kind="mergesort")
    next_cap = 0
    # Shares only grow as flows freeze, so a link's heap key may be stale-low: when it
    # comes out, recompute it and put it back if it grew (one heap entry per link).
    while True:
        while next_cap < flows and (
            frozen[by_cap[next_cap]] or flow_ptr[by_cap[next_cap] + 1] == flow_ptr[by_cap[next_cap]]
        ):
            next_cap += 1
        if next_cap < flows and (size == 0 or rate_cap_bps[by_cap[next_cap]] <= keys[0]):
            flow = by_cap[next_cap]
            next_cap += 1
            frozen[flow] = True
            for k in range(flow_ptr[flow], flow_ptr[flow + 1]):
                residual[flow_link[k]] -= flow_weight[k] * rate[flow]
                weight_sum[flow_link[k]] -= flow_weight[k]
            continue
        if size == 0:
            break
        share, node = keys[0], nodes[0]
        size = _pop(keys, nodes, stamps, size)
        if weight_sum[node] <= 1e-12:
            continue
        current = max(residual[node], 0.0) / weight_sum[node]
        if current > share:
            size = _push(keys, nodes, stamps, size, current, node, 0)
            continue
        level = max(share, 0.0)
        for i in range(link_ptr[node], link_ptr[node + 1]):
            flow = link_flow[i]
            if frozen[flow]:
                continue
            frozen[flow] = True
            rate[flow] = min(level, rate_cap_bps[flow])
            for k in range(flow_ptr[flow], flow_ptr[flow + 1]):
                residual[flow_link[k]] -= flow_weight[k] * rate[flow]
                weight_sum[flow_link[k]] -= flow_weight[k]
    return rate


def _push(
    keys: np.ndarray,
    nodes: np.ndarray,
    stamps: np.ndarray,
    size: int,
    key: float,
    node: int,
    stamp: int,
) -> int:  # pragma: no cover
    """Binary min-heap insert over parallel arrays; returns the new size."""
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if keys[parent] <= key:
            break
        keys[i], nodes[i], stamps[i] = keys[parent], nodes[parent], stamps[parent]
        i = parent
    keys[i], nodes[i], stamps[i] = key, node, stamp
    return size + 1


def _pop(
    keys: np.ndarray, nodes: np.ndarray, stamps: np.ndarray, size: int
) -> int:  # pragma: no cover
    """Remove the heap's minimum; returns the new size."""
    size -= 1
    key, node, stamp = keys[size], nodes[size], stamps[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and keys[child + 1] < keys[child]:
            child += 1
        if keys[child] >= key:
            break
        keys[i], nodes[i], stamps[i] = keys[child], nodes[child], stamps[child]
        i = child
    keys[i], nodes[i], stamps[i] = key, node, stamp
    return size


def settle_region(
    flow: np.ndarray,
    link: np.ndarray,
    weight: np.ndarray,
    rate: np.ndarray,
    cap: np.ndarray,
    capacity: np.ndarray,
    load: np.ndarray,
    touched: np.ndarray,
    members: int,
    widenings: int,
    tolerance: float,
    scratch_bool: np.ndarray,
    scratch_int: np.ndarray,
) -> int:  # pragma: no cover - exercised compiled; checked against the numpy path in tests
    """The compiled form of `_Active.settle`'s regional re-solve: the work done (entries
    visited) when the region's answer was accepted, else -work - 1 (solve everything).

    `flow/link/weight` are the entries of the flows in flight (a flow's entries are
    contiguous); `rate` and `load` are updated in place when the region's answer passes
    the max-min check. Work per attempt is proportional to the region's neighbourhood,
    not to all flows: entries are indexed by link once per call. The scratch arrays
    (2 x flows booleans; 2 x flows + links integers) are False / -1 on entry and left so.
    """
    entries = flow.size
    links = capacity.size
    flows = rate.size
    in_region = scratch_bool[:flows]
    good = scratch_bool[flows : 2 * flows]
    flow_local = scratch_int[:flows]
    link_local = scratch_int[flows : flows + links]
    first = scratch_int[flows + links : 2 * flows + links]
    # entries by link (CSR) and each flow's first entry
    link_ptr = np.zeros(links + 1, dtype=np.int64)
    for e in range(entries):
        link_ptr[link[e] + 1] += 1
        if first[flow[e]] < 0:
            first[flow[e]] = e
    for i in range(links):
        link_ptr[i + 1] += link_ptr[i]
    by_link = np.empty(entries, dtype=np.int64)
    fill = link_ptr[:-1].copy()
    for e in range(entries):
        by_link[fill[link[e]]] = e
        fill[link[e]] += 1
    frontier = touched.copy()
    blame = np.empty(entries + links, dtype=np.int64)
    top = np.full(links, -1.0)  # per link: the highest rate on it, once computed
    work = np.zeros(1, dtype=np.int64)
    work[0] = entries
    marked = np.zeros(links, dtype=np.bool_)
    region = np.empty(entries, dtype=np.int64)
    count = 0
    accepted = False
    for _ in range(widenings):
        grown = np.empty(entries + frontier.size, dtype=np.int64)
        ngrown = 0
        for i in range(frontier.size):
            l0 = frontier[i]
            if marked[l0]:
                continue
            marked[l0] = True
            for k in range(link_ptr[l0], link_ptr[l0 + 1]):
                f = flow[by_link[k]]
                if not in_region[f]:
                    in_region[f] = True
                    region[count] = f
                    count += 1
                    e = first[f]
                    while e < entries and flow[e] == f:
                        grown[ngrown] = link[e]
                        ngrown += 1
                        e += 1
        if count == 0:
            accepted = True
            break
        if 2 * count > members:
            break
        blamed = _try_region(
            flow, link, weight, rate, cap, capacity, load, region[:count], first, link_ptr, by_link,
            flow_local, link_local, good, tolerance, blame, top, work,
        )
        if blamed == 0:
            accepted = True
            break
        # widen by the links of the flows that failed the check (and overloaded links)
        frontier = blame[:blamed].copy()
        if frontier.size == 0:
            frontier = grown[:ngrown]
    for i in range(count):
        in_region[region[i]] = False
    for e in range(entries):
        first[flow[e]] = -1
    return work[0] if accepted else -work[0] - 1


def _try_region(
    flow: np.ndarray,
    link: np.ndarray,
    weight: np.ndarray,
    rate: np.ndarray,
    cap: np.ndarray,
    capacity: np.ndarray,
    load: np.ndarray,
    region: np.ndarray,
    first: np.ndarray,
    link_ptr: np.ndarray,
    by_link: np.ndarray,
    flow_local: np.ndarray,
    link_local: np.ndarray,
    good: np.ndarray,
    tolerance: float,
    blame: np.ndarray,
    top: np.ndarray,
    work: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """Solve the region with the rest fixed; commit if every nearby flow keeps a bottleneck.

    Returns 0 when committed; otherwise how many link ids it wrote to `blame`: the
    overloaded links and every link of each flow left without a bottleneck. `top` caches
    each saturated link's highest rate under the trial answer (-1: not yet; reset on
    return); `work[0]` counts the entries visited.
    """
    entries = flow.size
    picked = 0
    for k in range(region.size):
        flow_local[region[k]] = k
        e = first[region[k]]
        while e < entries and flow[e] == region[k]:
            picked += 1
            e += 1
    r_flow = np.empty(picked, dtype=np.int64)
    r_link = np.empty(picked, dtype=np.int64)
    r_weight = np.empty(picked)
    local_links = np.empty(picked, dtype=np.int64)
    own = np.zeros(picked)
    nlinks = 0
    i = 0
    for k in range(region.size):
        f = region[k]
        e = first[f]
        while e < entries and flow[e] == f:
            if link_local[link[e]] < 0:
                link_local[link[e]] = nlinks
                local_links[nlinks] = link[e]
                nlinks += 1
            r_flow[i] = k
            r_link[i] = link_local[link[e]]
            r_weight[i] = weight[e]
            own[r_link[i]] += weight[e] * rate[f]
            i += 1
            e += 1
    residual = np.empty(nlinks)
    new_load = np.empty(nlinks)
    for j in range(nlinks):
        residual[j] = max(capacity[local_links[j]] - (load[local_links[j]] - own[j]), 0.0)
        new_load[j] = load[local_links[j]] - own[j]
    caps = np.empty(region.size)
    for k in range(region.size):
        caps[k] = cap[region[k]]
    new = _fill_jit(r_flow, r_link, r_weight, residual, caps, tolerance)
    for i in range(picked):
        new_load[r_link[i]] += r_weight[i] * new[r_flow[i]]
    blamed = 0
    visits = 2 * picked
    touched_top = np.empty(capacity.size, dtype=np.int64)
    ntop = 0
    for j in range(nlinks):
        if new_load[j] > capacity[local_links[j]] * (1 + tolerance):
            blame[blamed] = local_links[j]
            blamed += 1
    # every flow on a changed link must still be at its cap or have a bottleneck link
    for j in range(nlinks):
        l0 = local_links[j]
        visits += link_ptr[l0 + 1] - link_ptr[l0]
        for k in range(link_ptr[l0], link_ptr[l0 + 1]):
            f = flow[by_link[k]]
            if good[f]:
                continue
            r = new[flow_local[f]] if flow_local[f] >= 0 else rate[f]
            if r >= cap[f] * (1 - tolerance):
                good[f] = True
                continue
            e = first[f]
            while e < entries and flow[e] == f and not good[f]:
                lk = link[e]
                jj = link_local[lk]
                now = new_load[jj] if jj >= 0 else load[lk]
                if now >= capacity[lk] * (1 - tolerance):
                    if top[lk] < 0.0:
                        highest = 0.0
                        for m in range(link_ptr[lk], link_ptr[lk + 1]):
                            g = flow[by_link[m]]
                            rg = new[flow_local[g]] if flow_local[g] >= 0 else rate[g]
                            if rg > highest:
                                highest = rg
                        top[lk] = highest
                        touched_top[ntop] = lk
                        ntop += 1
                        visits += link_ptr[lk + 1] - link_ptr[lk]
                    if r >= top[lk] * (1 - tolerance):
                        good[f] = True
                e += 1
                visits += 1
            if not good[f]:
                good[f] = True  # blame each flow once
                e = first[f]
                while e < entries and flow[e] == f and blamed < blame.size:
                    blame[blamed] = link[e]
                    blamed += 1
                    e += 1
    ok = blamed == 0
    for j in range(ntop):
        top[touched_top[j]] = -1.0
    work[0] += visits
    for j in range(nlinks):
        l0 = local_links[j]
        for k in range(link_ptr[l0], link_ptr[l0 + 1]):
            good[flow[by_link[k]]] = False
    if ok:
        for k in range(region.size):
            rate[region[k]] = new[k]
        for j in range(nlinks):
            load[local_links[j]] = new_load[j]
    for k in range(region.size):
        flow_local[region[k]] = -1
    for j in range(nlinks):
        link_local[local_links[j]] = -1
    return blamed


_fill_jit = bottleneck_fill
_KERNELS: dict[str, Callable[..., object]] = {}


def _kernels() -> dict[str, Callable[..., object]]:
    """Compile the kernels with numba on first use (numba is imported only then)."""
    if not _KERNELS:
        global _push, _pop, _fill_jit, _try_region
        import numba

        _push = numba.njit(cache=True, inline="always")(_push)
        _pop = numba.njit(cache=True, inline="always")(_pop)
        _fill_jit = numba.njit(cache=True, nogil=True)(bottleneck_fill)
        _try_region = numba.njit(cache=True, nogil=True)(_try_region)
        _KERNELS["fill"] = _fill_jit
        _KERNELS["settle"] = numba.njit(cache=True, nogil=True)(settle_region)
    return _KERNELS


def compiled_fill(*args: object) -> np.ndarray:
    """`bottleneck_fill`, compiled."""
    return _kernels()["fill"](*args)  # type: ignore[return-value]


def compiled_settle(*args: object) -> int:
    """`settle_region`, compiled: the work it did (entries visited), negative (-work - 1)
    when the region's answer was not accepted and everything must be solved."""
    return int(_kernels()["settle"](*args))  # type: ignore[call-overload]


AVAILABLE = importlib.util.find_spec("numba") is not None
