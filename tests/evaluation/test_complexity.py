"""Complexity counts, checked by hand on a 2-leaf x 2-spine fabric with 2 hosts per leaf."""

from __future__ import annotations

import math

import pytest

from cloudtwin.evaluation import build_flows, route_flows
from cloudtwin.evaluation.complexity import complexity, routing_state
from cloudtwin.faults import expand_faults
from cloudtwin.faults.plan import Repair
from cloudtwin.routing import USER_PROFILE, load_strategy, profile_of
from cloudtwin.scenario.faults import Fault
from cloudtwin.topology import NodeKind, build_topology

SMALL = ("fabric.leaves=2", "fabric.spines=2", "fabric.hosts_per_leaf=2", "workload.pattern=shift")


@pytest.fixture
def small(make_scenario):
    scenario = make_scenario(*SMALL)
    topology = build_topology(scenario)
    return scenario, topology, build_flows(scenario, topology)


def test_routes_and_groups_per_switch(small) -> None:
    _, topology, _ = small
    switches, routes, groups = routing_state(topology)
    kinds = topology.node_kind[switches]
    # a leaf: a route to the other leaf + a host entry for each of its 2 NICs; a spine: 2 leaves
    assert routes[kinds == NodeKind.LEAF].tolist() == [3, 3]
    assert routes[kinds == NodeKind.SPINE].tolist() == [2, 2]
    # a leaf has one ECMP group (both spines, toward the other leaf); a spine has none
    assert groups[kinds == NodeKind.LEAF].tolist() == [1, 1]
    assert groups[kinds == NodeKind.SPINE].tolist() == [0, 0]


def test_counts_and_score_for_ecmp_and_pinning(small) -> None:
    scenario, topology, flows = small
    assert len(flows) == 4  # host i -> host i+2: every flow crosses the spines
    states = expand_faults([Fault(kind="link", target="leaf0-spine0", at="1ms")], topology, 1)
    ecmp_paths = route_flows(scenario, topology, flows, load_strategy("ecmp"))
    ecmp = complexity(topology, flows, ecmp_paths, load_strategy("ecmp").profile, states, [])
    # leaf0 -> leaf1 and leaf1 -> leaf0 lose spine0; spine0 reaches leaf0 the long way now
    assert ecmp.route_updates_per_fault == 3
    assert ecmp.forwarding_entries == 3 + 1
    assert ecmp.flow_rules_per_switch_max == 0 and ecmp.rule_changes_per_job == 0
    assert ecmp.score == pytest.approx(round(math.log10(1 + 4) + math.log10(1 + 3), 3))

    pin_paths = route_flows(scenario, topology, flows, load_strategy("pinning"))
    repairs = [Repair("controller", 0.001, 0.061, 0.063, 2, 2)]
    pinning = complexity(topology, flows, pin_paths, load_strategy("pinning").profile, states, repairs)
    # one rule per flow, at its source leaf (the only switch with a choice): 2 per leaf
    assert pinning.flow_rules_per_switch_max == 2 and pinning.flow_rules_total == 4
    assert pinning.forwarding_entries == 3 + 1 + 2
    assert pinning.rule_changes_per_job == 4
    assert pinning.rule_changes_per_fault == 3 + 2
    expected = math.log10(1 + 6) + math.log10(1 + 5) + math.log10(1 + 4) + 2 + 0.5 + 1
    assert pinning.score == pytest.approx(round(expected, 3))
    assert pinning.score > ecmp.score
    assert pinning.entries_per_flow == 1 and pinning.entries_per_tenant == 4  # one tenant
    assert ecmp.entries_per_flow == 0 and ecmp.entries_per_tenant == 0


def test_user_strategies_are_assumed_to_need_a_controller(monkeypatch) -> None:
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "examples"))
    assert profile_of(load_strategy("user_strategy:LowestSpine")) == USER_PROFILE  # declared in its module
    assert profile_of(load_strategy("ecmp")) is load_strategy("ecmp").profile

    class Declared:
        name = "mine"
        profile = "adaptive"

    assert profile_of(Declared()) is load_strategy("adaptive").profile  # type: ignore[arg-type]


def test_source_port_pinning_moves_the_state_to_the_hosts(small) -> None:
    scenario, topology, flows = small
    PINNING_SOURCE_PORT = load_strategy("pinning").source_port_profile
    assert profile_of(load_strategy("pinning"), "source-port") is PINNING_SOURCE_PORT
    paths = route_flows(scenario, topology, flows, load_strategy("pinning"))
    counts = complexity(topology, flows, paths, PINNING_SOURCE_PORT, [], [])
    assert counts.controller and counts.host_cooperation
    assert counts.flow_rules_per_switch_max == 0 and counts.forwarding_entries == 3 + 1
    assert counts.rule_changes_per_job == 4 and counts.host_entries_per_job == 4  # a port per flow
    assert counts.state_grows_with == "flows"
