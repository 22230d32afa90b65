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

__all__ = ["AVAILABLE", "bottleneck_fill", "compiled_fill"]


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
    for e in range(nnz):
        weight_sum[entry_link[e]] += entry_weight[e]
    # entries grouped by link and by flow (counting sort)
    link_ptr = np.zeros(links + 1, dtype=np.int64)
    flow_ptr = np.zeros(flows + 1, dtype=np.int64)
    for e in range(nnz):
        link_ptr[entry_link[e] + 1] += 1
        flow_ptr[entry_flow[e] + 1] += 1
    for i in range(links):
        link_ptr[i + 1] += link_ptr[i]
    for i in range(flows):
        flow_ptr[i + 1] += flow_ptr[i]
    by_link = np.empty(nnz, dtype=np.int64)
    by_flow = np.empty(nnz, dtype=np.int64)
    link_fill = link_ptr[:-1].copy()
    flow_fill = flow_ptr[:-1].copy()
    for e in range(nnz):
        by_link[link_fill[entry_link[e]]] = e
        link_fill[entry_link[e]] += 1
        by_flow[flow_fill[entry_flow[e]]] = e
        flow_fill[entry_flow[e]] += 1
    frozen = np.zeros(flows, dtype=np.bool_)
    version = np.zeros(links + flows, dtype=np.int64)
    capacity = links + flows + nnz + 1
    keys = np.empty(capacity)
    nodes = np.empty(capacity, dtype=np.int64)
    stamps = np.empty(capacity, dtype=np.int64)
    size = 0
    for link in range(links):
        if weight_sum[link] > 0.0:
            size = _push(keys, nodes, stamps, size, residual[link] / weight_sum[link], link, 0)
    for flow in range(flows):
        if flow_ptr[flow + 1] > flow_ptr[flow]:
            size = _push(keys, nodes, stamps, size, rate_cap_bps[flow], links + flow, 0)
    while size > 0:
        share, node, stamp = keys[0], nodes[0], stamps[0]
        size = _pop(keys, nodes, stamps, size)
        if stamp != version[node]:
            continue
        version[node] += 1
        if node >= links:
            first = flow_ptr[node - links]
            last = first + 1
            table = by_flow
        else:
            first = link_ptr[node]
            last = link_ptr[node + 1]
            table = by_link
        level = max(share, 0.0)
        for i in range(first, last):
            flow = entry_flow[table[i]]
            if frozen[flow]:
                continue
            frozen[flow] = True
            rate[flow] = min(level, rate_cap_bps[flow])
            version[links + flow] += 1
            for k in range(flow_ptr[flow], flow_ptr[flow + 1]):
                f_entry = by_flow[k]
                link = entry_link[f_entry]
                residual[link] -= entry_weight[f_entry] * rate[flow]
                weight_sum[link] -= entry_weight[f_entry]
                version[link] += 1
                if weight_sum[link] > tolerance * entry_weight[f_entry]:
                    key = max(residual[link], 0.0) / weight_sum[link]
                    size = _push(keys, nodes, stamps, size, key, link, version[link])
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


_KERNEL: list[Callable[..., np.ndarray]] = []


def compiled_fill(*args: object) -> np.ndarray:
    """`bottleneck_fill` compiled by numba on first use (numba is imported only then)."""
    if not _KERNEL:
        global _push, _pop
        import numba

        _push = numba.njit(cache=True, inline="always")(_push)
        _pop = numba.njit(cache=True, inline="always")(_pop)
        _KERNEL.append(numba.njit(cache=True, nogil=True)(bottleneck_fill))
    return _KERNEL[0](*args)


AVAILABLE = importlib.util.find_spec("numba") is not None
