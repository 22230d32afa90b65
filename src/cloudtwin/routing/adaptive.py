"""Adaptive load balancing (flowlet / dynamic load balancing) as a fluid model.

When a flow starts (its first flowlet), every switch on its way sends it to the
equal-cost next hop whose egress link carries the least load, as switch DLB does
from its port-load estimates; equal loads fall back to the ECMP hash. A switch sees
only its own ports, so it can balance its uplinks but not avoid a collision further
down the path. Long RDMA streams send back to back and leave no idle gap longer than
a flowlet timeout, so a flow keeps the path it was given.
"""

from __future__ import annotations

import heapq

import numpy as np

from cloudtwin.routing.facts import PLAIN_ECMP, Profile, ReactionKind
from cloudtwin.routing.strategy import RoutingContext, register
from cloudtwin.topology.paths import Paths, next_hop_candidates

__all__ = ["Adaptive"]


@register("adaptive")
class Adaptive:
    """Least-loaded local next hop at each switch when a flow starts."""

    name = "adaptive"
    reaction: ReactionKind = "local-then-protocol"
    profile = Profile(
        False, False, (PLAIN_ECMP, "dynamic load balancing (flowlets)"), False, True, "DLB switches"
    )

    def route(self, context: RoutingContext) -> Paths:
        """Place flows in start order on the least-loaded next hops."""
        topology, flows = context.topology, context.flows
        n = len(flows)
        rate = context.rate_bps
        tie = context.ecmp_hash(np.arange(n), topology.edge_of_nic[flows.src])
        order = np.lexsort((tie, flows.start_s))
        expected_end = flows.start_s + flows.size_bytes * 8.0 / rate
        load = np.zeros(topology.link_count)
        in_flight: list[tuple[float, int]] = []
        width = int(topology.hops_to_edge.max()) + 3
        rows = np.full((n, width), -1, dtype=np.int64)
        target = topology.edge_of_nic[flows.dst]
        slot = topology.edge_slot[target]
        for flow in order.tolist():
            while in_flight and in_flight[0][0] <= flows.start_s[flow]:
                gone = heapq.heappop(in_flight)[1]
                path = rows[gone][rows[gone] >= 0]
                load[path] -= rate[gone]
            path = self._place(
                context, flow, int(target[flow]), int(slot[flow]), load, int(tie[flow])
            )
            rows[flow, : path.size] = path
            load[path] += rate[flow]
            heapq.heappush(in_flight, (float(expected_end[flow]), flow))
        return Paths.from_rows(rows)

    @staticmethod
    def _place(
        context: RoutingContext, flow: int, target: int, slot: int, load: np.ndarray, tie: int
    ) -> np.ndarray:
        topology = context.topology
        first = int(topology.out_links[context.flows.src[flow], 0])
        path = [first]
        node = int(topology.link_dst[first])
        while node != target:
            cand, ok = next_hop_candidates(topology, np.array([node]), np.array([slot]))
            links = cand[0][ok[0]]
            least = links[load[links] <= load[links].min() * (1 + 1e-12)]
            link = int(least[tie % least.size])
            path.append(link)
            node = int(topology.link_dst[link])
        path.append(int(topology.down_link[context.flows.dst[flow]]))
        return np.array(path, dtype=np.int64)
