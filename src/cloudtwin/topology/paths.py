"""Paths of flows as a CSR pair, hop-by-hop equal-cost routing, and equal-cost path enumeration."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from cloudtwin.errors import TopologyError
from cloudtwin.flows import Paths
from cloudtwin.topology.topology import NodeKind, Topology

__all__ = [
    "Chooser",
    "Paths",
    "equal_cost_paths",
    "next_hop_candidates",
    "pick_nth",
    "route_hop_by_hop",
    "spread_fractions",
    "routable",
    "surviving_topology",
]


Chooser = Callable[[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]
"""choose(hop, flows, nodes, candidates, ok) -> column of the chosen candidate per row.

`flows` are the indices of the flows deciding at this hop, `nodes` the switches they are
at, `candidates` the (rows, degree) outgoing links padded with -1, `ok` which of them lie
on a shortest path to the flow's destination (at least one per row).
"""


def pick_nth(ok: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Column of the n-th (from 0) True in each row of `ok`.

    >>> pick_nth(np.array([[True, False, True], [False, True, True]]), np.array([1, 0]))
    array([2, 1])
    """
    return np.count_nonzero(np.cumsum(ok, axis=1) <= n[:, None], axis=1)


def next_hop_candidates(
    topology: Topology,
    nodes: np.ndarray,
    target_slot: np.ndarray,
    link_up: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Outgoing links of `nodes` and which of them get one hop closer to the target edge."""
    hops = topology.hops_to_edge
    cand = topology.out_links[nodes]
    valid = cand >= 0
    nxt = topology.link_dst[np.where(valid, cand, 0)]
    need = hops[nodes, target_slot] - 1
    ok = valid & (hops[nxt, target_slot[:, None]] == need[:, None])
    ok &= topology.node_kind[nxt] != NodeKind.NIC
    if link_up is not None:
        ok &= link_up[np.where(valid, cand, 0)]
    return cand, ok


def route_hop_by_hop(
    topology: Topology, src: np.ndarray, dst: np.ndarray, choose: Chooser
) -> Paths:
    """One path per flow from NIC `src` to NIC `dst`, each switch asking `choose` for its hop."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if np.any(src == dst):
        raise TopologyError("a flow cannot go from a NIC to itself")
    flows = src.size
    target = topology.edge_of_nic[dst]
    slot = topology.edge_slot[target]
    max_hops = int(topology.hops_to_edge.max()) + 2 if flows else 2
    rows = np.full((flows, max_hops + 1), -1, dtype=np.int64)
    rows[:, 0] = topology.out_links[src, 0]
    node = topology.link_dst[rows[:, 0]]
    length = np.ones(flows, dtype=np.int64)
    moving = np.flatnonzero(node != target)
    hop = 1
    while moving.size:
        cand, ok = next_hop_candidates(topology, node[moving], slot[moving])
        stuck = ~ok.any(axis=1)
        if stuck.any():
            flow = int(moving[np.argmax(stuck)])
            raise TopologyError(
                f"no path from {topology.node_name(int(src[flow]))} "
                f"to {topology.node_name(int(dst[flow]))}"
            )
        column = choose(hop, moving, node[moving], cand, ok)
        link = cand[np.arange(moving.size), column]
        rows[moving, hop] = link
        node[moving] = topology.link_dst[link]
        length[moving] += 1
        moving = moving[node[moving] != target[moving]]
        hop += 1
    rows[np.arange(flows), length] = topology.down_link[dst]
    return Paths.from_rows(rows)


def equal_cost_paths(topology: Topology, src: int, dst: int) -> list[tuple[int, ...]]:
    """Every shortest path (as link ids) from NIC `src` to NIC `dst`; parallel links count apart."""
    target = int(topology.edge_of_nic[dst])
    slot = np.array([topology.edge_slot[target]])
    first = int(topology.out_links[src, 0])
    last = int(topology.down_link[dst])
    paths: list[tuple[int, ...]] = []
    stack: list[tuple[int, tuple[int, ...]]] = [(int(topology.link_dst[first]), (first,))]
    while stack:
        node, prefix = stack.pop()
        if node == target:
            paths.append(prefix + (last,))
            continue
        cand, ok = next_hop_candidates(topology, np.array([node]), slot)
        for link in cand[0][ok[0]][::-1]:
            stack.append((int(topology.link_dst[link]), prefix + (int(link),)))
    return paths


def spread_fractions(topology: Topology, src_edge: int, dst_edge: int) -> dict[int, float]:
    """Fraction of traffic on each switch link when every switch splits evenly over its next hops."""
    slot = np.array([topology.edge_slot[dst_edge]])
    share: dict[int, float] = {src_edge: 1.0}
    fractions: dict[int, float] = {}
    while share and dst_edge not in share:
        nxt: dict[int, float] = {}
        for node, frac in share.items():
            cand, ok = next_hop_candidates(topology, np.array([node]), slot)
            links = cand[0][ok[0]]
            for link in links:
                fractions[int(link)] = fractions.get(int(link), 0.0) + frac / links.size
                there = int(topology.link_dst[link])
                nxt[there] = nxt.get(there, 0.0) + frac / links.size
        share = nxt
    return fractions


def surviving_topology(
    topology: Topology,
    link_up: np.ndarray,
    converged: bool = True,
    ports_up: np.ndarray | None = None,
) -> Topology:
    """A view of `topology` in which switches forward only over links that are up.

    Link ids are unchanged, so any strategy can route on the view and its paths apply to
    the real fabric. With `converged` (the routing protocol has spread the news) hop
    counts are those of the surviving fabric; without it a switch only stops using its
    own dead links and still believes every other path works (local repair). NIC links
    stay listed: a flow whose NIC link is down is not routable on the view at all.
    `ports_up` (default `link_up`) are the links switches still forward onto: a port that
    died after the routing protocol last converged is avoided by its own switch only.
    """
    link_up = np.asarray(link_up, dtype=bool)
    forward = link_up if ports_up is None else link_up & np.asarray(ports_up, dtype=bool)
    view = replace(topology)
    table = topology.out_links.copy()
    nic_link = topology.node_kind[topology.link_src] == NodeKind.NIC
    dead = ~forward & ~nic_link
    table[(table >= 0) & dead[np.where(table >= 0, table, 0)]] = -1
    for name in ("edge_of_nic", "down_link", "edge_switches", "edge_slot"):
        view.__dict__[name] = getattr(topology, name)
    view.__dict__["out_links"] = table
    view.__dict__["hops_to_edge"] = (
        _surviving_hops(topology, link_up) if converged else topology.hops_to_edge
    )
    return view


def _surviving_hops(topology: Topology, link_up: np.ndarray) -> np.ndarray:
    """`hops_to_edge` counted over the switch-to-switch links that are up."""
    kind = topology.node_kind
    usable = (kind[topology.link_src] != NodeKind.NIC) & (kind[topology.link_dst] != NodeKind.NIC)
    usable &= link_up
    graph = csr_matrix(
        (np.ones(int(usable.sum())), (topology.link_dst[usable], topology.link_src[usable])),
        shape=(topology.node_count, topology.node_count),
    )
    dist = shortest_path(graph, unweighted=True, indices=topology.edge_switches)
    return np.ascontiguousarray(np.where(np.isinf(dist), -1, dist).astype(np.int16).T)


def routable(topology: Topology, src: np.ndarray, dst: np.ndarray, link_up: np.ndarray) -> np.ndarray:
    """Which flows can reach their destination on `topology` (a view) without a dead end.

    A flow is routable when its NIC links are up and every switch it can be sent to on
    the way (following the view's next hops) still has a next hop: on a converged view
    that is plain reachability; on a local view a switch that only lost its own links
    but is still chosen upstream is a dead end.
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    ok = link_up[topology.out_links[src, 0]] & link_up[topology.down_link[dst]]
    src_edge = topology.edge_of_nic[src]
    dst_edge = topology.edge_of_nic[dst]
    verdict: dict[tuple[int, int], bool] = {}
    for pair in set(zip(src_edge.tolist(), dst_edge.tolist(), strict=True)):
        verdict[pair] = _no_dead_end(topology, *pair)
    pairs = zip(src_edge.tolist(), dst_edge.tolist(), strict=True)
    good = np.array([verdict[p] for p in pairs], dtype=bool)
    return ok & good if src.size else ok


def _no_dead_end(topology: Topology, src_edge: int, dst_edge: int) -> bool:
    slot = int(topology.edge_slot[dst_edge])
    frontier = np.array([src_edge])
    while frontier.size:
        frontier = frontier[frontier != dst_edge]
        if frontier.size == 0:
            return True
        cand, ok = next_hop_candidates(topology, frontier, np.full(frontier.size, slot))
        if not ok.any(axis=1).all():
            return False
        frontier = np.unique(topology.link_dst[cand[ok]])
    return True
