"""A user-written routing strategy, loaded by dotted path: a deliberately bad one.

`LowestSpine` sends every flow through the lowest-numbered next hop at every switch
(spine0 on a leaf-spine), to show the `Strategy` protocol: a class with a `name` and
a `route(context) -> Paths` method, and optionally the facts the evaluation reads: how
it reacts to a failure (`reaction`) and what it needs from the cloud (`profile`).
Nothing needs registering; point a scenario at it:

    routing:
      strategy: user_strategy:LowestSpine

with this directory on PYTHONPATH, e.g.

    PYTHONPATH=examples cloudtwin run SCENARIO --set routing.strategy=user_strategy:LowestSpine
"""

from __future__ import annotations

import numpy as np

from cloudtwin.routing import PLAIN_ECMP, Profile, ReactionKind, RoutingContext
from cloudtwin.topology import Paths, route_hop_by_hop


class LowestSpine:
    """Always the first shortest-path next hop: every inter-leaf flow crosses spine0."""

    name = "lowest-spine"
    #: after a failure, the routing protocol re-routes the stranded flows on what survives
    reaction: ReactionKind = "protocol"
    #: static per-flow paths: someone (a controller) must install a rule per flow
    profile = Profile(
        controller=True,
        host_cooperation=False,
        switch_features=(PLAIN_ECMP, "per-flow policy rules"),
        flow_rules=True,
        flow_state=False,
        needs="a controller and per-flow rules",
    )

    def route(self, context: RoutingContext) -> Paths:
        """One path per flow; `route_hop_by_hop` asks `choose` at every switch."""

        def choose(
            hop: int, flows: np.ndarray, nodes: np.ndarray, cand: np.ndarray, ok: np.ndarray
        ) -> np.ndarray:
            return np.argmax(ok, axis=1)  # column of the first next hop on a shortest path

        return route_hop_by_hop(context.topology, context.flows.src, context.flows.dst, choose)
