"""A migration's paths on one fabric: host -> (fabric) -> source gateway -> WAN link ->
destination gateway -> (fabric) -> host.

The clouds of `mobility:` are host groups of the scenario's one fabric, each with a
gateway host; the fabric legs are routed by the scenario's strategy (one connection
each), through the NIC tiers of their ends; each ordered pair of clouds has a WAN link of
its own. The faults the driver watches take links down and up; once the fabric has
converged after each (the strategy's repair delay), the streams move off dead links.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np

from cloudtwin.engine.simulator import Change
from cloudtwin.errors import CloudtwinError
from cloudtwin.faults.events import FabricState
from cloudtwin.faults.reaction import phases_for
from cloudtwin.flows import Paths
from cloudtwin.mobility.plan import scenario_nic_bps
from cloudtwin.routing.facts import reaction_of
from cloudtwin.scenario.mobility import VmSpec
from cloudtwin.topology.paths import surviving_topology
from cloudtwin.twin.migration import MigrationDriver, Progress, Reroute
from cloudtwin.twin.preparation import Prepared
from cloudtwin.twin.routing import route_flows
from cloudtwin.twin.run import Run
from cloudtwin.workloads import qp_flows

__all__ = ["FabricPaths", "fabric_migrations"]


class FabricPaths:
    """The migrations' paths on the prepared scenario's fabric, with `states` its faults
    (applied to the run's links; the tenants' own plan sets the same capacities)."""

    def __init__(self, prepared: Prepared, states: Sequence[FabricState] = ()) -> None:
        self.prepared = prepared
        self.states = list(states)
        mobility = prepared.scenario.mobility
        self.gateway = {c.name: c.gateway_host for c in mobility.clouds}
        names = [c.name for c in mobility.clouds]
        self.pairs = [(a, b) for a in names for b in names if a != b]
        self.wan_bps = mobility.wan.bandwidth
        self.wan_latency_s = float(mobility.wan.latency)
        self._links_bps = np.full(len(self.pairs), mobility.wan.bandwidth)
        self._nic_bps = scenario_nic_bps(prepared.scenario)
        self.wan = {pair: i for i, pair in enumerate(self.pairs)}
        self.routes: dict[tuple[int, int], np.ndarray | None] = {}

    @property
    def links_bps(self) -> np.ndarray:
        """One WAN link per ordered pair of clouds."""
        return self._links_bps

    @property
    def nic_bps(self) -> float:
        return self._nic_bps

    def bind(self, run: Run, first_link: int) -> None:
        """Number the WAN links from `first_link` (where the run put them)."""
        self.wan = {pair: first_link + i for i, pair in enumerate(self.pairs)}

    def path(
        self, src_host: int, src_cloud: str, dst_host: int, dst_cloud: str, down: np.ndarray
    ) -> np.ndarray:
        """Links of host -> source gateway -> WAN -> destination gateway -> host (empty if unroutable)."""
        first = self.fabric(src_host, self.gateway[src_cloud], down)
        last = self.fabric(self.gateway[dst_cloud], dst_host, down)
        if first is None or last is None:
            return np.empty(0, dtype=np.int64)
        wan = self.wan[(src_cloud, dst_cloud)]
        if down[wan]:
            return np.empty(0, dtype=np.int64)
        return np.concatenate((first, [wan], last)).astype(np.int64)

    def fabric(self, a: int, b: int, down: np.ndarray) -> np.ndarray | None:
        """The strategy's path from host `a` to host `b` on the links that are up (None when none)."""
        if a == b:
            return np.empty(0, dtype=np.int64)
        intact = not down.any()
        if intact and (a, b) in self.routes:
            return self.routes[(a, b)]
        links = self._route(a, b, down)
        if intact:
            self.routes[(a, b)] = links
        return links

    def _route(self, a: int, b: int, down: np.ndarray) -> np.ndarray | None:
        scenario, topology = self.prepared.scenario, self.prepared.topology
        view = (
            topology
            if not down[: topology.link_count].any()
            else surviving_topology(topology, ~down[: topology.link_count])
        )
        table = qp_flows(
            topology,
            topology.host_nics[[a], 0],
            topology.host_nics[[b], 0],
            np.array([1.0]),
            1,
            np.random.default_rng([scenario.seed, a, b]),
        )
        try:
            paths = route_flows(scenario, view, table, self.prepared.strategy)
        except CloudtwinError:  # no route on the surviving fabric
            return None
        links = paths.path(0)
        return None if down[links].any() else links

    def couple(self, paths: Paths) -> Paths:
        """Through the NIC tiers of the hosts at their ends."""
        return self.prepared.couple(paths)

    def path_bps(self, src_cloud: str, dst_cloud: str) -> float:
        """The stream's path rate when nothing else runs: the host NIC or the WAN."""
        return min(self._nic_bps, self.wan_bps)

    def latency_s(self, src_cloud: str, dst_cloud: str) -> float:
        """One-way latency of a stream between the two clouds (the WAN's)."""
        return self.wan_latency_s

    def identity_update_s(self, vm: VmSpec, to: str) -> float | None:
        """The migration's own `overlay_update` (None: as its options say)."""
        return None

    def watch(self, run: Run, reroute: Reroute) -> None:
        """The faults on the run's links (the same instants as the tenants' plan: setting a
        capacity twice changes nothing), and a re-route once the fabric has converged after each."""
        if not self.states:
            return
        for state in self.states:
            run.apply(
                Change(
                    state.time_s,
                    link_ids=state.changed.astype(np.int64),
                    capacity_bps=state.capacity_bps[state.changed],
                )
            )
        scenario = self.prepared.scenario
        delay = phases_for(reaction_of(self.prepared.strategy), scenario.reaction)[-1].delay_s
        for state in self.states:
            run.schedule(state.time_s + delay, partial(self._converged, reroute))

    def _converged(self, reroute: Reroute, now_s: float) -> None:
        """Move each stream off dead links, once the fabric has converged."""
        current = next(s for s in reversed(self.states) if s.time_s <= now_s + 1e-12)
        reroute(now_s, current.time_s, current.capacity_bps <= 0, None)


def fabric_migrations(
    prepared: Prepared, states: Sequence[FabricState] = (), progress: Progress | None = None
) -> MigrationDriver | None:
    """The prepared scenario's migrations as a driver on its fabric, with `states` its faults
    (None when it names no migration)."""
    scenario = prepared.scenario
    if not scenario.mobility.migrations:
        return None
    paths = FabricPaths(prepared, states)
    mobility = scenario.mobility
    return MigrationDriver(paths, mobility, name=scenario.name, seed=scenario.seed, progress=progress)
