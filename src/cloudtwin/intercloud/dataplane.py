"""The federation's data plane in the twin: each gateway's tables, and packets walked through them.

A packet leaves its endpoint into the site-local network of its segment. An address in
the segment's own subnet is delivered inside the site, or (l2-stretch) flooded to the
peer gateways on the network's federated VNI. Any other address goes to the site's
gateway, which routes it by the segment's table (l3-routed prefixes, or global-nat
blocks with the source translated), tunnels it to the remote gateway, which maps the
federated VNI back to its own segment (and translates the destination back) before
delivering. Reachability is what these walks deliver, not what the scenario declares.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cloudtwin.errors import FederationError
from cloudtwin.intercloud.plan import FederationPlan

__all__ = ["MAX_MATRIX_ENDPOINTS", "GatewayTables", "WanMessage", "build_tables", "reachability"]

MAX_MATRIX_ENDPOINTS = 2_000
"""The pairwise reachability matrix walks every pair; beyond this many endpoints it refuses."""


@dataclass(frozen=True)
class WanMessage:
    """What one gateway sends another: outer sites, the federated VNI and the inner addresses."""

    src_site: str
    dst_site: str
    vni: int
    inner_src: int
    inner_dst: int


@dataclass
class GatewayTables:
    """Forwarding state of every site's gateway, keyed by site-local objects."""

    l2_peers: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    routes: dict[int, list[tuple[int, int, int, int]]] = field(default_factory=dict)
    ingress: dict[tuple[int, int], int] = field(default_factory=dict)
    local: dict[tuple[int, int], int] = field(default_factory=dict)


def build_tables(plan: FederationPlan) -> GatewayTables:
    """Gateway tables for every federated segment, and each site's local address tables."""
    tables = GatewayTables()
    for e in range(plan.endpoint_count):
        tables.local[(int(plan.ep_segment[e]), int(plan.ep_ip[e]))] = e
    for n in range(len(plan.network_names)):
        segments = plan.network_segments(n)
        vni = int(plan.network_vni[n])
        mode = plan.mode_of(n)
        for s in segments:
            tables.ingress[(int(plan.seg_site[s]), vni)] = int(s)
        for s in segments:
            peers = [r for r in segments if r != s]
            if mode == "l2-stretch":
                tables.l2_peers[int(s)] = [(int(plan.seg_site[r]), vni) for r in peers]
            elif mode == "l3-routed":
                tables.routes[int(s)] = [
                    (int(plan.seg_lo[r]), int(plan.seg_hi[r]), int(plan.seg_site[r]), vni) for r in peers
                ]
            else:
                tables.routes[int(s)] = [
                    (
                        int(plan.seg_global[r]),
                        int(plan.seg_global[r] + plan.seg_count[r] - 1),
                        int(plan.seg_site[r]),
                        vni,
                    )
                    for r in peers
                ]
    return tables


def _send(
    plan: FederationPlan, log: list[WanMessage] | None, a: int, b: int, vni: int, src: int, dst: int
) -> None:
    if log is not None:
        log.append(WanMessage(plan.site_names[a], plan.site_names[b], vni, src, dst))


def walk(
    plan: FederationPlan, tables: GatewayTables, src: int, address: int, log: list[WanMessage] | None = None
) -> int:
    """The endpoint a packet from endpoint `src` to `address` reaches (-1: dropped)."""
    s = int(plan.ep_segment[src])
    site = int(plan.seg_site[s])
    if plan.seg_lo[s] <= address <= plan.seg_hi[s]:
        hit = tables.local.get((s, address), -1)
        if hit >= 0:
            return hit
        for remote_site, vni in tables.l2_peers.get(s, ()):
            _send(plan, log, site, remote_site, vni, int(plan.ep_ip[src]), address)
            remote = tables.ingress.get((remote_site, vni))
            hit = tables.local.get((remote, address), -1) if remote is not None else -1
            if hit >= 0:
                return hit
        return -1
    for lo, hi, remote_site, vni in tables.routes.get(s, ()):
        if lo <= address <= hi:
            return _routed(plan, tables, src, s, address, remote_site, vni, log)
    return -1


def _routed(
    plan: FederationPlan,
    tables: GatewayTables,
    src: int,
    s: int,
    address: int,
    remote_site: int,
    vni: int,
    log: list[WanMessage] | None,
) -> int:
    nat = plan.seg_global[s] >= 0
    inner_src = int(plan.ep_global[src]) if nat else int(plan.ep_ip[src])
    _send(plan, log, int(plan.seg_site[s]), remote_site, vni, inner_src, address)
    remote = tables.ingress.get((remote_site, vni))
    if remote is None:
        return -1
    if nat:
        offset = address - int(plan.seg_global[remote])
        if not 0 <= offset < int(plan.seg_count[remote]):
            return -1
        address = int(plan.seg_first[remote]) + offset
    return tables.local.get((remote, address), -1)


def addresses_of(plan: FederationPlan, endpoint: int) -> list[int]:
    """Every address a peer might use for an endpoint: its own and its global one."""
    found = [int(plan.ep_ip[endpoint])]
    if plan.ep_global[endpoint] >= 0:
        found.append(int(plan.ep_global[endpoint]))
    return found


def reachability(plan: FederationPlan, log: list[WanMessage] | None = None) -> np.ndarray:
    """(endpoints, endpoints) boolean matrix: src reaches dst at one of dst's addresses."""
    n = plan.endpoint_count
    if n > MAX_MATRIX_ENDPOINTS:
        raise FederationError(
            "sites",
            f"{n:,} endpoints: the pairwise reachability matrix is limited to {MAX_MATRIX_ENDPOINTS:,}",
        )
    tables = build_tables(plan)
    matrix = np.zeros((n, n), dtype=bool)
    for src in range(n):
        for dst in range(n):
            if src != dst:
                matrix[src, dst] = any(
                    walk(plan, tables, src, a, log) == dst for a in addresses_of(plan, dst)
                )
    return matrix
