"""Operational complexity, counted from the scenario: state in the switches, who must
cooperate, what changes when jobs come and go and when links fail, and one score.

Counts (per strategy):

- `routes_per_switch`: one route per edge-switch prefix (BGP in the underlay) plus, on an
  edge switch, one host entry per attached NIC; the same for every strategy.
- `ecmp_groups_per_switch`: distinct next-hop sets with two or more members over those
  routes.
- `flow_rules_per_switch`: per-flow policy (or static) entries, for strategies that pin
  paths: one per flow at each switch where the flow has a choice of next hop.
- `flow_state_per_switch`: per-flow state the switch learns by itself (flowlet tables).
- `forwarding_entries`: routes + ECMP groups + flow rules on the busiest switch.
- `rule_changes_per_job`: rules installed when a job arrives (and removed when it leaves);
  with source-port pinning, the source ports set on the hosts (one per flow).
- `rule_changes_per_fault`: route entries whose next-hop set changes (every strategy)
  plus per-flow rules the repair changed (pinning), per fault.
- `entries_per_flow`, `entries_per_tenant`: per-flow switch state (rules or learned)
  per flow and per tenant: how the state grows as tenants add flows (the underlay's
  routes do not grow with tenants; their VXLAN overlays live on the hosts).

Score (lower is simpler)::

    log10(1 + forwarding_entries) + log10(1 + rule_changes_per_fault)
    + log10(1 + rule_changes_per_job) + 2 x controller + 1 x host_cooperation
    + 0.5 x (switch features beyond plain ECMP) + 1 x (state grows with flows)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from cloudtwin.evaluation.results import Complexity
from cloudtwin.faults.events import FabricState
from cloudtwin.faults.plan import Repair
from cloudtwin.faults.reaction import rule_links
from cloudtwin.flows import Flows, Paths
from cloudtwin.routing.facts import PLAIN_ECMP, Profile
from cloudtwin.topology.paths import next_hop_candidates, surviving_topology
from cloudtwin.topology.topology import NodeKind, Topology

__all__ = ["Complexity", "complexity", "profile_score", "route_updates", "routing_state"]

def routing_state(topology: Topology) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(switches, routes per switch, ECMP groups per switch) of the intact fabric."""
    switches = np.flatnonzero(topology.node_kind != NodeKind.NIC)
    edges = topology.edge_switches.size
    nics = np.bincount(
        topology.edge_of_nic[topology.node_kind == NodeKind.NIC], minlength=topology.node_count
    )
    routes = np.where(topology.edge_slot[switches] >= 0, edges - 1 + nics[switches], edges)
    return switches, routes, _group_count(topology, switches)


def _next_hop_sets(topology: Topology, switches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per (switch, destination edge): the next-hop links as a row mask."""
    edges = topology.edge_switches.size
    nodes = np.repeat(switches, edges)
    slots = np.tile(np.arange(edges), switches.size)
    cand, ok = next_hop_candidates(topology, nodes, slots)
    return np.where(ok, cand, -1), nodes


def _group_count(topology: Topology, switches: np.ndarray) -> np.ndarray:
    sets, nodes = _next_hop_sets(topology, switches)
    multi = (sets >= 0).sum(axis=1) >= 2
    groups = np.zeros(topology.node_count, dtype=np.int64)
    for node in np.unique(nodes[multi]):
        rows = sets[multi & (nodes == node)]
        groups[node] = np.unique(np.sort(rows, axis=1), axis=0).shape[0]
    return groups[switches]


def route_updates(topology: Topology, state: FabricState) -> int:
    """Route entries (switch, destination prefix) whose next-hop set a fault changes."""
    switches = np.flatnonzero(topology.node_kind != NodeKind.NIC)
    before, _ = _next_hop_sets(topology, switches)
    view = surviving_topology(topology, state.capacity_bps > 0)
    after, _ = _next_hop_sets(view, switches)
    width = max(before.shape[1], after.shape[1])
    before = np.sort(np.pad(before, ((0, 0), (0, width - before.shape[1])), constant_values=-1), axis=1)
    after = np.sort(np.pad(after, ((0, 0), (0, width - after.shape[1])), constant_values=-1), axis=1)
    return int(np.count_nonzero(np.any(before != after, axis=1)))


def _rules_per_switch(topology: Topology, flows: Flows, paths: Paths) -> np.ndarray:
    owner = paths.flow_of_entry
    rule = rule_links(topology, paths.link_ids, topology.edge_of_nic[flows.dst[owner]])
    return np.bincount(topology.link_src[paths.link_ids[rule]], minlength=topology.node_count)


def profile_score(profile: Profile) -> float:
    """The part of the score a strategy's needs give, whatever the fabric: a controller (2),
    host cooperation (1), each switch feature beyond plain ECMP (0.5), state that grows with
    flows (1)."""
    grows = profile.flow_rules or profile.flow_state or profile.host_steering
    extra_features = [f for f in profile.switch_features if f != PLAIN_ECMP]
    return 2 * profile.controller + 1 * profile.host_cooperation + 0.5 * len(extra_features) + 1 * grows


def complexity(
    topology: Topology,
    flows: Flows,
    paths: Paths,
    profile: Profile,
    states: Sequence[FabricState],
    repairs: Sequence[Repair],
) -> Complexity:
    """Raw counts and the score of one strategy on one scenario (see the module docstring)."""
    switches, routes, groups = routing_state(topology)
    per_switch_rules = _rules_per_switch(topology, flows, paths)[switches]
    rules = per_switch_rules if profile.flow_rules else np.zeros_like(per_switch_rules)
    state = per_switch_rules if profile.flow_state else np.zeros_like(per_switch_rules)
    entries = routes + groups + rules
    jobs = np.unique(flows.job)
    per_job = [_job_changes(topology, flows, paths, profile, int(job)) for job in jobs]
    downs = [s for s in states if s.went_down]
    routed = sum(route_updates(topology, s) for s in downs)
    if profile.host_steering:  # the switches' own repairs change no host state
        flow_changes = sum(r.rules_changed for r in repairs if r.phase == "controller")
    else:
        flow_changes = sum(r.rules_changed for r in repairs) if profile.flow_rules else 0
    per_fault = (routed + flow_changes) / len(downs) if downs else 0.0
    per_job_mean = float(np.mean(per_job)) if per_job else 0.0
    grows = profile.flow_rules or profile.flow_state or profile.host_steering
    score = (
        math.log10(1 + int(entries.max(initial=0)))
        + math.log10(1 + per_fault)
        + math.log10(1 + per_job_mean)
        + profile_score(profile)
    )
    return Complexity(
        score=round(score, 3),
        forwarding_entries=int(entries.max(initial=0)),
        forwarding_entries_total=int(entries.sum()),
        routes_per_switch_max=int(routes.max(initial=0)),
        ecmp_groups_per_switch_max=int(groups.max(initial=0)),
        flow_rules_per_switch_max=int(rules.max(initial=0)),
        flow_rules_total=int(rules.sum()),
        flow_state_per_switch_max=int(state.max(initial=0)),
        rule_changes_per_job=per_job_mean,
        rule_changes_per_fault=per_fault,
        route_updates_per_fault=routed / len(downs) if downs else 0.0,
        flow_rule_changes_per_fault=flow_changes / len(downs) if downs else 0.0,
        host_entries_per_job=per_job_mean if profile.host_steering else 0.0,
        controller=profile.controller,
        host_cooperation=profile.host_cooperation,
        switch_features=list(profile.switch_features),
        state_grows_with="flows" if grows else "fabric size (prefixes)",
        entries_per_flow=float(rules.sum() + state.sum()) / max(len(flows), 1),
        entries_per_tenant=float(rules.sum() + state.sum()) / max(np.unique(flows.tenant).size, 1),
        needs=profile.needs,
    )


def _job_changes(topology: Topology, flows: Flows, paths: Paths, profile: Profile, job: int) -> int:
    """Rules (switches) or source ports (hosts) set up when a job arrives."""
    if profile.host_steering:
        return int(np.count_nonzero(flows.job == job))
    return _rules_for(topology, flows, paths, job) if profile.flow_rules else 0


def _rules_for(topology: Topology, flows: Flows, paths: Paths, job: int) -> int:
    owner = paths.flow_of_entry
    rule = rule_links(topology, paths.link_ids, topology.edge_of_nic[flows.dst[owner]])
    return int(np.count_nonzero(rule & (flows.job[owner] == job)))
