"""One cloud on one run: every site's tenant jobs (with its NIC tiers, faults and repairs),
the federated traffic between sites and the live migrations between them, all on one
`Run` over the joined sites' links.

Link ids: the joined sites' links first (each site's fabric at its offset, then gateways
and WAN links, as `join_sites` numbers them), then each site's own extra links (NVLink
segments, NIC tiers), then the migrations' (a sink, a link for paused clients). A site's
jobs are routed, coupled to its NICs and repaired exactly as `run` and `evaluate` would
on that site alone, then renumbered into the run. Federated traffic and migration
streams take their fabric legs from the scenario's routing strategy and their gateway
and WAN links from the federation; a gateway's failure stops what crosses it until the
standby has taken over (detection, election, tunnel set-up and route propagation).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np

from cloudtwin.engine.simulator import Change, Dependencies
from cloudtwin.errors import CloudtwinError, EngineError, FederationError, ScenarioError
from cloudtwin.flows import Paths
from cloudtwin.intercloud.plan import FederationPlan, plan_federation
from cloudtwin.intercloud.traffic import (
    Failover,
    FederatedFlows,
    LegRouter,
    border_proxy,
    federated_flows,
    route_federated,
    tunnel_capacity,
)
from cloudtwin.mobility.options import MigrationOptions
from cloudtwin.mobility.plan import options_of
from cloudtwin.routing.strategy import Strategy
from cloudtwin.scenario.cloud import CloudScenario, CloudVm
from cloudtwin.scenario.mobility import Admission, MigrationJob, Mobility, VmSpec
from cloudtwin.scenario.mobility import Cloud as CloudSpec
from cloudtwin.scenario.model import Scenario
from cloudtwin.smartnic.coupling import couple_nics
from cloudtwin.smartnic.placement import NicPlan
from cloudtwin.topology.estimate import check_cloud
from cloudtwin.topology.sites import SiteLayout, SitesTopology, join_sites
from cloudtwin.topology.topology import Topology
from cloudtwin.twin.federation import gateway_faults
from cloudtwin.twin.migration import MigrationDriver, MigrationRun
from cloudtwin.twin.routing import route_flows
from cloudtwin.twin.run import (
    EngineJobs,
    FinishHandler,
    Run,
    nic_plan,
    resolve_strategy,
    scenario_engine_jobs,
)
from cloudtwin.twin.wan import wan_fault_changes
from cloudtwin.workloads import qp_flows

__all__ = ["CloudRun", "RunHistory", "SitePart", "TrafficPart", "run_cloud", "identity_update_s"]


@dataclass(frozen=True, eq=False)
class SitePart:
    """One site's jobs in the run: its scenario and fabric, its jobs in engine form (site
    link ids), where its extra links and its flows sit in the run."""

    index: int
    name: str
    scenario: Scenario
    layout: SiteLayout
    nic: NicPlan | None
    jobs: EngineJobs
    uncoupled_bps: np.ndarray
    extra0: int
    flows: slice = field(default_factory=lambda: slice(0, 0))

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

    def tier_links(self, host: int) -> np.ndarray:
        """Run ids of the NIC tier links a flow from or to `host` crosses (none with basic NICs)."""
        if self.nic is None:
            return np.empty(0, dtype=np.int64)
        nic = int(self.topology.host_nics[host, 0])
        link = int(np.flatnonzero(self.topology.link_src == nic)[0])
        one = Paths(np.array([0, 1], dtype=np.int64), np.array([link], dtype=np.int64))
        coupled = couple_nics(self.topology, self.uncoupled_bps, one, self.nic).paths.link_ids[1:]
        return self.to_run(coupled)


@dataclass(frozen=True, eq=False)
class TrafficPart:
    """The federated networks' traffic: its flows, paths (run ids) and gateway failovers."""

    flows: FederatedFlows
    paths: Paths
    ids: slice
    changes: list[Change]
    failovers: list[Failover]
    stalled: np.ndarray


@dataclass(frozen=True, eq=False)
class RunHistory:
    """What the run's engine was given, in run ids: every flow's first path, rate cap and
    latency, and every change in the order applied, at the time it took effect (the
    telemetry recomputes the engine's rates at any instant from it)."""

    paths: Paths
    rate_cap_bps: np.ndarray
    latency_s: np.ndarray
    changes: tuple[Change, ...]


class _RecordedRun(Run):
    """A run that keeps what it was given (flows, paths, changes) for the telemetry."""

    def __init__(self, capacity_bps: np.ndarray, *, timeline: bool = False) -> None:
        super().__init__(capacity_bps, timeline=timeline)
        self._added: list[tuple[Paths, np.ndarray, np.ndarray]] = []
        self._changes: list[Change] = []

    def add_flows(
        self,
        paths: Paths,
        size_bytes: np.ndarray,
        start_s: np.ndarray,
        rate_cap_bps: np.ndarray,
        *,
        latency_s: np.ndarray | None = None,
        dependencies: Dependencies | None = None,
        timeline_flows: np.ndarray | None = None,
        on_finish: FinishHandler | None = None,
    ) -> np.ndarray:
        ids = super().add_flows(
            paths, size_bytes, start_s, rate_cap_bps, latency_s=latency_s, dependencies=dependencies,
            timeline_flows=timeline_flows, on_finish=on_finish,
        )
        count = paths.flow_count
        cap = np.broadcast_to(np.asarray(rate_cap_bps, dtype=float), (count,))
        latency = np.zeros(count)
        if latency_s is not None:
            latency = np.broadcast_to(np.asarray(latency_s, dtype=float), (count,))
        self._added.append((paths, cap, latency))
        return ids

    def apply(self, change: Change) -> None:
        super().apply(change)
        self._changes.append(replace(change, time_s=max(float(change.time_s), self.now)))

    def history(self) -> RunHistory:
        if not self._added:
            empty = Paths(np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64))
            return RunHistory(empty, np.empty(0), np.empty(0), tuple(self._changes))
        return RunHistory(
            Paths.concat([a[0] for a in self._added]),
            np.concatenate([a[1] for a in self._added]),
            np.concatenate([a[2] for a in self._added]),
            tuple(self._changes),
        )


@dataclass(frozen=True, eq=False)
class CloudRun:
    """The whole cloud after one run: per site its jobs' flows, the federated traffic, the
    migrations (with each site's own log), the gateway failovers, and the engine's result."""

    cloud: CloudScenario
    strategy: str
    faults: bool
    plan: FederationPlan
    joined: SitesTopology
    sites: tuple[SitePart, ...]
    traffic: TrafficPart | None
    migrations: MigrationRun | None
    failovers: tuple[Failover, ...]
    capacity_bps: np.ndarray
    start_s: np.ndarray
    finish_s: np.ndarray
    events: int
    #: the rate over time (engine breakpoints, bit/s) of the federated traffic and the
    #: migration streams (each site's own jobs are not counted)
    wan_timeline_s: np.ndarray | None = None
    wan_timeline_bps: np.ndarray | None = None
    history: RunHistory | None = None


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


def _sites(cloud: CloudScenario, joined: SitesTopology, strategy: Strategy, faults: bool) -> list[SitePart]:
    parts = []
    extra0 = joined.link_count
    for i, site in enumerate(cloud.federation.sites):
        scenario = site.site_scenario(cloud.seed, cloud.routing, cloud.reaction, cloud.limits)
        if not faults:
            scenario = scenario.model_copy(update={"faults": ()})
        layout = joined.sites[i]
        nic = nic_plan(scenario, layout.topology)
        try:
            jobs, uncoupled = scenario_engine_jobs(scenario, layout.topology, strategy, nic)
        except CloudtwinError as err:
            raise type(err)(f"federation.sites.{i} ({site.name}): {err}") from err
        parts.append(SitePart(i, site.name, scenario, layout, nic, jobs, uncoupled, extra0))
        extra0 += jobs.capacity_bps.size - layout.topology.link_count
    return parts


def _leg_router(parts: list[SitePart], strategy: Strategy, seed: int) -> LegRouter:
    """Fabric legs routed by the scenario's strategy on each site (one connection each)."""
    cache: dict[tuple[int, int, int], list[int]] = {}

    def leg(site: int, src: int, dst: int, flow: int) -> list[int]:
        key = (site, src, dst)
        if key not in cache:
            part = parts[site]
            table = qp_flows(
                part.topology,
                np.array([src]),
                np.array([dst]),
                np.array([1.0]),
                1,
                np.random.default_rng([seed, site, src, dst]),
            )
            cache[key] = route_flows(part.scenario, part.topology, table, strategy).path(0).tolist()
        return cache[key]

    return leg


def _no_flows() -> FederatedFlows:
    none = np.empty(0, dtype=np.int64)
    return FederatedFlows(none, none, none, np.empty(0), none)


def _traffic(
    cloud: CloudScenario, plan: FederationPlan, joined: SitesTopology, leg: LegRouter, faults: bool
) -> TrafficPart:
    """The federated traffic (none when the scenario has no `traffic:`) and, with `faults`,
    the gateway faults as changes: the dead gateway's links at the fault, the flows through
    it moved to the standby after the failover. `ids` are filled when it joins the run."""
    flows = federated_flows(plan) if cloud.federation.traffic else _no_flows()
    active = np.zeros(len(plan.site_names), dtype=np.int64)
    paths = route_federated(plan, joined, flows, active, cloud.seed, leg=leg)
    if not faults:
        return TrafficPart(flows, paths, slice(0, 0), [], [], np.zeros((0, len(flows)), dtype=bool))
    changes, failovers, stalled = gateway_faults(plan, joined, flows, paths, cloud.seed, leg)
    changes += wan_fault_changes(cloud.federation, joined, tunnel_capacity(plan, joined))
    return TrafficPart(flows, paths, slice(0, 0), changes, failovers, stalled)


def run_cloud(cloud: CloudScenario, strategy: str | Strategy | None = None, faults: bool = True) -> CloudRun:
    """Run the whole cloud under `strategy` (default: its own), with its faults (site faults,
    gateway faults, boot faults) or without any."""
    check_cloud(cloud)
    chosen = resolve_strategy(_as_scenario(cloud), strategy)
    try:
        plan = plan_federation(cloud.federation)
    except FederationError as err:  # the planner names fields of the federation alone
        raise FederationError(f"federation.{err.field}", err.reason, err.status) from err
    joined = join_sites(cloud.federation)
    parts = _sites(cloud, joined, chosen, faults)
    capacity = tunnel_capacity(plan, joined)
    for part in parts:  # each site's fabric as its jobs see it (NIC links of VMs limited)
        lo = part.layout.link0
        capacity[lo : lo + part.topology.link_count] = part.jobs.capacity_bps[: part.topology.link_count]
    extras = [p.jobs.capacity_bps[p.topology.link_count :] for p in parts]
    base = np.concatenate([capacity, *extras])
    leg = _leg_router(parts, chosen, cloud.seed)
    traffic = _traffic(cloud, plan, joined, leg, faults)
    driver = None
    if cloud.mobility.migrations:
        driver = FederatedMigrationDriver(cloud, plan, joined, parts, leg, base.size, traffic.failovers)
    links = np.concatenate([base, driver.links_bps]) if driver is not None else base
    run = _RecordedRun(links, timeline=True)
    placed = []
    for part in parts:
        ids = _add_site(run, part)
        placed.append(replace(part, flows=slice(int(ids[0]), int(ids[-1]) + 1) if ids.size else slice(0, 0)))
    first = _add_traffic(run, traffic, plan, joined)
    traffic_part = replace(traffic, ids=slice(first, first + len(traffic.flows)))
    if driver is not None:
        driver.attach(run, base.size)
    try:
        result = run.run()
    except EngineError as err:
        raise ScenarioError(f"faults: some flows can never finish ({err}); give the fault an until") from err
    migrations = None
    if driver is not None:
        migrations = driver.outcome(result.events, result.finish_s, 0, 0.0)
    return CloudRun(
        cloud,
        chosen.name,
        faults,
        plan,
        joined,
        tuple(placed),
        traffic_part if len(traffic.flows) else None,
        migrations,
        tuple(traffic.failovers),
        run.capacity_bps,
        result.start_s,
        result.finish_s,
        result.events,
        result.timeline_s,
        result.timeline_bps,
        run.history(),
    )


def _add_traffic(run: Run, traffic: TrafficPart, plan: FederationPlan, joined: SitesTopology) -> int:
    """Add the traffic's flows and its gateway changes to the run; the first flow's run id."""
    flows, paths = traffic.flows, traffic.paths
    first = run.flow_count
    if len(flows):
        rate_cap = np.array([joined.sites[int(plan.ep_site[s])].topology.nic_rate_bps for s in flows.src])
        latency = np.bincount(
            paths.flow_of_entry, joined.latency_s[paths.link_ids], minlength=paths.flow_count
        )
        run.add_flows(paths, flows.size_bytes, flows.start_s, rate_cap, latency_s=latency)
    for change in traffic.changes:  # the traffic's own flow numbers, as run ids
        run.apply(replace(change, flows=np.asarray(change.flows, dtype=np.int64) + first))
    return first


def _as_scenario(cloud: CloudScenario) -> Scenario:
    """A scenario carrying the cloud's routing (to load its strategy)."""
    return Scenario(name=cloud.name, seed=cloud.seed, routing=cloud.routing)


def _add_site(run: Run, part: SitePart) -> np.ndarray:
    jobs = part.jobs
    if not jobs.flow_count:
        for change in jobs.changes:
            run.apply(_change_to_run(change, part))
        return np.empty(0, dtype=np.int64)
    moved = replace(
        jobs,
        paths=part.paths_to_run(jobs.paths),
        changes=[_change_to_run(c, part) for c in jobs.changes],
        network=np.zeros(jobs.flow_count, dtype=bool),  # the WAN timeline leaves the site's jobs out
    )
    return moved.add_to(run, timeline=True)


def _change_to_run(change, part: SitePart):  # noqa: ANN001, ANN202 - engine Change in, Change out
    from cloudtwin.engine.simulator import Change

    paths = None if change.paths is None else part.paths_to_run(change.paths)
    return Change(change.time_s, part.to_run(change.link_ids), change.capacity_bps, change.flows, paths)


class FederatedMigrationDriver(MigrationDriver):
    """Live migrations between the sites of one cloud: a stream leaves its host through the
    host's NIC tiers and the source site's fabric (routed by the strategy) to the active
    gateway, crosses the WAN path to the destination site's active gateway and its fabric to
    the new host. A gateway's failure stalls the streams through it until its failover is
    over; then they take the standby. The VM's identity follows its federated network's
    address mode (`identity_update_s`)."""

    def __init__(
        self,
        cloud: CloudScenario,
        plan: FederationPlan,
        joined: SitesTopology,
        parts: list[SitePart],
        leg: LegRouter,
        base_links: int,
        failovers: list[Failover],
    ) -> None:
        self.cloud = cloud
        self.joined = joined
        self.parts = parts
        self.leg = leg
        self.failover_list = failovers
        self.index = {p.name: p.index for p in parts}
        # failovers under way per site: its standby carries nothing until the last one ends
        self.failing = np.zeros(len(parts), dtype=np.int64)
        mobility = _mobility(cloud, parts)
        nic_bps = min(p.topology.nic_rate_bps for p in parts)
        self._setup(
            cloud.name, cloud.seed, mobility, lambda paths: paths, base_links, np.empty(0), nic_bps, None
        )

    def _path_bps(self, src_cloud: str, dst_cloud: str) -> float:
        a, b = self.index[src_cloud], self.index[dst_cloud]
        links = self._edge(a, b, np.zeros(self.base_links, dtype=bool))
        capacity = self.sim_capacity[links] if links.size else np.array([np.inf])
        return float(min(self.nic_bps, capacity.min()))

    def _latency_s(self, src_cloud: str, dst_cloud: str) -> float:
        a, b = self.index[src_cloud], self.index[dst_cloud]
        links = self._edge(a, b, np.zeros(self.base_links, dtype=bool))
        return float(self.joined.latency_s[links].sum())

    def _options(self, job: MigrationJob, vm: VmSpec, path_bps: float, rtt_s: float) -> MigrationOptions:
        options = options_of(job, path_bps, rtt_s, self.calibration)
        return replace(options, overlay_update_s=identity_update_s(self.cloud, vm, job.to, self.joined))

    def attach(self, run: Run, first_link: int) -> None:
        self.sim_capacity = run.capacity_bps
        super().attach(run, first_link)

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

    def _path(
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

    def _faults(self) -> None:
        """Each gateway failure: the streams through it stall, and move to the standby once
        its failover is over (and every other failover their new path needs is over too:
        failures that overlap are all applied)."""
        for info in self.failover_list:
            self.sim.schedule(info.at_s, partial(self._gateway_failed, info.site))
            self.sim.schedule(info.at_s + info.total_s, partial(self._failed_over, info.at_s, info.site))

    def _gateway_failed(self, site: str, now_s: float) -> None:
        self.failing[self.index[site]] += 1

    def _failed_over(self, at_s: float, site: str, now_s: float) -> None:
        self.failing[self.index[site]] -= 1
        capacity = self.sim.link_capacity_bps
        down = np.zeros(self.down.size, dtype=bool)
        down[: self.base_links] = capacity[: self.base_links] <= 0
        for live in self.live:
            if (
                live.migration.outcome == "running"
                and live.flow >= 0
                and live.migration.start_s < now_s  # it lived through the failover
                and not live.stalled
                and down[live.path[live.path < down.size]].any()
            ):
                since = max(at_s, live.migration.start_s)
                live.reroutes.append({"time_s": since, "event": f"stalled: gateway of {site} failed"})
        self._move_streams(now_s, at_s, down)


def _active(site: SiteLayout, down: np.ndarray) -> int | None:
    for k in (0, 1):
        if not down[[site.gateway_links[f"leaf->gw{k}"], site.gateway_links[f"gw{k}->wan"]]].any():
            return k
    return None


def _quarantined(part: SitePart) -> set[int]:
    """Hosts whose NIC failed measured boot: their site admits no VM there."""
    return {host for host, _ in part.nic.quarantined} if part.nic is not None else set()


def _mobility(cloud: CloudScenario, parts: list[SitePart]) -> Mobility:
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
