"""Path pinning: a controller gives every flow a path so that no link is over-committed.

Each flow is assumed to want its fair share of its NIC (line rate over the flows that
share its source or destination NIC); a link fits `slots` such flows. On a two-tier
Clos the inter-leaf flows form a bipartite multigraph between source and destination
leaves, and colouring its edges with (uplink, slot) colours (König: max degree
colours suffice) gives a conflict-free assignment whenever the fabric is non-blocking
for the traffic. On a fat-tree the same is done twice: first the aggregation switch
(between edge switches), then the core (between aggregation switches). The controller
installs the result as per-flow rules or steers it through the UDP source port.
"""

from __future__ import annotations

import numpy as np

from cloudtwin.routing.coloring import color_bipartite_edges
from cloudtwin.routing.facts import PLAIN_ECMP, Profile, ReactionKind
from cloudtwin.routing.strategy import RoutingContext, register
from cloudtwin.topology.paths import Paths, pick_nth, route_hop_by_hop
from cloudtwin.topology.topology import NodeKind, Topology

__all__ = ["Pinning"]


@register("pinning")
class Pinning:
    """Controller-computed conflict-free paths (bipartite edge colouring)."""

    name = "pinning"
    reaction: ReactionKind = "controller"
    profile = Profile(
        True, False, (PLAIN_ECMP, "per-flow policy rules"), True, False, "a controller and per-flow rules"
    )
    #: Installed through the UDP source port: plain ECMP switches, a source port per flow on
    #: the hosts (`reaction.pinning_install: source-port`).
    source_port_profile = Profile(
        True, True, (PLAIN_ECMP,), False, False, "a controller and source-port steering on hosts", True
    )

    def route(self, context: RoutingContext) -> Paths:
        """One pinned path per flow."""
        topology, flows = context.topology, context.flows
        n = len(flows)
        demand = _fair_demand(flows.src, flows.dst, context.rate_bps)
        choice = np.zeros((n, int(topology.hops_to_edge.max()) + 3), dtype=np.int64)
        src_edge = topology.edge_of_nic[flows.src]
        dst_edge = topology.edge_of_nic[flows.dst]
        crossing = np.flatnonzero(src_edge != dst_edge)
        if topology.kind == "fat-tree":
            self._fat_tree(context, crossing, demand, choice)
        else:
            self._two_tier(context, crossing, demand, choice)

        def choose(
            hop: int, rows: np.ndarray, nodes: np.ndarray, cand: np.ndarray, ok: np.ndarray
        ) -> np.ndarray:
            count = ok.sum(axis=1)
            return pick_nth(ok, choice[rows, hop] % count)

        return route_hop_by_hop(topology, flows.src, flows.dst, choose)

    @staticmethod
    def _two_tier(
        context: RoutingContext, crossing: np.ndarray, demand: np.ndarray, choice: np.ndarray
    ) -> None:
        topology, flows = context.topology, context.flows
        spines = int(np.count_nonzero(topology.node_kind == NodeKind.SPINE))
        src_edge = topology.edge_of_nic[flows.src[crossing]]
        parallel = _parallel_links(topology)
        slots = _slots(topology, crossing, demand, src_edge)
        color = color_bipartite_edges(
            src_edge, topology.edge_of_nic[flows.dst[crossing]], spines * parallel * slots
        )
        group = color // slots
        choice[crossing, 1] = group
        choice[crossing, 2] = group // spines

    @staticmethod
    def _fat_tree(
        context: RoutingContext, crossing: np.ndarray, demand: np.ndarray, choice: np.ndarray
    ) -> None:
        topology, flows = context.topology, context.flows
        half = int(np.count_nonzero(topology.node_kind == NodeKind.CORE) ** 0.5)
        src_edge = topology.edge_of_nic[flows.src[crossing]]
        dst_edge = topology.edge_of_nic[flows.dst[crossing]]
        slots = _slots(topology, crossing, demand, src_edge)
        agg = color_bipartite_edges(src_edge, dst_edge, half * slots) // slots
        choice[crossing, 1] = agg
        pod_src = topology.node_index[src_edge] // half
        pod_dst = topology.node_index[dst_edge] // half
        inter = pod_src != pod_dst
        rows = crossing[inter]
        core = (
            color_bipartite_edges(
                pod_src[inter] * half + agg[inter], pod_dst[inter] * half + agg[inter], half * slots
            )
            // slots
        )
        choice[rows, 2] = core


def _fair_demand(src: np.ndarray, dst: np.ndarray, rate_bps: np.ndarray) -> np.ndarray:
    """Each flow's share of its busier NIC when the NIC's flows split its line rate."""
    out_count = np.bincount(src)[src]
    in_count = np.bincount(dst)[dst]
    return rate_bps / np.maximum(out_count, in_count)


def _slots(
    topology: Topology, crossing: np.ndarray, demand: np.ndarray, src_edge: np.ndarray
) -> int:
    """How many flows of the largest demand fit on one switch-to-switch link."""
    if crossing.size == 0:
        return 1
    kind = topology.node_kind
    switch_link = (kind[topology.link_src] != NodeKind.NIC) & (
        kind[topology.link_dst] != NodeKind.NIC
    )
    capacity = float(topology.capacity_bps[switch_link].min())
    return max(1, int(np.floor(capacity / float(demand[crossing].max()) * (1 + 1e-9))))


def _parallel_links(topology: Topology) -> int:
    """Cables between a leaf and a spine (uplinks_per_spine)."""
    leaf = int(np.flatnonzero(topology.node_kind == NodeKind.LEAF)[0])
    spine = int(np.flatnonzero(topology.node_kind == NodeKind.SPINE)[0])
    return max(1, int(np.count_nonzero((topology.link_src == leaf) & (topology.link_dst == spine))))
