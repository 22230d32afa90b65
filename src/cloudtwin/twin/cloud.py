"""One cloud on one run: every site's tenant jobs (with its NIC tiers, faults and repairs),
the federated traffic between sites and the live migrations between them, all on one
`Run` over the joined sites' links.

Each site's jobs are prepared as `run` and `evaluate` would on that site alone and
renumbered into the run (`sites.py`); the federated traffic (`traffic.py`) and the
migrations (`migration.py`, on the sites' paths) are drivers of the same run. Federated
traffic and migration streams take their fabric legs from the scenario's routing strategy
and their gateway and WAN links from the federation; a gateway's failure stops what
crosses it until the standby has taken over (detection, election, tunnel set-up and route
propagation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cloudtwin.errors import EngineError, FederationError, ScenarioError
from cloudtwin.intercloud.plan import FederationPlan, plan_federation
from cloudtwin.intercloud.traffic import Failover, federated_flows, tunnel_capacity
from cloudtwin.routing.strategy import Strategy
from cloudtwin.scenario.cloud import CloudScenario
from cloudtwin.topology.estimate import check_cloud
from cloudtwin.topology.sites import SitesTopology, join_sites
from cloudtwin.twin.migration import MigrationDriver, MigrationRun
from cloudtwin.twin.preparation import resolve_strategy
from cloudtwin.twin.run import Driver, Run, RunHistory, attach_drivers
from cloudtwin.twin.sites import (
    SitePart,
    SitesPaths,
    identity_update_s,
    leg_router,
    site_parts,
    sites_mobility,
)
from cloudtwin.twin.traffic import TrafficDriver, TrafficPart, no_traffic

__all__ = ["CloudRun", "RunHistory", "SitePart", "TrafficPart", "identity_update_s", "run_cloud"]


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


def run_cloud(cloud: CloudScenario, strategy: str | Strategy | None = None, faults: bool = True) -> CloudRun:
    """Run the whole cloud under `strategy` (default: its own), with its faults (site faults,
    gateway faults, boot faults) or without any."""
    check_cloud(cloud)
    chosen = resolve_strategy(strategy, cloud.routing)
    try:
        plan = plan_federation(cloud.federation)
    except FederationError as err:  # the planner names fields of the federation alone
        raise FederationError(f"federation.{err.field}", err.reason, err.status) from err
    joined = join_sites(cloud.federation)
    parts = site_parts(cloud, joined, chosen, faults)
    capacity = tunnel_capacity(plan, joined)
    for part in parts:  # each site's fabric as its jobs see it (NIC links of VMs limited)
        lo = part.layout.link0
        capacity[lo : lo + part.topology.link_count] = part.jobs.capacity_bps[: part.topology.link_count]
    extras = [p.jobs.capacity_bps[p.topology.link_count :] for p in parts]
    base = np.concatenate([capacity, *extras])
    leg = leg_router(parts, cloud.seed)
    flows = federated_flows(plan) if cloud.federation.traffic else no_traffic()
    traffic = TrafficDriver.of(plan, joined, flows, seed=cloud.seed, faults=faults, leg=leg)
    migrations = None
    if cloud.mobility.migrations:
        paths = SitesPaths(cloud, joined, parts, leg, traffic.part.failovers)
        mobility = sites_mobility(cloud, parts)
        migrations = MigrationDriver(paths, mobility, name=cloud.name, seed=cloud.seed)
    drivers: list[Driver] = [traffic] + ([migrations] if migrations is not None else [])
    run = Run(np.concatenate([base, *(d.links_bps for d in drivers)]), timeline=True, record=True)
    placed = tuple(part.add_to(run) for part in parts)
    attach_drivers(run, drivers, base.size)
    try:
        result = run.run()
    except EngineError as err:
        raise ScenarioError(f"faults: some flows can never finish ({err}); give the fault an until") from err
    moved = traffic.outcome()
    return CloudRun(
        cloud,
        chosen.name,
        faults,
        plan,
        joined,
        placed,
        moved if len(moved.flows) else None,
        None if migrations is None else migrations.outcome().run(cloud.name, result.events, np.empty(0), 0.0),
        tuple(moved.failovers),
        run.capacity_bps,
        result.start_s,
        result.finish_s,
        result.events,
        result.timeline_s,
        result.timeline_bps,
        run.history(),
    )
