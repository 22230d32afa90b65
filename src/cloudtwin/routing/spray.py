"""Packet spraying: every switch spreads a flow's packets evenly over all its next hops.

In the fluid model a sprayed flow is one flow whose rate is split over every equal-cost
path; the fraction on each link is its weight. It needs NICs that accept packets out
of order.
"""

from __future__ import annotations

import numpy as np

from cloudtwin.routing.facts import PLAIN_ECMP, Profile, ReactionKind
from cloudtwin.routing.strategy import RoutingContext, register
from cloudtwin.topology.paths import Paths, spread_fractions

__all__ = ["Spray"]


@register("spray")
class Spray:
    """Per-packet spraying over all equal-cost paths."""

    name = "spray"
    reaction: ReactionKind = "local-then-protocol"
    profile = Profile(
        False, True, (PLAIN_ECMP, "per-packet spraying"), False, False, "out-of-order tolerant NICs"
    )

    def route(self, context: RoutingContext) -> Paths:
        """A weighted set of links per flow."""
        topology = context.topology
        flows = context.flows
        src_edge = topology.edge_of_nic[flows.src]
        dst_edge = topology.edge_of_nic[flows.dst]
        up = topology.out_links[flows.src, 0]
        down = topology.down_link[flows.dst]
        cache: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        links: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        for i in range(len(flows)):
            key = (int(src_edge[i]), int(dst_edge[i]))
            if key not in cache:
                spread = spread_fractions(topology, *key)
                cache[key] = (
                    np.fromiter(spread, dtype=np.int64),
                    np.fromiter(spread.values(), dtype=float),
                )
            middle, fraction = cache[key]
            links.append(np.concatenate(([up[i]], middle, [down[i]])))
            weights.append(np.concatenate(([1.0], fraction, [1.0])))
        lengths = np.array([a.size for a in links], dtype=np.int64)
        indptr = np.concatenate(([0], np.cumsum(lengths)))
        if not links:
            return Paths(indptr, np.empty(0, dtype=np.int64), np.empty(0))
        return Paths(indptr, np.concatenate(links), np.concatenate(weights))
