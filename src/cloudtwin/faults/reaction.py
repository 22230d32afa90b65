"""How each routing strategy reacts to a failure: which repair phases run, after what delay.

- `local-then-protocol` (ecmp, ecmp-qp, adaptive, spray): after `local_detect` the switch
  next to the failure drops its dead port from the group and the strategy's own choice
  (the hash, the least-loaded port, the spray) covers the surviving next hops, for the
  flows that switch can still deliver; after `bfd_detect + bgp_convergence` every switch
  knows the surviving fabric and the flows left on dead links are routed on it.
- `protocol` (a user strategy unless it says otherwise): only the routing-protocol phase.
- `controller` (pinning): the controller hears of the failure after `controller_detect`,
  recomputes for `controller_compute`, then installs `rule_install` per rule changed; the
  flows move when the last rule is in.

A strategy may name its model with a class attribute `reaction = "protocol"` (etc.).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from cloudtwin.errors import RoutingError
from cloudtwin.routing.strategy import Strategy
from cloudtwin.scenario.faults import Reaction
from cloudtwin.topology.paths import next_hop_candidates
from cloudtwin.topology.topology import NodeKind, Topology

__all__ = ["BUILTIN_REACTIONS", "Phase", "ReactionKind", "phases_for", "reaction_of", "rule_links"]

ReactionKind = Literal["local-then-protocol", "protocol", "controller"]

BUILTIN_REACTIONS: dict[str, ReactionKind] = {
    "ecmp": "local-then-protocol",
    "ecmp-qp": "local-then-protocol",
    "adaptive": "local-then-protocol",
    "spray": "local-then-protocol",
    "pinning": "controller",
}


@dataclass(frozen=True)
class Phase:
    """One repair step: after `delay_s`, with the knowledge it has, move the broken flows.

    `converged`: the switches know the whole surviving fabric (else only their own ports).
    `controller`: the delay grows by the rule installation time of the flows it moves.
    `on_down_only`: runs only when a link went down (local repair does nothing on recovery).
    `data_plane`: the switches' ECMP hash routes (source-port pinning before its controller).
    """

    name: str
    delay_s: float
    converged: bool
    controller: bool = False
    on_down_only: bool = False
    data_plane: bool = False


def reaction_of(strategy: Strategy) -> ReactionKind:
    """The reaction model of a strategy: its `reaction` attribute, a built-in's, or `protocol`."""
    declared = getattr(strategy, "reaction", None)
    if declared is None:
        return BUILTIN_REACTIONS.get(strategy.name, "protocol")
    if declared not in get_args(ReactionKind):
        raise RoutingError(
            f"routing.strategy: {strategy.name} declares reaction {declared!r}; "
            f"expected one of {', '.join(get_args(ReactionKind))}"
        )
    return declared


def phases_for(kind: ReactionKind, timings: Reaction) -> list[Phase]:
    """The repair phases of a reaction model, with the scenario's timings."""
    protocol = Phase("routing protocol", timings.bfd_detect + timings.bgp_convergence, True)
    if kind == "controller":
        delay = timings.controller_detect + timings.controller_compute
        controller = Phase("controller", delay, True, controller=True)
        if timings.pinning_install == "rules":
            return [controller]
        return [
            Phase("local repair", timings.local_detect, False, on_down_only=True, data_plane=True),
            Phase("routing protocol", protocol.delay_s, True, data_plane=True),
            controller,
        ]
    if kind == "protocol":
        return [protocol]
    return [Phase("local repair", timings.local_detect, False, on_down_only=True), protocol]


def rule_links(topology: Topology, link_ids: np.ndarray, dst_edge: np.ndarray) -> np.ndarray:
    """Which path entries need a per-flow rule: a switch egress where the intact fabric
    offers more than one equal-cost next hop toward the flow's destination edge switch."""
    link_ids = np.asarray(link_ids, dtype=np.int64)
    node = topology.link_src[link_ids]
    inner = (topology.node_kind[node] != NodeKind.NIC) & (
        topology.node_kind[topology.link_dst[link_ids]] != NodeKind.NIC
    )
    result = np.zeros(link_ids.size, dtype=bool)
    if inner.any():
        _, ok = next_hop_candidates(topology, node[inner], topology.edge_slot[dst_edge[inner]])
        result[inner] = ok.sum(axis=1) > 1
    return result
