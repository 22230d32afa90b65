"""ECMP: each switch hashes the (outer) 5-tuple over its equal-cost next hops.

`ecmp-qp` also feeds the destination queue pair number into the hash, as switches with
RoCE-aware hashing do, so that the QPs of one connection spread even when they share a
UDP source port.
"""

from __future__ import annotations

import numpy as np

from cloudtwin.routing.facts import PLAIN_ECMP, Profile, ReactionKind
from cloudtwin.routing.strategy import RoutingContext, register
from cloudtwin.topology.paths import Paths, pick_nth, route_hop_by_hop

__all__ = ["Ecmp", "EcmpQp"]


@register("ecmp")
class Ecmp:
    """Per-switch hash of the 5-tuple; a flow keeps its path for its whole life."""

    name = "ecmp"
    reaction: ReactionKind = "local-then-protocol"
    profile = Profile(False, False, (PLAIN_ECMP,), False, False, "standard switches")
    with_qp = False

    def route(self, context: RoutingContext) -> Paths:
        """Hash-based next hop at every switch."""

        def choose(
            hop: int, flows: np.ndarray, nodes: np.ndarray, cand: np.ndarray, ok: np.ndarray
        ) -> np.ndarray:
            count = ok.sum(axis=1).astype(np.uint64)
            index = context.ecmp_hash(flows, nodes, self.with_qp) % count
            return pick_nth(ok, index.astype(np.int64))

        flows = context.flows
        return route_hop_by_hop(context.topology, flows.src, flows.dst, choose)


@register("ecmp-qp")
class EcmpQp(Ecmp):
    """ECMP whose hash also covers the destination QP number."""

    name = "ecmp-qp"
    profile = Profile(
        False, False, (PLAIN_ECMP, "RoCE BTH (QP) hashing"), False, False, "RoCE-aware hashing"
    )
    with_qp = True
