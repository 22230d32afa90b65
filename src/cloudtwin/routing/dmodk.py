"""D-mod-k: the deterministic single path of classic fat-tree routing.

Every switch forwards by destination alone: going up, the i-th up-going hop of a flow
takes the equal-cost next hop number `(d // (n1 x ... x n_{i-1})) mod n_i`, where `d` is
the destination NIC's index and `n_j` the number of equal-cost next hops at the j-th
choice. On a leaf-spine that is spine `d mod spines`; on a k-ary fat-tree the
aggregation switch `d mod k/2` then the core `(d // (k/2)) mod k/2`. Flows to one
destination converge on one path (no hashing, no per-flow state), which is what
InfiniBand subnet managers and many HPC fabrics install, and what flow-level
simulators such as SimGrid use for fat-trees.
"""

from __future__ import annotations

import numpy as np

from cloudtwin.routing.facts import PLAIN_ECMP, Profile, ReactionKind
from cloudtwin.routing.strategy import RoutingContext, register
from cloudtwin.topology.paths import Paths, pick_nth, route_hop_by_hop
from cloudtwin.topology.topology import Topology

__all__ = ["DModK", "destination_index"]


def destination_index(topology: Topology, nics: np.ndarray) -> np.ndarray:
    """Index `d` of each NIC node: host x NICs per host + rail."""
    order = np.full(topology.node_count, -1, dtype=np.int64)
    order[topology.host_nics.ravel()] = np.arange(topology.host_nics.size)
    return order[np.asarray(nics, dtype=np.int64)]


@register("dmodk")
class DModK:
    """Destination-mod-k routing: one fixed path per destination from each source."""

    name = "dmodk"
    # the switch next to a failure moves the destination to a surviving port (D mod the
    # ports left), then routing converges on the surviving fabric
    reaction: ReactionKind = "local-then-protocol"
    profile = Profile(False, False, (PLAIN_ECMP,), False, False, "standard switches (destination tables)")

    def route(self, context: RoutingContext) -> Paths:
        """One deterministic path per flow."""
        topology, flows = context.topology, context.flows
        dest = destination_index(topology, flows.dst)
        divisor = np.ones(dest.size, dtype=np.int64)

        def choose(
            hop: int, moving: np.ndarray, nodes: np.ndarray, cand: np.ndarray, ok: np.ndarray
        ) -> np.ndarray:
            count = ok.sum(axis=1).astype(np.int64)
            index = (dest[moving] // divisor[moving]) % count
            divisor[moving] *= count
            return pick_nth(ok, index)

        return route_hop_by_hop(topology, flows.src, flows.dst, choose)
