"""The repair phases of each reaction model, with the scenario's timings.

A strategy declares its reaction model itself (`routing.facts`): `local-then-protocol`
(a local repair at the switch next to the failure, then the routing protocol),
`protocol` (the routing protocol only) or `controller` (the controller hears of the
failure after `controller_detect`, recomputes for `controller_compute`, then installs
`rule_install` per rule changed; the flows move when the last rule is in).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cloudtwin.routing.facts import ReactionKind
from cloudtwin.scenario.faults import Reaction
from cloudtwin.topology.paths import next_hop_candidates
from cloudtwin.topology.topology import NodeKind, Topology

__all__ = ["Phase", "phases_for", "rule_links"]

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
