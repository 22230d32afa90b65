"""A cloud's sites in one run: each site's prepared jobs renumbered into the run, the
fabric legs the strategy routes on each site, and the migration paths across them.

Link ids of the run: the joined sites' links first (each site's fabric at its offset, then
gateways and WAN links, as `join_sites` numbers them), then each site's own extra links
(NVLink segments, NIC tiers), then the drivers' (a migration's sink and a link for paused
clients). A site's jobs are prepared, routed, coupled to its NICs and repaired exactly as
`run` and `evaluate` would on that site alone, then renumbered into the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np

from cloudtwin.engine.simulator import Change
from cloudtwin.errors import CloudtwinError, MobilityError
from cloudtwin.flows import Paths
from cloudtwin.intercloud.traffic import Failover, LegRouter, border_proxy
from cloudtwin.routing.strategy import Strategy
from cloudtwin.scenario.cloud import CloudScenario, CloudVm
from cloudtwin.scenario.mobility import Admission, Mobility, VmSpec
from cloudtwin.scenario.mobility import Cloud as CloudSpec
from cloudtwin.scenario.model import Scenario
from cloudtwin.smartnic.placement import NicPlan
from cloudtwin.topology.sites import SiteLayout, SitesTopology
from cloudtwin.topology.topology import Topology
from cloudtwin.twin.migration import Reroute
from cloudtwin.twin.preparation import Prepared, prepare
from cloudtwin.twin.routing import route_flows
from cloudtwin.twin.run import EngineJobs, Run
from cloudtwin.workloads import qp_flows

__all__ = ["SitePart", "SitesPaths", "identity_update_s", "leg_router", "site_parts", "sites_mobility"]


@dataclass(frozen=True, eq=False)
class SitePart:
    """One site's jobs in the run: its prepared scenario and fabric, its jobs in engine form
    (site link ids), where its extra links and its flows sit in the run."""

    index: int
    name: str
    prepared: Prepared
    layout: SiteLayout
    jobs: EngineJobs
    extra0: int
    flows: slice = field(default_factory=lambda: slice(0, 0))

    @property
    def scenario(self) -> Scenario:
        return self.prepared.scenario

    @property
    def nic(self) -> NicPlan | None:
        return self.prepared.nic

    @property
    def topology(self) -> Topology:
        return self.layout.topology

    def to_run(self, links: np.ndarray) -> np.ndarray:
        """Site link ids as run link ids."""
        links = np.asarray(links, dtype=np.int64)
        fabric = self.topology.link_count
        return np.where(links < fabric, links + self.layout.link0, self.extra0 + (links - fabric))

    def paths_to_run(self, paths: Paths) -> Paths:
        return Paths(paths.indptr, self.to_run(paths.link_ids), paths.weights)

    def change_to_run(self, change: Change) -> Change:
        """A change of the site's jobs (site link ids, the site's flow numbers) in run link ids."""
        paths = None if change.paths is None else self.paths_to_run(change.paths)
        return Change(change.time_s, self.to_run(change.link_ids), change.capacity_bps, change.flows, paths)

    def add_to(self, run: Run) -> SitePart:
        """The site's jobs and their changes added to `run`; the part with its flows' run ids."""
        jobs = self.jobs
        if not jobs.flow_count:
            for change in jobs.changes:
                run.apply(self.change_to_run(change))
            return self
        moved = replace(
            jobs,
            paths=self.paths_to_run(jobs.paths),
            changes=[self.change_to_run(c) for c in jobs.changes],
            network=np.zeros(jobs.flow_count, dtype=bool),  # the WAN timeline leaves the site's jobs out
        )
        ids = moved.add_to(run, timeline=True)
        return replace(self, flows=slice(int(ids[0]), int(ids[-1]) + 1))

    def tier_links(self, host: int) -> np.ndarray:
        """Run ids of the NIC tier links a flow from or to `host` crosses (none with basic NICs)."""
        if self.nic is None:
            return np.empty(0, dtype=np.int64)
        nic = int(self.topology.host_nics[host, 0])
        link = int(np.flatnonzero(self.topology.link_src == nic)[0])
        one = Paths(np.array([0, 1], dtype=np.int64), np.array([link], dtype=np.int64))
        return self.to_run(self.prepared.couple(one).link_ids[1:])


def site_parts(
    cloud: CloudScenario, joined: SitesTopology, strategy: Strategy, faults: bool
) -> list[SitePart]:
    """Every site's jobs prepared under `strategy`, with the site's faults when `faults`."""
    parts = []
    extra0 = joined.link_count
    for i, site in enumerate(cloud.federation.sites):
        scenario = site.site_scenario(cloud.seed, cloud.routing, cloud.reaction, cloud.limits)
        if not faults:
            scenario = scenario.model_copy(update={"faults": ()})
        layout = joined.sites[i]
        try:
            prepared = prepare(scenario, strategy, topology=layout.topology, named_jobs_only=True)
            jobs = prepared.faulted_jobs(prepared.fault_states())
        except CloudtwinError as err:
            raise type(err)(f"federation.sites.{i} ({site.name}): {err}") from err
        parts.append(SitePart(i, site.name, prepared, layout, jobs, extra0))
        extra0 += jobs.capacity_bps.size - layout.topology.link_count
    return parts


def leg_router(parts: list[SitePart], seed: int) -> LegRouter:
    """Fabric legs routed by each site's strategy (one connection each)."""
    cache: dict[tuple[int, int, int], list[int]] = {}

    def leg(site: int, src: int, dst: int, flow: int) -> list[int]:
        key = (site, src, dst)
        if key not in cache:
            prepared = parts[site].prepared
            table = qp_flows(
                prepared.topology,
                np.array([src]),
                np.array([dst]),
                np.array([1.0]),
                1,
                np.random.default_rng([seed, site, src, dst]),
            )
            paths = route_flows(prepared.scenario, prepared.topology, table, prepared.strategy)
            cache[key] = paths.path(0).tolist()
        return cache[key]

    return leg


def identity_update_s(cloud: CloudScenario, vm: VmSpec, to: str, joined: SitesTopology) -> float:
    """How long the VM's network identity takes to follow it once it runs at `to`.

    `l2-stretch`: its address stays; the destination announces it (QEMU's self-announce
    right after the switchover) and the source site's gateway learns the new location one
    WAN crossing later. `global-nat`: its global address stays and its local address
    changes; the federation controller moves the NAT entries to the gateways, which takes
    a route propagation. `l3-routed` (renumbered): the new address must reach the peers,
    a route propagation too.
    """
    assert isinstance(vm, CloudVm)
    network = next(n for n in cloud.federation.networks if n.name == vm.network)
    a, b = cloud.site_index(vm.cloud), cloud.site_index(to)
    if network.mode == "l2-stretch":
        return float(joined.latency_s[joined.wan_path(b, a)].sum())
    return float(cloud.federation.sites[b].gateway.route_propagation)


class SitesPaths:
    """Migration paths between the sites of one cloud: a stream leaves its host through the
    host's NIC tiers and the source site's fabric (routed by the strategy) to the active
    gateway, crosses the WAN path to the destination site's active gateway and its fabric to
    the new host. A gateway's failure stalls the streams through it until its failover is
    over; then they take the standby. The VM's identity follows its federated network's
    address mode (`identity_update_s`)."""

    def __init__(
        self,
        cloud: CloudScenario,
        joined: SitesTopology,
        parts: list[SitePart],
        leg: LegRouter,
        failovers: list[Failover],
    ) -> None:
        self.cloud = cloud
        self.joined = joined
        self.parts = parts
        self.leg = leg
        self.failovers = failovers
        self.index = {p.name: p.index for p in parts}
        # failovers under way per site: its standby carries nothing until the last one ends
        self.failing = np.zeros(len(parts), dtype=np.int64)
        self._nic_bps = min(p.topology.nic_rate_bps for p in parts)
        self.first_link = 0
        self.capacity_bps = np.empty(0)

    @property
    def links_bps(self) -> np.ndarray:
        """None of their own: the gateways and WAN links are the joined sites'."""
        return np.empty(0)

    @property
    def nic_bps(self) -> float:
        return self._nic_bps

    def bind(self, run: Run, first_link: int) -> None:
        self.first_link = first_link
        self.capacity_bps = run.capacity_bps

    def path_bps(self, src_cloud: str, dst_cloud: str) -> float:
        a, b = self.index[src_cloud], self.index[dst_cloud]
        links = self._edge(a, b, np.zeros(self.first_link, dtype=bool))
        capacity = self.capacity_bps[links] if links.size else np.array([np.inf])
        return float(min(self._nic_bps, capacity.min()))

    def latency_s(self, src_cloud: str, dst_cloud: str) -> float:
        a, b = self.index[src_cloud], self.index[dst_cloud]
        links = self._edge(a, b, np.zeros(self.first_link, dtype=bool))
        return float(self.joined.latency_s[links].sum())

    def identity_update_s(self, vm: VmSpec, to: str) -> float | None:
        return identity_update_s(self.cloud, vm, to, self.joined)

    def couple(self, paths: Paths) -> Paths:
        """The paths already cross their ends' NIC tiers (`path` adds them)."""
        return paths

    def fabric(self, a: int, b: int, down: np.ndarray) -> np.ndarray | None:
        raise MobilityError("mobility.vms: clients of a VM are not modelled across sites yet")

    def _edge(self, a: int, b: int, down: np.ndarray) -> np.ndarray:
        """Gateway and WAN links from site a's border leaf to site b's (empty when a gateway pair
        or the WAN path is down)."""
        if self.failing[a] or self.failing[b]:
            return np.empty(0, dtype=np.int64)
        sa, sb = self.joined.sites[a], self.joined.sites[b]
        ga, gb = _active(sa, down), _active(sb, down)
        if ga is None or gb is None:
            return np.empty(0, dtype=np.int64)
        wan = self.joined.wan_path(a, b)
        if down[wan].any():
            return np.empty(0, dtype=np.int64)
        return np.array(
            [
                sa.gateway_links[f"leaf->gw{ga}"],
                sa.gateway_links[f"gw{ga}->wan"],
                *wan,
                sb.gateway_links[f"wan->gw{gb}"],
                sb.gateway_links[f"gw{gb}->leaf"],
            ],
            dtype=np.int64,
        )

    def path(
        self, src_host: int, src_cloud: str, dst_host: int, dst_cloud: str, down: np.ndarray
    ) -> np.ndarray:
        a, b = self.index[src_cloud], self.index[dst_cloud]
        pa, pb = self.parts[a], self.parts[b]
        edge = self._edge(a, b, down)
        if not edge.size:
            return np.empty(0, dtype=np.int64)
        src = int(pa.topology.host_nics[src_host, 0])
        dst = int(pb.topology.host_nics[dst_host, 0])
        border_a = pa.layout.border_leaf - pa.layout.node0
        border_b = pb.layout.border_leaf - pb.layout.node0
        up = self.leg(a, src, border_proxy(pa.topology, border_a, src), -1)[:-1]
        there = self.leg(b, border_proxy(pb.topology, border_b, dst), dst, -1)[1:]
        path = np.concatenate(
            (pa.to_run(np.array(up, dtype=np.int64)), edge, pb.to_run(np.array(there, dtype=np.int64)))
        )
        if down[path[path < down.size]].any():
            return np.empty(0, dtype=np.int64)
        return np.concatenate((path, pa.tier_links(src_host), pb.tier_links(dst_host))).astype(np.int64)

    def watch(self, run: Run, reroute: Reroute) -> None:
        """Each gateway failure: the streams through it stall, and move to the standby once
        its failover is over (and every other failover their new path needs is over too:
        failures that overlap are all applied)."""
        for info in self.failovers:
            run.schedule(info.at_s, partial(self._gateway_failed, info.site))
            over = partial(self._failed_over, run, reroute, info.at_s, info.site)
            run.schedule(info.at_s + info.total_s, over)

    def _gateway_failed(self, site: str, now_s: float) -> None:
        self.failing[self.index[site]] += 1

    def _failed_over(self, run: Run, reroute: Reroute, at_s: float, site: str, now_s: float) -> None:
        self.failing[self.index[site]] -= 1
        capacity = run.link_capacity_bps
        reroute(now_s, at_s, capacity[: self.first_link] <= 0, f"gateway of {site} failed")


def _active(site: SiteLayout, down: np.ndarray) -> int | None:
    for k in (0, 1):
        if not down[[site.gateway_links[f"leaf->gw{k}"], site.gateway_links[f"gw{k}->wan"]]].any():
            return k
    return None


def _quarantined(part: SitePart) -> set[int]:
    """Hosts whose NIC failed measured boot: their site admits no VM there."""
    return {host for host, _ in part.nic.quarantined} if part.nic is not None else set()


def sites_mobility(cloud: CloudScenario, parts: list[SitePart]) -> Mobility:
    """The sites as the clouds of the insularity protocol (every host of a site is its own)."""
    clouds = [
        CloudSpec(
            name=p.name,
            hosts=[h for h in range(p.topology.host_count) if h not in _quarantined(p)],
            admission=cloud.mobility.admission.get(p.name, Admission()),
        )
        for p in parts
    ]
    mobility = Mobility(
        clouds=tuple(clouds),
        vms=cloud.mobility.vms,
        migrations=cloud.mobility.migrations,
        calibration=cloud.mobility.calibration,
    )
    return mobility.with_calibration_data(cloud.mobility.calibration_data())
