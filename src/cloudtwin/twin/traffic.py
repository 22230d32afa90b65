"""The federated networks' traffic as a driver of a run over the joined sites' links.

The inter-site flows share every link with the site-local ones; when a site's active
gateway fails, its links go to zero capacity (the flows through it stall) and after the
failover time the flows move to the standby gateway; a WAN fault cuts or degrades a WAN
link over its windows. The driver adds the flows and those changes to the run; its links
are the joined sites' (the run's first links), so it brings none of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from cloudtwin.engine.simulator import Change
from cloudtwin.intercloud.plan import FederationPlan
from cloudtwin.intercloud.traffic import (
    Failover,
    FederatedFlows,
    LegRouter,
    failover,
    route_federated,
    tunnel_capacity,
)
from cloudtwin.topology.paths import Paths
from cloudtwin.topology.sites import SitesTopology
from cloudtwin.twin.run import Run
from cloudtwin.twin.wan import wan_fault_changes

__all__ = ["TrafficDriver", "TrafficPart", "gateway_faults", "no_traffic"]


@dataclass(frozen=True, eq=False)
class TrafficPart:
    """The federated networks' traffic in a run: its flows, paths (run ids), where its flows
    sit in the run (`ids`), its changes, the gateway failovers and which flows each stalled."""

    flows: FederatedFlows
    paths: Paths
    ids: slice
    changes: list[Change]
    failovers: list[Failover]
    stalled: np.ndarray


class TrafficDriver:
    """Federated traffic as a driver: its flows (`part`) with each its sender's NIC rate as
    cap and its path's latency, and its changes applied when it attaches to a run."""

    def __init__(self, part: TrafficPart, rate_cap_bps: np.ndarray, latency_s: np.ndarray) -> None:
        self.part = part
        self.rate_cap_bps = rate_cap_bps
        self.latency_s = latency_s

    @classmethod
    def of(
        cls,
        plan: FederationPlan,
        joined: SitesTopology,
        flows: FederatedFlows,
        *,
        seed: int,
        faults: bool = True,
        leg: LegRouter | None = None,
    ) -> TrafficDriver:
        """`flows` on the joined sites, routed with fabric legs from `leg` (default: shortest
        paths), with the federation's gateway and WAN faults when `faults`."""
        active = np.zeros(len(plan.site_names), dtype=np.int64)
        paths = route_federated(plan, joined, flows, active, seed, leg=leg)
        part = TrafficPart(flows, paths, slice(0, 0), [], [], np.zeros((0, len(flows)), dtype=bool))
        if faults:
            changes, failovers, stalled = gateway_faults(plan, joined, flows, paths, seed, leg)
            changes += wan_fault_changes(plan.scenario, joined, tunnel_capacity(plan, joined))
            part = replace(part, changes=changes, failovers=failovers, stalled=stalled)
        rate_cap = np.array([joined.sites[int(plan.ep_site[s])].topology.nic_rate_bps for s in flows.src])
        entry = joined.latency_s[paths.link_ids]
        latency = np.bincount(paths.flow_of_entry, entry, minlength=paths.flow_count)
        return cls(part, rate_cap, latency)

    def without_faults(self) -> TrafficDriver:
        """The same flows on the same paths, without any change."""
        calm = np.zeros((0, len(self.flows)), dtype=bool)
        part = replace(self.part, changes=[], failovers=[], stalled=calm)
        return TrafficDriver(part, self.rate_cap_bps, self.latency_s)

    @property
    def flows(self) -> FederatedFlows:
        return self.part.flows

    @property
    def links_bps(self) -> np.ndarray:
        """None of its own: it runs on the joined sites' links (the run's first)."""
        return np.empty(0)

    def attach(self, run: Run, first_link: int) -> None:
        """Add the flows and their changes to `run`."""
        first = run.flow_count
        flows, paths = self.part.flows, self.part.paths
        if len(flows):
            run.add_flows(paths, flows.size_bytes, flows.start_s, self.rate_cap_bps, latency_s=self.latency_s)
        for change in self.part.changes:  # the traffic's own flow numbers, as run ids
            run.apply(replace(change, flows=np.asarray(change.flows, dtype=np.int64) + first))
        self.part = replace(self.part, ids=slice(first, first + len(flows)))

    def outcome(self) -> TrafficPart:
        """The traffic as it ran (its flows' run ids once attached)."""
        return self.part


def no_traffic() -> FederatedFlows:
    """No federated flow (a cloud without `traffic:`)."""
    none = np.empty(0, dtype=np.int64)
    return FederatedFlows(none, none, none, np.empty(0), none)


def gateway_faults(
    plan: FederationPlan,
    joined: SitesTopology,
    flows: FederatedFlows,
    paths: Paths,
    seed: int,
    leg: LegRouter | None = None,
) -> tuple[list[Change], list[Failover], np.ndarray]:
    """The scenario's gateway faults as engine changes: the active gateway's links go to 0 at
    the fault, the flows through it move to the standby after the failover; each failover,
    and which flows each stalled. A fault with `until` gives the gateway's links back then
    (the repaired gateway stays the standby); a flapping fault is each of its failures."""
    index = {name: i for i, name in enumerate(plan.site_names)}
    built = tunnel_capacity(plan, joined)
    active = np.zeros(len(plan.site_names), dtype=np.int64)
    changes, failovers, stalled = [], [], []
    for fault in plan.scenario.gateway_failures():
        site = index[fault.site]
        gone = joined.sites[site].gateways[int(active[site])]
        dead = joined.links_of(gone)
        crossing = np.zeros(paths.flow_count, dtype=bool)
        crossing[paths.flow_of_entry[np.isin(paths.link_ids, dead)]] = True
        info = failover(plan, joined, site, fault.at)
        active[site] = 1 - active[site]
        moved = np.flatnonzero(crossing)
        new = route_federated(plan, joined, flows, active, seed, moved, leg)
        changes.append(Change(fault.at, link_ids=dead, capacity_bps=np.zeros(dead.size)))
        changes.append(Change(fault.at + info.total_s, flows=moved, paths=new))
        if fault.until is not None:
            changes.append(Change(fault.until, link_ids=dead, capacity_bps=built[dead]))
        paths = paths.replace(moved, new)
        failovers.append(info)
        stalled.append(crossing)
    return changes, failovers, np.array(stalled, dtype=bool).reshape(len(failovers), paths.flow_count)
