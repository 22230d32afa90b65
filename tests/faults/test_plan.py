"""Repairs: a pinned flow waits for its controller; ECMP repairs locally over the survivors."""

from __future__ import annotations

import numpy as np
import pytest

from cloudtwin.engine import simulate
from cloudtwin.evaluation import build_flows, route_flows
from cloudtwin.faults import expand_faults, plan_repairs
from cloudtwin.routing import load_strategy
from cloudtwin.scenario.faults import Fault, Reaction
from cloudtwin.topology import NodeKind, build_topology


def _setup(make_scenario, strategy: str, *overrides: str):
    scenario = make_scenario(*overrides)
    topology = build_topology(scenario)
    flows = build_flows(scenario, topology)
    chosen = load_strategy(strategy)
    paths = route_flows(scenario, topology, flows, chosen)

    def route(view, index):
        return route_flows(scenario, view, flows.take(index), chosen)

    return scenario, topology, flows, paths, route


def _spine_of(topology, paths, flow: int) -> int:
    nodes = topology.link_dst[paths.path(flow)]
    return int(nodes[topology.node_kind[nodes] == NodeKind.SPINE][0])


def _run(topology, flows, paths, changes):
    rate = np.full(len(flows), topology.nic_rate_bps)
    return simulate(
        paths,
        topology.capacity_bps,
        flows.size_bytes,
        flows.start_s,
        rate,
        latency_s=paths.latency_s(topology),
        changes=changes,
        timeline=True,
    )


def test_pinned_flow_stalls_until_the_controller_repairs_it(make_scenario) -> None:
    # one 1 GiB flow host0 -> host1 across a 2 x 2 leaf-spine; its spine's downlink dies at 10 ms
    scenario, topology, flows, paths, route = _setup(
        make_scenario,
        "pinning",
        "fabric.leaves=2",
        "fabric.spines=2",
        "fabric.hosts_per_leaf=1",
        "workload.pattern=pairs",
    )
    assert len(flows) == 1
    spine = _spine_of(topology, paths, 0)
    name = f"leaf{topology.node_index[topology.edge_of_nic[flows.dst[0]]]}-spine{topology.node_index[spine]}"
    states = expand_faults([Fault(kind="link", target=name, at="10ms")], topology, 1)
    timings = Reaction()
    plan = plan_repairs(topology, flows, paths, route, "controller", timings, states)
    # one rule changes (the source leaf's choice of spine): 50 ms + 10 ms + 1 x 1 ms
    assert [r.rules_changed for r in plan.repairs] == [1]
    repair_s = 0.010 + 0.050 + 0.010 + 0.001
    assert plan.repairs[0].moved_s == pytest.approx(repair_s)
    result = _run(topology, flows, paths, plan.changes)
    line = flows.size_bytes[0] * 8 / topology.nic_rate_bps
    assert result.finish_s[0] == pytest.approx(line + (repair_s - 0.010) + 4e-6, rel=1e-9)
    stalled = (result.timeline_s >= 0.010) & (result.timeline_s < repair_s)
    assert stalled.any() and np.all(result.timeline_bps[stalled] == 0)
    after = (result.timeline_s >= repair_s) & (result.timeline_s < result.finish_s[0] - 1e-5)
    assert np.all(result.timeline_bps[after] == pytest.approx(topology.nic_rate_bps))
    assert _spine_of(topology, plan.changes[-1].paths, 0) != spine


def test_ecmp_local_repair_spreads_flows_over_the_survivors(make_scenario) -> None:
    # 16 hosts on leaf0 send 4 QPs each to leaf1 across 4 spines; leaf0's uplink to spine0 dies
    scenario, topology, flows, paths, route = _setup(
        make_scenario,
        "ecmp",
        "fabric.leaves=2",
        "fabric.spines=4",
        "fabric.hosts_per_leaf=16",
        "workload.pattern=shift",
        "workload.qps=4",
    )
    spines = np.array([_spine_of(topology, paths, f) for f in range(len(flows))])
    spine0 = int(np.flatnonzero(topology.node_kind == NodeKind.SPINE)[0])
    from_leaf0 = topology.node_index[topology.edge_of_nic[flows.src]] == 0
    hit = from_leaf0 & (spines == spine0)
    assert hit.sum() >= 4
    states = expand_faults([Fault(kind="link", target="leaf0-spine0", at="5ms")], topology, 1)
    plan = plan_repairs(topology, flows, paths, route, "local-then-protocol", Reaction(), states)
    local = plan.changes[1]
    assert local.time_s == pytest.approx(0.006)  # 1 ms after the failure, before BGP
    np.testing.assert_array_equal(np.sort(local.flows), np.flatnonzero(hit))
    moved_to = np.array([_spine_of(topology, local.paths, i) for i in range(local.flows.size)])
    survivors = set(np.flatnonzero(topology.node_kind == NodeKind.SPINE)[1:].tolist())
    assert set(moved_to.tolist()) == survivors  # every surviving spine takes some of them
    assert np.bincount(moved_to).max() < local.flows.size
    # after the local repair no flow from leaf0 stalls; flows into leaf0 via spine0 still do
    # (spine0 has no other way down to leaf0, and leaf1 learns of it only through BGP)
    segment = int(np.searchsorted(plan.segment_s, 0.006, side="right")) - 1
    assert not plan.stalled[segment][from_leaf0].any()
    assert np.array_equal(plan.stalled[segment], ~from_leaf0 & (spines == spine0))


def test_a_downlink_failure_waits_for_the_routing_protocol(make_scenario) -> None:
    # spine0 -> leaf1 dies: leaf0 cannot see it, so its flows via spine0 wait for BFD + BGP
    scenario, topology, flows, paths, route = _setup(
        make_scenario,
        "ecmp",
        "fabric.leaves=2",
        "fabric.spines=4",
        "fabric.hosts_per_leaf=16",
        "workload.pattern=shift",
    )
    states = expand_faults([Fault(kind="link", target="leaf1-spine0", at="5ms")], topology, 1)
    timings = Reaction()
    plan = plan_repairs(topology, flows, paths, route, "local-then-protocol", timings, states)
    protocol_s = 0.005 + timings.bfd_detect + timings.bgp_convergence
    spine0 = int(np.flatnonzero(topology.node_kind == NodeKind.SPINE)[0])
    from_leaf0 = topology.node_index[topology.edge_of_nic[flows.src]] == 0
    via_spine0 = np.array([_spine_of(topology, paths, f) == spine0 for f in range(len(flows))])
    waiting = np.flatnonzero(from_leaf0 & via_spine0)
    assert waiting.size >= 1
    changes = [c for c in plan.changes if c.paths is not None]  # appended with their repairs
    moves = {r.phase: c for r, c in zip(plan.repairs, changes, strict=True)}
    # the local repair (at leaf1, for its own uplink) moves none of leaf0's flows
    assert not np.isin(waiting, moves["local repair"].flows).any()
    assert moves["routing protocol"].time_s == pytest.approx(protocol_s)
    assert np.isin(waiting, moves["routing protocol"].flows).all()
    segment = int(np.searchsorted(plan.segment_s, 0.1, side="right")) - 1
    assert plan.stalled[segment][waiting].all()


def test_flows_go_back_when_the_link_returns(make_scenario) -> None:
    scenario, topology, flows, paths, route = _setup(
        make_scenario,
        "ecmp",
        "fabric.leaves=2",
        "fabric.spines=4",
        "fabric.hosts_per_leaf=8",
        "workload.pattern=shift",
    )
    states = expand_faults([Fault(kind="link", target="leaf0-spine0", at="5ms", until="20ms")], topology, 1)
    plan = plan_repairs(topology, flows, paths, route, "local-then-protocol", Reaction(), states)
    final = paths
    for change in plan.changes:
        if change.paths is not None:
            final = final.replace(change.flows, change.paths)
    np.testing.assert_array_equal(final.link_ids, paths.link_ids)


def test_a_dead_nic_stalls_its_flows_until_it_returns(make_scenario) -> None:
    # no strategy can route around a host's only NIC: its flows wait for the NIC itself
    scenario, topology, flows, paths, route = _setup(
        make_scenario,
        "pinning",
        "fabric.leaves=2",
        "fabric.spines=2",
        "fabric.hosts_per_leaf=1",
        "workload.pattern=pairs",
    )
    states = expand_faults([Fault(kind="nic", target="host0", at="10ms", until="30ms")], topology, 1)
    plan = plan_repairs(topology, flows, paths, route, "controller", Reaction(), states)
    assert plan.repairs == []
    result = _run(topology, flows, paths, plan.changes)
    line = flows.size_bytes[0] * 8 / topology.nic_rate_bps
    assert result.finish_s[0] == pytest.approx(line + 0.020 + 4e-6, rel=1e-9)


def test_a_strategy_may_declare_its_reaction() -> None:
    from cloudtwin.errors import RoutingError
    from cloudtwin.routing import reaction_of

    class Declared:
        name = "mine"
        reaction = "controller"

    class Wrong:
        name = "bad"
        reaction = "magic"

    assert reaction_of(Declared()) == "controller"  # type: ignore[arg-type]
    assert reaction_of(load_strategy("spray")) == "local-then-protocol"
    with pytest.raises(RoutingError, match="reaction 'magic'"):
        reaction_of(Wrong())  # type: ignore[arg-type]


@pytest.mark.parametrize("strategy", ["ecmp", "adaptive", "spray", "pinning"])
def test_many_overlapping_repairs_on_a_fat_tree(make_scenario, strategy: str) -> None:
    # regression: repairs decided at the same instant once made the planner compare arrays
    scenario, topology, flows, paths, route = _setup(
        make_scenario, strategy, "fabric.kind=fat-tree", "fabric.k=8", "seed=4"
    )
    faults = [
        Fault(kind="switch", target="core0", at="10ms", until="200ms"),
        Fault(kind="random", count=3, at="20ms", until="120ms"),
    ]
    states = expand_faults(faults, topology, 4)
    plan = plan_repairs(topology, flows, paths, route, reaction_of_name(strategy), Reaction(), states)
    assert plan.repairs
    result = _run(topology, flows, paths, plan.changes)
    assert np.all(np.isfinite(result.finish_s))


def reaction_of_name(strategy: str):
    from cloudtwin.routing import reaction_of

    return reaction_of(load_strategy(strategy))


def test_source_port_pinning_is_repaired_by_the_switches_first(make_scenario) -> None:
    # steering through the UDP source port rides plain ECMP: the switch next to the failure
    # repairs at once (the hash over the survivors); the controller re-pins later
    scenario, topology, flows, paths, route = _setup(
        make_scenario,
        "pinning",
        "fabric.leaves=2",
        "fabric.spines=4",
        "fabric.hosts_per_leaf=8",
        "workload.pattern=shift",
        "reaction.pinning_install=source-port",
    )
    ecmp = load_strategy("ecmp")

    def data_plane(view, index):
        return route_flows(scenario, view, flows.take(index), ecmp)

    states = expand_faults([Fault(kind="link", target="leaf0-spine0", at="5ms")], topology, 1)
    timings = scenario.reaction
    plan = plan_repairs(topology, flows, paths, route, "controller", timings, states, data_plane)
    phases = [(r.phase, r.moved_s) for r in plan.repairs]
    assert phases[0] == ("local repair", pytest.approx(0.006))
    controller = [r for r in plan.repairs if r.phase == "controller"]
    for repair in controller:  # one host update per flow moved
        assert repair.rules_changed == repair.flows
        assert repair.moved_s == pytest.approx(0.005 + 0.060 + 0.001 * repair.flows)
