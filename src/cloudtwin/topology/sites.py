"""Joining sites: each site's fabric, its HA gateway pair on a border leaf, its WAN edge router,
and the WAN links between sites, as one set of directed links (ids of every site's own links
are kept, shifted by the site's offset).

Per site, in node order after its fabric: `gw0` (active), `gw1` (standby), `wan` (the WAN
edge router). Each gateway has a cable to the border leaf and one to the WAN edge, both
at the gateway's rate (its capacity, or its crypto engine when lower); WAN links join
the WAN edges of two sites.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from cloudtwin.errors import TopologyError
from cloudtwin.scenario.federation import FederationScenario, WanLink
from cloudtwin.topology.builders import build_topology
from cloudtwin.topology.topology import NodeKind, Topology

__all__ = ["SiteLayout", "SitesTopology", "join_sites"]

GATEWAYS_PER_SITE = 2


@dataclass(frozen=True, eq=False)
class SiteLayout:
    """Where one site sits in the joined arrays."""

    name: str
    topology: Topology
    node0: int
    link0: int
    border_leaf: int
    gateways: tuple[int, int]
    wan_edge: int
    gateway_links: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class SitesTopology:
    """Every site's fabric plus gateways, WAN edges and WAN links, as directed-link arrays."""

    sites: tuple[SiteLayout, ...]
    node_names: tuple[str, ...]
    node_kinds: tuple[str, ...]
    link_src: np.ndarray
    link_dst: np.ndarray
    capacity_bps: np.ndarray
    latency_s: np.ndarray
    wan_links: dict[tuple[int, int], int]

    @property
    def link_count(self) -> int:
        """Number of directed links."""
        return int(self.link_src.size)

    def link_name(self, link: int) -> str:
        """`east.leaf0->east.gw0`."""
        return f"{self.node_names[int(self.link_src[link])]}->{self.node_names[int(self.link_dst[link])]}"

    @cached_property
    def gateway_of_node(self) -> dict[int, tuple[int, int]]:
        """(site, gateway index) of each gateway node."""
        return {g: (s, k) for s, site in enumerate(self.sites) for k, g in enumerate(site.gateways)}

    def links_of(self, node: int) -> np.ndarray:
        """Every directed link into or out of `node`."""
        return np.flatnonzero((self.link_src == node) | (self.link_dst == node))

    @cached_property
    def _wan_out(self) -> dict[int, list[tuple[int, int]]]:
        """Each site's WAN links out: (the site at the other end, the link), in listed order."""
        out: dict[int, list[tuple[int, int]]] = {}
        for (x, y), link in self.wan_links.items():
            out.setdefault(x, []).append((y, link))
        return out

    def wan_path(self, a: int, b: int) -> list[int]:
        """The WAN links from site a's WAN edge to site b's, fewest hops then least latency."""
        if a == b:
            return []
        best: dict[int, tuple[int, float, list[int]]] = {a: (0, 0.0, [])}
        frontier = [a]
        while frontier:
            nxt = []
            for s in frontier:
                hops, lat, path = best[s]
                for y, link in self._wan_out.get(s, ()):
                    cand = (hops + 1, lat + float(self.latency_s[link]), [*path, link])
                    if y not in best or cand[:2] < best[y][:2]:
                        best[y] = cand
                        nxt.append(y)
            frontier = nxt
        if b not in best:
            raise TopologyError(f"no WAN path from site {self.sites[a].name!r} to {self.sites[b].name!r}")
        return best[b][2]


def _wan_list(scenario: FederationScenario) -> list[WanLink]:
    if scenario.wan:
        return list(scenario.wan)
    names = [s.name for s in scenario.sites]
    return [WanLink(between=(a, b)) for i, a in enumerate(names) for b in names[i + 1 :]]


def _kind_name(kind: int) -> str:
    return NodeKind(kind).name.lower()


def join_sites(scenario: FederationScenario) -> SitesTopology:
    """The joined topology of a multi-site scenario."""
    names: list[str] = []
    kinds: list[str] = []
    src: list[np.ndarray] = []
    dst: list[np.ndarray] = []
    cap: list[np.ndarray] = []
    lat: list[np.ndarray] = []
    layouts: list[SiteLayout] = []
    node0 = link0 = 0
    for i, site in enumerate(scenario.sites):
        topology = build_topology(site.scenario())
        leaves = np.flatnonzero(topology.node_kind == NodeKind.LEAF)
        if site.gateway.border_leaf >= leaves.size:
            raise TopologyError(
                f"sites.{i}.gateway.border_leaf: leaf {site.gateway.border_leaf} does not exist "
                f"(the fabric has {leaves.size})"
            )
        names += [f"{site.name}.{topology.node_name(n)}" for n in range(topology.node_count)]
        kinds += [_kind_name(int(k)) for k in topology.node_kind]
        src.append(topology.link_src + node0)
        dst.append(topology.link_dst + node0)
        cap.append(topology.capacity_bps.astype(float))
        lat.append(topology.latency_s.astype(float))
        base = node0 + topology.node_count
        gateways = (base, base + 1)
        wan_edge = base + 2
        names += [f"{site.name}.gw0", f"{site.name}.gw1", f"{site.name}.wan"]
        kinds += ["gateway", "gateway", "wan"]
        border = node0 + int(leaves[site.gateway.border_leaf])
        links: dict[str, int] = {}
        next_link = link0 + topology.link_count
        rate, delay = site.gateway.rate_bps, site.gateway.crypto_latency
        for k, gw in enumerate(gateways):
            for label, a, b in (
                (f"leaf->gw{k}", border, gw),
                (f"gw{k}->leaf", gw, border),
                (f"gw{k}->wan", gw, wan_edge),
                (f"wan->gw{k}", wan_edge, gw),
            ):
                links[label] = next_link
                next_link += 1
                src.append(np.array([a]))
                dst.append(np.array([b]))
                cap.append(np.array([rate]))
                lat.append(np.array([delay if "wan" in label else topology.latency_s[0]]))
        layouts.append(SiteLayout(site.name, topology, node0, link0, border, gateways, wan_edge, links))
        node0 = wan_edge + 1
        link0 = next_link
    index = {s.name: i for i, s in enumerate(scenario.sites)}
    wan_links: dict[tuple[int, int], int] = {}
    for link in _wan_list(scenario):
        a, b = index[link.between[0]], index[link.between[1]]
        for x, y in ((a, b), (b, a)):
            wan_links[(x, y)] = link0
            link0 += 1
            src.append(np.array([layouts[x].wan_edge]))
            dst.append(np.array([layouts[y].wan_edge]))
            cap.append(np.array([link.bandwidth]))
            lat.append(np.array([link.latency]))
    return SitesTopology(
        sites=tuple(layouts),
        node_names=tuple(names),
        node_kinds=tuple(kinds),
        link_src=np.concatenate(src).astype(np.int64),
        link_dst=np.concatenate(dst).astype(np.int64),
        capacity_bps=np.concatenate(cap),
        latency_s=np.concatenate(lat),
        wan_links=wan_links,
    )
