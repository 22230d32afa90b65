"""Planning a federation: validate a multi-site scenario and lay out its segments, endpoints,
federated VNIs and global addresses as arrays.

A *segment* is one tenant's network at one site (BEACON's segment when it belongs to a
federated network). Every check names the field it is about, so a bad scenario or API
request is refused before anything is stored.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypedDict

import numpy as np
from pydantic import ValidationError
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from cloudtwin.errors import FederationError
from cloudtwin.intercloud.addressing import allocate_global, check_mode_rules
from cloudtwin.intercloud.encapsulation import CostJson, EncapsulationCost, encapsulation_cost
from cloudtwin.scenario.federation import ADDRESS_MODES, FederationScenario

__all__ = ["FIRST_FEDERATED_VNI", "FederationPlan", "PlanSummary", "plan_federation"]

FIRST_FEDERATED_VNI = 10_000
"""Federation-wide tunnel VNIs that the planner assigns start here."""


def ip_text(value: int) -> str:
    """Dotted-quad text of an integer IPv4 address."""
    return str(ipaddress.IPv4Address(int(value)))


class PlanSummary(TypedDict):
    """A plan's counts (`federate plan --json`): sites, networks, segments, endpoints, tunnels,
    networks per address mode, and each encapsulation's cost."""

    name: str
    sites: int
    federated_networks: int
    segments: int
    federated_segments: int
    endpoints: int
    tunnels: int
    modes: dict[str, int]
    encapsulation: dict[str, CostJson]


@dataclass(frozen=True, eq=False)
class FederationPlan:
    """Segments and endpoints of a federation as arrays (one row per segment / endpoint).

    Segment columns: `seg_site`, `seg_tenant` (index among the site's tenants),
    `seg_network` (federated network, -1 when site-local), `seg_vni` (site-local VNI),
    `seg_lo`/`seg_hi` (subnet bounds), `seg_first`/`seg_count` (endpoint addresses),
    `seg_ep0` (first endpoint row), `seg_global` (first global-nat address, -1 if none).
    Endpoint columns: `ep_segment`, `ep_host`, `ep_ip`, `ep_global`.
    """

    scenario: FederationScenario
    site_names: tuple[str, ...]
    network_names: tuple[str, ...]
    network_mode: np.ndarray
    network_vni: np.ndarray
    seg_site: np.ndarray
    seg_tenant: np.ndarray
    seg_network: np.ndarray
    seg_vni: np.ndarray
    seg_lo: np.ndarray
    seg_hi: np.ndarray
    seg_first: np.ndarray
    seg_count: np.ndarray
    seg_ep0: np.ndarray
    seg_global: np.ndarray
    ep_segment: np.ndarray
    ep_host: np.ndarray
    ep_ip: np.ndarray
    ep_global: np.ndarray
    costs: dict[str, EncapsulationCost] = field(default_factory=dict)

    @property
    def endpoint_count(self) -> int:
        """Number of endpoints (tenant hosts) over all sites."""
        return int(self.ep_segment.size)

    @property
    def segment_count(self) -> int:
        """Number of segments (tenant networks at sites)."""
        return int(self.seg_site.size)

    @cached_property
    def ep_site(self) -> np.ndarray:
        """The site of each endpoint."""
        return self.seg_site[self.ep_segment]

    def mode_of(self, network: int) -> str:
        """The address mode of federated network `network`."""
        return ADDRESS_MODES[int(self.network_mode[network])]

    def segment_name(self, segment: int) -> str:
        """`site/tenant` of a segment."""
        site = self.scenario.sites[int(self.seg_site[segment])]
        return f"{site.name}/{site.tenants[int(self.seg_tenant[segment])].name}"

    def endpoint_name(self, endpoint: int) -> str:
        """`site/tenant/hostN` of an endpoint."""
        return f"{self.segment_name(int(self.ep_segment[endpoint]))}/host{int(self.ep_host[endpoint])}"

    @cached_property
    def endpoint_names(self) -> list[str]:
        """Every endpoint's name, in row order."""
        return [self.endpoint_name(e) for e in range(self.endpoint_count)]

    def network_segments(self, network: int) -> np.ndarray:
        """The segments of one federated network."""
        return np.flatnonzero(self.seg_network == network)

    def tunnel_count(self) -> int:
        """Gateway-to-gateway tunnels: one per pair of sites per federated network."""
        sizes = np.bincount(self.seg_network[self.seg_network >= 0], minlength=len(self.network_names))
        return int((sizes * (sizes - 1) // 2).sum())

    def summary(self) -> PlanSummary:
        """Counts for reports and `--json`."""
        modes = {m: int(np.count_nonzero(self.network_mode == i)) for i, m in enumerate(ADDRESS_MODES)}
        return {
            "name": self.scenario.name,
            "sites": len(self.site_names),
            "federated_networks": len(self.network_names),
            "segments": self.segment_count,
            "federated_segments": int(np.count_nonzero(self.seg_network >= 0)),
            "endpoints": self.endpoint_count,
            "tunnels": self.tunnel_count(),
            "modes": modes,
            "encapsulation": {name: cost.to_json() for name, cost in self.costs.items()},
        }


def _sites(scenario: FederationScenario) -> dict[str, int]:
    index: dict[str, int] = {}
    for i, site in enumerate(scenario.sites):
        if site.name in index:
            raise FederationError(f"sites.{i}.name", f"duplicate site name {site.name!r}")
        index[site.name] = i
        try:
            site.scenario()
        except ValidationError as err:
            reason = str(err.errors(include_url=False)[0]["msg"]).removeprefix("Value error, ")
            raise FederationError(
                f"sites.{i}.{reason.split(':')[0]}", reason.partition(": ")[2] or reason
            ) from err
        _check_site_tenants(scenario, i)
    return index


def _check_site_tenants(scenario: FederationScenario, i: int) -> None:
    site = scenario.sites[i]
    vnis: dict[int, str] = {}
    for j, tenant in enumerate(site.tenants):
        if tenant.vni in vnis:
            raise FederationError(
                f"sites.{i}.tenants.{j}.vni",
                f"VNI {tenant.vni} at site {site.name!r} is already used by tenant {vnis[tenant.vni]!r}",
            )
        vnis[tenant.vni] = tenant.name
        net = tenant.network
        last = tenant.first_address + len(tenant.hosts) - 1
        if tenant.first_address <= int(net.network_address) or last >= int(net.broadcast_address):
            raise FederationError(
                f"sites.{i}.tenants.{j}.address",
                f"{len(tenant.hosts)} endpoints from {tenant.address} do not fit the hosts of {net}",
            )


def _segments(scenario: FederationScenario) -> dict[str, np.ndarray]:
    rows: dict[str, list[int]] = {k: [] for k in ("site", "tenant", "vni", "lo", "hi", "first", "count")}
    hosts: list[Sequence[int]] = []
    for i, site in enumerate(scenario.sites):
        for j, tenant in enumerate(site.tenants):
            net = tenant.network
            for key, value in (
                ("site", i),
                ("tenant", j),
                ("vni", tenant.vni),
                ("lo", int(net.network_address)),
                ("hi", int(net.broadcast_address)),
                ("first", tenant.first_address),
                ("count", len(tenant.hosts)),
            ):
                rows[key].append(value)
            hosts.append(tenant.hosts)
    columns = {k: np.asarray(v, dtype=np.int64) for k, v in rows.items()}
    columns["hosts"] = np.fromiter((h for hs in hosts for h in hs), dtype=np.int64)
    return columns


def _networks(
    scenario: FederationScenario, sites: dict[str, int], seg_key: dict[tuple[int, str], int], n_segments: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """seg_network, network_mode, network_vni (given VNIs checked, missing ones assigned)."""
    seg_network = np.full(n_segments, -1, dtype=np.int64)
    names: set[str] = set()
    vnis: dict[int, str] = {}
    for n, spec in enumerate(scenario.networks):
        if spec.name in names:
            raise FederationError(f"networks.{n}.name", f"duplicate federated network {spec.name!r}")
        names.add(spec.name)
        if spec.vni is not None:
            if spec.vni in vnis:
                raise FederationError(
                    f"networks.{n}.vni",
                    f"VNI {spec.vni} is already used by federated network {vnis[spec.vni]!r}",
                )
            vnis[spec.vni] = spec.name
        _join(scenario, n, sites, seg_key, seg_network)
    mode = np.asarray([ADDRESS_MODES.index(s.mode) for s in scenario.networks], dtype=np.int8)
    return seg_network, mode, _assign_vnis(scenario, vnis)


def _join(
    scenario: FederationScenario,
    n: int,
    sites: dict[str, int],
    seg_key: dict[tuple[int, str], int],
    seg_network: np.ndarray,
) -> None:
    spec = scenario.networks[n]
    seen: set[str] = set()
    for k, name in enumerate(spec.sites):
        if name not in sites:
            raise FederationError(f"networks.{n}.sites.{k}", f"unknown site {name!r}")
        if name in seen:
            raise FederationError(f"networks.{n}.sites.{k}", f"site {name!r} is listed twice")
        seen.add(name)
        segment = seg_key.get((sites[name], spec.tenant))
        if segment is None:
            raise FederationError(f"networks.{n}.tenant", f"site {name!r} has no tenant {spec.tenant!r}")
        if seg_network[segment] >= 0:
            other = scenario.networks[int(seg_network[segment])].name
            raise FederationError(
                f"networks.{n}.sites.{k}",
                f"tenant {spec.tenant!r} at site {name!r} already belongs to federated network {other!r}",
            )
        seg_network[segment] = n


def _assign_vnis(scenario: FederationScenario, given: dict[int, str]) -> np.ndarray:
    vni = np.zeros(len(scenario.networks), dtype=np.int64)
    candidate = FIRST_FEDERATED_VNI
    for n, spec in enumerate(scenario.networks):
        if spec.vni is not None:
            vni[n] = spec.vni
            continue
        while candidate in given:
            candidate += 1
        vni[n] = candidate
        candidate += 1
    if vni.size and vni.max() >= 1 << 24:
        raise FederationError("networks", "more federated networks than 24-bit VNIs")
    return vni


def _check_wan(
    scenario: FederationScenario, sites: dict[str, int], seg_site: np.ndarray, seg_network: np.ndarray
) -> None:
    listed: dict[frozenset[str], int] = {}
    for i, link in enumerate(scenario.wan):
        for k, name in enumerate(link.between):
            if name not in sites:
                raise FederationError(f"wan.{i}.between.{k}", f"unknown site {name!r}")
        pair = frozenset(link.between)  # a WAN link is full duplex: [a, b] and [b, a] are one link
        if pair in listed:
            raise FederationError(
                f"wan.{i}.between",
                f"sites {link.between[0]!r} and {link.between[1]!r} are joined already by wan.{listed[pair]}",
            )
        listed[pair] = i
    for i, fault in enumerate(scenario.gateway_faults):
        if fault.site not in sites:
            raise FederationError(f"gateway_faults.{i}.site", f"unknown site {fault.site!r}")
    for i, wan_fault in enumerate(scenario.wan_faults):
        for k, name in enumerate(wan_fault.between):
            if name not in sites:
                raise FederationError(f"wan_faults.{i}.between.{k}", f"unknown site {name!r}")
        if scenario.wan and frozenset(wan_fault.between) not in listed:
            raise FederationError(
                f"wan_faults.{i}.between",
                f"no WAN link joins {wan_fault.between[0]!r} and {wan_fault.between[1]!r} (see wan:)",
            )
    if not scenario.wan:
        return  # no WAN list: every pair of sites has a default link
    a = np.asarray([sites[w.between[0]] for w in scenario.wan])
    b = np.asarray([sites[w.between[1]] for w in scenario.wan])
    graph = csr_matrix((np.ones(a.size), (a, b)), shape=(len(sites),) * 2)
    _, component = connected_components(graph, directed=False)
    federated = seg_network >= 0
    nets, comps = seg_network[federated], component[seg_site[federated]]
    order = np.lexsort((comps, nets))
    nets, comps, where = nets[order], comps[order], seg_site[federated][order]
    split = np.flatnonzero((nets[1:] == nets[:-1]) & (comps[1:] != comps[:-1]))
    if split.size:
        k = int(split[0])
        names = [s.name for s in scenario.sites]
        raise FederationError(
            f"networks.{int(nets[k])}.sites",
            f"no WAN path between sites {names[int(where[k])]!r} and {names[int(where[k + 1])]!r}",
        )


def plan_federation(scenario: FederationScenario) -> FederationPlan:
    """Validate a multi-site scenario and lay it out; FederationError names the bad field."""
    sites = _sites(scenario)
    seg = _segments(scenario)
    seg_key = {
        (i, tenant.name): k
        for k, (i, tenant) in enumerate((i, t) for i, s in enumerate(scenario.sites) for t in s.tenants)
    }
    seg_network, network_mode, network_vni = _networks(scenario, sites, seg_key, seg["site"].size)
    _check_wan(scenario, sites, seg["site"], seg_network)
    check_mode_rules(scenario, seg, seg_network, network_mode)
    seg_global = allocate_global(scenario, seg["count"], seg_network, network_mode)
    ep_segment = np.repeat(np.arange(seg["site"].size), seg["count"])
    seg_ep0 = np.concatenate(([0], np.cumsum(seg["count"])[:-1])) if seg["count"].size else seg["count"]
    offset = np.arange(ep_segment.size) - np.repeat(seg_ep0, seg["count"])
    ep_global = np.where(seg_global[ep_segment] >= 0, seg_global[ep_segment] + offset, -1)
    layer2 = {m: m == "l2-stretch" for m in ADDRESS_MODES}
    costs = {
        mode: encapsulation_cost(
            scenario.encapsulation, scenario.underlay_mtu, layer2[mode], scenario.mss_clamping
        )
        for i, mode in enumerate(ADDRESS_MODES)
        if np.any(network_mode == i)
    }
    return FederationPlan(
        scenario=scenario,
        site_names=tuple(s.name for s in scenario.sites),
        network_names=tuple(n.name for n in scenario.networks),
        network_mode=network_mode,
        network_vni=network_vni,
        seg_site=seg["site"],
        seg_tenant=seg["tenant"],
        seg_network=seg_network,
        seg_vni=seg["vni"],
        seg_lo=seg["lo"],
        seg_hi=seg["hi"],
        seg_first=seg["first"],
        seg_count=seg["count"],
        seg_ep0=seg_ep0,
        seg_global=seg_global,
        ep_segment=ep_segment,
        ep_host=seg["hosts"],
        ep_ip=seg["first"][ep_segment] + offset,
        ep_global=ep_global,
        costs=costs,
    )
