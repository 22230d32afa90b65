"""Inter-site traffic in the engine: flows of federated networks routed host -> fabric -> gateway ->
WAN -> gateway -> fabric -> host over the joined sites, and gateway failover as engine changes.

The fabric legs take ECMP paths (a seeded hash per flow picks among the equal-cost next
hops); gateway and WAN links carry payload at the tunnel's goodput (their capacity is
scaled by goodput with the tunnel over goodput without it), so the encapsulation's
header bytes cost what they cost on the wire.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cloudtwin.errors import FederationError
from cloudtwin.intercloud.encapsulation import goodput_fraction
from cloudtwin.intercloud.plan import FederationPlan
from cloudtwin.topology.paths import Paths, pick_nth, route_hop_by_hop
from cloudtwin.topology.sites import SitesTopology
from cloudtwin.topology.topology import Topology

__all__ = [
    "HANDSHAKE_RTTS",
    "LegRouter",
    "FederatedFlows",
    "Failover",
    "failover",
    "federated_flows",
    "route_federated",
    "tunnel_capacity",
]

HANDSHAKE_RTTS = {"vxlan": 0, "geneve": 0, "wireguard": 1, "ipsec-esp": 2}
"""Round trips to bring a tunnel up: none for VXLAN/Geneve, WireGuard's handshake, IKEv2's
IKE_SA_INIT and IKE_AUTH."""


@dataclass(frozen=True, eq=False)
class FederatedFlows:
    """One row per flow: plan endpoints, bytes, start, the federated network it belongs to."""

    src: np.ndarray
    dst: np.ndarray
    size_bytes: np.ndarray
    start_s: np.ndarray
    network: np.ndarray

    def __len__(self) -> int:
        return int(self.src.size)


def federated_flows(plan: FederationPlan) -> FederatedFlows:
    """The scenario's `traffic:` as flows between plan endpoints."""
    names = {n: i for i, n in enumerate(plan.network_names)}
    parts: list[tuple[np.ndarray, np.ndarray, int, float, int]] = []
    for i, spec in enumerate(plan.scenario.traffic):
        if spec.network not in names:
            raise FederationError(f"traffic.{i}.network", f"unknown federated network {spec.network!r}")
        n = names[spec.network]
        endpoints = np.concatenate(
            [
                np.arange(plan.seg_ep0[s], plan.seg_ep0[s] + plan.seg_count[s])
                for s in plan.network_segments(n)
            ]
        )
        if spec.pattern == "ring":
            src, dst = endpoints, np.roll(endpoints, -1)
        else:
            a, b = np.meshgrid(endpoints, endpoints, indexing="ij")
            keep = a != b
            src, dst = a[keep], b[keep]
        keep = src != dst
        parts.append((src[keep], dst[keep], spec.size, spec.start, n))
    if not parts:
        raise FederationError("traffic", "the scenario has no traffic: give traffic: [{network: NAME}]")
    return FederatedFlows(
        src=np.concatenate([p[0] for p in parts]).astype(np.int64),
        dst=np.concatenate([p[1] for p in parts]).astype(np.int64),
        size_bytes=np.concatenate([np.full(p[0].size, p[2]) for p in parts]).astype(np.int64),
        start_s=np.concatenate([np.full(p[0].size, p[3]) for p in parts]),
        network=np.concatenate([np.full(p[0].size, p[4]) for p in parts]).astype(np.int64),
    )


def _chooser(seed: int, count: int):  # noqa: ANN202 - a Chooser
    hashes = np.random.default_rng([seed, 13]).integers(0, 1 << 30, size=max(count, 1))

    def choose(
        hop: int, flows: np.ndarray, nodes: np.ndarray, cand: np.ndarray, ok: np.ndarray
    ) -> np.ndarray:
        return pick_nth(ok, (hashes[flows] >> hop) % ok.sum(axis=1))

    return choose


def _proxy(topology: Topology, leaf: int, avoid: int) -> int:
    nics = np.flatnonzero(topology.edge_of_nic == leaf)
    others = nics[nics != avoid]
    if others.size == 0:
        raise FederationError(
            "gateway.border_leaf", f"the border leaf {topology.node_name(leaf)} needs two hosts"
        )
    return int(others[0])


def _leg(topology: Topology, src: int, dst: int, seed: int, index: int) -> list[int]:
    """One ECMP path inside a site between NICs (the same as the site's own traffic would take)."""
    path = route_hop_by_hop(topology, np.array([src]), np.array([dst]), _chooser(seed + index, 1))
    return path.path(0).tolist()


def _host_nic(topology: Topology, host: int) -> int:
    return int(topology.host_nics[host, 0])


LegRouter = Callable[[int, int, int, int], list[int]]
"""leg(site, src_nic, dst_nic, flow) -> the site-local links of one leg between two NICs of a site."""


def _ecmp_leg(joined: SitesTopology, seed: int) -> LegRouter:
    def leg(site: int, src: int, dst: int, flow: int) -> list[int]:
        return _leg(joined.sites[site].topology, src, dst, seed, flow)

    return leg


def border_proxy(topology: Topology, border_leaf: int, avoid: int) -> int:
    """A NIC on the border leaf other than `avoid`: a leg to or from the gateways is routed to
    it and its last (or first) link is dropped, so it ends (or starts) at the border leaf."""
    return _proxy(topology, border_leaf, avoid)


def route_federated(
    plan: FederationPlan,
    joined: SitesTopology,
    flows: FederatedFlows,
    active: np.ndarray,
    seed: int,
    rows: np.ndarray | None = None,
    leg: LegRouter | None = None,
) -> Paths:
    """Paths of flows `rows` (default: all) with each site's active gateway `active[site]` (0 or 1).

    `leg` routes the fabric legs (default: ECMP with a seeded hash per flow)."""
    rows = np.arange(len(flows)) if rows is None else np.asarray(rows, dtype=np.int64)
    leg = leg or _ecmp_leg(joined, seed)
    out: list[list[int]] = []
    for f in rows.tolist():
        a, b = int(plan.ep_site[flows.src[f]]), int(plan.ep_site[flows.dst[f]])
        sa, sb = joined.sites[a], joined.sites[b]
        src = _host_nic(sa.topology, int(plan.ep_host[flows.src[f]]))
        dst = _host_nic(sb.topology, int(plan.ep_host[flows.dst[f]]))
        if a == b:
            out.append([sa.link0 + k for k in leg(a, src, dst, f)])
            continue
        ga, gb = int(active[a]), int(active[b])
        border_a = sa.border_leaf - sa.node0
        border_b = sb.border_leaf - sb.node0
        up = leg(a, src, _proxy(sa.topology, border_a, src), f)[:-1]
        down = leg(b, _proxy(sb.topology, border_b, dst), dst, f)[1:]
        out.append(
            [sa.link0 + k for k in up]
            + [sa.gateway_links[f"leaf->gw{ga}"], sa.gateway_links[f"gw{ga}->wan"]]
            + joined.wan_path(a, b)
            + [sb.gateway_links[f"wan->gw{gb}"], sb.gateway_links[f"gw{gb}->leaf"]]
            + [sb.link0 + k for k in down]
        )
    lengths = np.array([len(p) for p in out], dtype=np.int64)
    return Paths(
        np.concatenate(([0], np.cumsum(lengths))), np.array([k for p in out for k in p], dtype=np.int64)
    )


def tunnel_capacity(plan: FederationPlan, joined: SitesTopology) -> np.ndarray:
    """Link capacities with gateway and WAN links counted in payload (tunnel goodput / plain goodput).

    With networks of several modes the lowest goodput is used for every tunnel.
    """
    scenario = plan.scenario
    modes = {plan.mode_of(n) for n in range(len(plan.network_names))} or {"l3-routed"}
    tunnel = min(
        goodput_fraction(scenario.encapsulation, scenario.underlay_mtu, m == "l2-stretch") for m in modes
    )
    ratio = tunnel / goodput_fraction(None, scenario.underlay_mtu)
    capacity = joined.capacity_bps.astype(float).copy()
    edge = np.zeros(joined.link_count, dtype=bool)
    for site in joined.sites:
        edge[list(site.gateway_links.values())] = True
    edge[list(joined.wan_links.values())] = True
    capacity[edge] *= ratio
    return capacity


@dataclass(frozen=True)
class Failover:
    """A site's active gateway fails: when, and how long until the standby carries its traffic."""

    site: str
    at_s: float
    detection_s: float
    election_s: float
    tunnel_setup_s: float
    route_propagation_s: float

    @property
    def total_s(self) -> float:
        """Failover time = detection + election + tunnel set-up + route propagation."""
        return self.detection_s + self.election_s + self.tunnel_setup_s + self.route_propagation_s

    def to_json(self) -> dict[str, object]:
        """A JSON-ready summary."""
        return {
            "site": self.site,
            "at_s": self.at_s,
            "failover_s": self.total_s,
            "detection_s": self.detection_s,
            "election_s": self.election_s,
            "tunnel_setup_s": self.tunnel_setup_s,
            "route_propagation_s": self.route_propagation_s,
        }


def failover(plan: FederationPlan, joined: SitesTopology, site: int, at_s: float) -> Failover:
    """The failover of site `site`'s gateway pair: the tunnel set-up takes the encapsulation's
    handshake round trips to the farthest peer site it shares a federated network with."""
    spec = plan.scenario.sites[site].gateway
    peers: set[int] = set()
    for n in np.unique(plan.seg_network[(plan.seg_site == site) & (plan.seg_network >= 0)]).tolist():
        peers.update(int(s) for s in plan.seg_site[plan.network_segments(n)].tolist() if s != site)
    rtt = max((2 * float(joined.latency_s[joined.wan_path(site, p)].sum()) for p in peers), default=0.0)
    return Failover(
        site=plan.site_names[site],
        at_s=at_s,
        detection_s=spec.detection,
        election_s=spec.election,
        tunnel_setup_s=HANDSHAKE_RTTS[plan.scenario.encapsulation] * rtt,
        route_propagation_s=spec.route_propagation,
    )
