"""The repair plan of one strategy: fabric changes and path moves, in time, for the engine.

Paths never move for free: a flow whose path crosses a dead link stays on it (and makes
no progress) until a repair phase of its strategy moves it, or the link returns. Each
phase acts on what it knows: the fabric state of the failure it reacts to, plus every
port that is down when it acts (seen by its own switch only); a local phase routes as
the switches next to the failures would (others still believe every path works), a
converged phase (routing protocol, controller) on the whole surviving fabric. A
converged phase also puts flows that an earlier repair displaced back on their original
path once that path works again. Only flows on dead links move (resilient hashing: the
others keep their paths), unless pinning is set to recompute everything.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from cloudtwin.engine.simulator import Change
from cloudtwin.faults.events import FabricState
from cloudtwin.faults.reaction import Phase, phases_for, rule_links
from cloudtwin.flows import Flows, Paths
from cloudtwin.routing.facts import ReactionKind
from cloudtwin.scenario.faults import Reaction
from cloudtwin.topology.paths import routable, surviving_topology
from cloudtwin.topology.topology import Topology

__all__ = [
    "Repair",
    "RepairPlan",
    "RouteFn",
    "plan_repairs",
    "rules_changed",
]

RouteFn = Callable[[Topology, np.ndarray], Paths]
"""route(view, flow_indices) -> the strategy's paths for those flows, in that order, on the view."""


@dataclass(frozen=True)
class Repair:
    """One repair phase that moved flows: when it decided, when the flows moved, how many."""

    phase: str
    fault_s: float
    decided_s: float
    moved_s: float
    flows: int
    rules_changed: int


@dataclass(frozen=True, eq=False)
class RepairPlan:
    """The engine's changes, the repairs made, and per segment of time which flows sit on a
    dead link (`stalled`) or on a dead or degraded one (`impaired`); segment i runs from
    `segment_s[i]` to `segment_s[i + 1]` (the last one forever)."""

    changes: list[Change]
    repairs: list[Repair]
    segment_s: np.ndarray
    stalled: np.ndarray
    impaired: np.ndarray


def rules_changed(topology: Topology, flows: Flows, old: Paths, new: Paths) -> int:
    """Per-flow rules to add, change or delete when flows go from `old` to `new` paths
    (both listing the same flows): one rule per switch egress where the flow had a choice;
    a (flow, switch) whose egress set differs counts once."""

    def keyed(paths: Paths) -> np.ndarray:
        owner = paths.flow_of_entry
        dst_edge = topology.edge_of_nic[flows.dst[owner]]
        rule = rule_links(topology, paths.link_ids, dst_edge)
        switch = topology.link_src[paths.link_ids[rule]].astype(np.int64)
        at = owner[rule].astype(np.int64) * topology.node_count + switch
        return at * topology.link_count + paths.link_ids[rule]

    differ = np.setxor1d(keyed(old), keyed(new))
    return int(np.unique(differ // topology.link_count).size)


def plan_repairs(
    topology: Topology,
    flows: Flows,
    paths: Paths,
    route: RouteFn,
    kind: ReactionKind,
    timings: Reaction,
    states: Sequence[FabricState],
    data_plane: RouteFn | None = None,
) -> RepairPlan:
    """Every change the engine must apply for `states` under a strategy's reaction model.

    `data_plane` routes as the switches' ECMP hash does, for phases that repair a
    strategy in the data plane (source-port pinning before its controller acts).
    """
    planner = _Planner(topology, flows, paths, route, timings, data_plane)
    queue: list[tuple[float, int, int, object]] = []
    ticket = itertools.count()  # a unique tie-breaker: payloads are never compared
    for k, state in enumerate(states):
        heapq.heappush(queue, (state.time_s, 0, next(ticket), state))
        if not state.status_changed:
            continue
        for phase in phases_for(kind, timings):
            if phase.on_down_only and not state.went_down:
                continue
            heapq.heappush(queue, (state.time_s + phase.delay_s, 1, next(ticket), (k, phase)))
    while queue:
        time, _, _, item = heapq.heappop(queue)
        if isinstance(item, FabricState):
            planner.fabric(item)
        elif isinstance(item, tuple) and isinstance(item[1], Phase):
            k, phase = item
            move = planner.decide(time, states[k], phase)
            if move is not None:
                heapq.heappush(queue, (move[0], 2, next(ticket), move))
        else:
            planner.apply(*item)  # type: ignore[misc]
        planner.snapshot(time)
    return planner.plan()


class _Planner:
    """The state the plan is built from: capacities now, paths now, what was decided."""

    def __init__(
        self,
        topology: Topology,
        flows: Flows,
        paths: Paths,
        route: RouteFn,
        timings: Reaction,
        data_plane: RouteFn | None = None,
    ) -> None:
        self.topology, self.flows, self.route, self.timings = topology, flows, route, timings
        self.data_plane = data_plane or route
        self.original = self.current = self.intended = paths
        self.controller_free_s = 0.0
        self.base = topology.capacity_bps.astype(float)
        self.capacity = self.base.copy()
        self.changes: list[Change] = []
        self.repairs: list[Repair] = []
        self.times: list[float] = []
        self.stalled: list[np.ndarray] = []
        self.impaired: list[np.ndarray] = []

    def fabric(self, state: FabricState) -> None:
        self.capacity = state.capacity_bps
        self.changes.append(Change(state.time_s, state.changed, state.capacity_bps[state.changed]))

    def decide(
        self, time: float, state: FabricState, phase: Phase
    ) -> tuple[float, np.ndarray, Paths, Repair] | None:
        """The flows this phase moves and their new paths (applied when installed)."""
        # what the phase knows: the failure it reacts to (everywhere, once converged), and
        # every port that is down now (only its own switch: it never forwards onto it)
        known = state.capacity_bps > 0
        up = known & (self.capacity > 0)
        view = surviving_topology(self.topology, known, phase.converged, ports_up=up)
        # decisions build on earlier ones, even those whose rules are still being installed
        dead = self.intended.crosses(~up)
        candidate = self.intended
        if phase.converged:
            displaced = self.intended.differs(self.original)
            back = np.flatnonzero(displaced & ~self.original.crosses(~up))
            candidate = candidate.replace(back, self.original.take(back))
            dead &= candidate.crosses(~up)
        ok = routable(view, self.flows.src, self.flows.dst, up)
        need = ok if phase.controller and self.timings.pinning_repair == "all" else dead & ok
        routed = np.flatnonzero(ok)
        if need.any():
            fresh = (self.data_plane if phase.data_plane else self.route)(view, routed)
            pick = np.flatnonzero(need[routed])
            candidate = candidate.replace(routed[pick], fresh.take(pick))
        moved = np.flatnonzero(candidate.differs(self.intended))
        if moved.size == 0:
            return None
        new = candidate.take(moved)
        installed = moved[self.flows.start_s[moved] <= time]
        if self.timings.pinning_install == "source-port" and phase.controller:
            rules = int(installed.size)  # one source-port update on a host per flow moved
        else:
            rules = rules_changed(
                self.topology,
                self.flows.take(installed),
                self.intended.take(installed),
                candidate.take(installed),
            )
        self.intended = candidate
        at = time
        if phase.controller:  # one batch of rules at a time, in the order decided
            at = max(time, self.controller_free_s) + self.timings.rule_install * rules
            self.controller_free_s = at
        repair = Repair(phase.name, state.time_s, time, at, int(moved.size), rules)
        return at, moved, new, repair

    def apply(self, time: float, moved: np.ndarray, new: Paths, repair: Repair) -> None:
        self.changes.append(Change(time, flows=moved, paths=new))
        self.current = self.current.replace(moved, new)
        self.repairs.append(repair)

    def snapshot(self, time: float) -> None:
        if self.times and self.times[-1] == time:
            self.times.pop()
            self.stalled.pop()
            self.impaired.pop()
        self.times.append(time)
        self.stalled.append(self.current.crosses(self.capacity <= 0))
        self.impaired.append(self.current.crosses(self.capacity < self.base))

    def plan(self) -> RepairPlan:
        n = len(self.flows)
        return RepairPlan(
            changes=self.changes,
            repairs=self.repairs,
            segment_s=np.array(self.times),
            stalled=np.array(self.stalled).reshape(-1, n),
            impaired=np.array(self.impaired).reshape(-1, n),
        )
