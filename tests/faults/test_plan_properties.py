"""Properties of repair plans on random fabrics and random faults (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import check_paths, scenario_from

from cloudtwin.engine import simulate
from cloudtwin.evaluation import build_flows, route_flows
from cloudtwin.faults import expand_faults, plan_repairs
from cloudtwin.routing import load_strategy, reaction_of
from cloudtwin.scenario.faults import Fault, Reaction
from cloudtwin.topology import build_topology

STRATEGIES = ["ecmp", "ecmp-qp", "adaptive", "spray", "pinning"]


@st.composite
def cases(draw: st.DrawFn):
    fat_tree = draw(st.booleans())
    leaves = draw(st.integers(2, 4))
    spines = draw(st.integers(2, 4))
    hosts = draw(st.integers(1, 3))
    if fat_tree:
        fabric = ("fabric.kind=fat-tree", "fabric.k=4")
        switches = [f"core{i}" for i in range(4)] + [f"agg{i}" for i in range(8)]
        cables = [f"leaf{e}-agg{a}" for e in range(8) for a in range(8) if e // 2 == a // 2]
        host_count = 16
    else:
        fabric = (f"fabric.leaves={leaves}", f"fabric.spines={spines}", f"fabric.hosts_per_leaf={hosts}")
        switches = [f"spine{i}" for i in range(spines)]
        cables = [f"leaf{i}-spine{j}" for i in range(leaves) for j in range(spines)]
        host_count = leaves * hosts
    strategy = draw(st.sampled_from(STRATEGIES))
    faults = []
    for _ in range(draw(st.integers(1, 5))):
        at = draw(st.integers(0, 40))
        until = f"{at + draw(st.integers(1, 400))}ms"
        kind = draw(st.sampled_from(["link", "switch", "nic", "flap", "random"]))
        if kind == "link":
            faults.append(Fault(kind="link", target=draw(st.sampled_from(cables)), at=f"{at}ms", until=until))
        elif kind == "switch":
            faults.append(
                Fault(kind="switch", target=draw(st.sampled_from(switches)), at=f"{at}ms", until=until)
            )
        elif kind == "nic":
            host = draw(st.integers(0, host_count - 1))
            faults.append(Fault(kind="nic", target=f"host{host}", at=f"{at}ms", until=until))
        elif kind == "flap":
            flap = {"period": f"{draw(st.integers(2, 60))}ms", "count": draw(st.integers(1, 4))}
            faults.append(Fault(kind="link", target=draw(st.sampled_from(cables)), at=f"{at}ms", flap=flap))
        else:
            faults.append(Fault(kind="random", count=draw(st.integers(1, 3)), at=f"{at}ms", until=until))
    seed = draw(st.integers(0, 50))
    return fabric, strategy, faults, seed


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_repairs_are_valid_paths_and_every_flow_finishes(case) -> None:
    fabric, name, faults, seed = case
    scenario = scenario_from(*fabric, "workload.size=64MiB", f"seed={seed}")
    topology = build_topology(scenario)
    flows = build_flows(scenario, topology)
    strategy = load_strategy(name)
    paths = route_flows(scenario, topology, flows, strategy)

    def route(view, index):
        return route_flows(scenario, view, flows.take(index), strategy)

    states = expand_faults(faults, topology, seed)
    plan = plan_repairs(topology, flows, paths, route, reaction_of(strategy), Reaction(), states)
    current = paths
    capacity = topology.capacity_bps.astype(float)
    for change in sorted(plan.changes, key=lambda c: c.time_s):
        if change.paths is None:
            capacity = capacity.copy()
            capacity[change.link_ids] = change.capacity_bps
            continue
        moved = change.flows
        if change.paths.weights is None:  # a sprayed flow is a weighted set of links, not a path
            check_paths(topology, change.paths, flows.src[moved], flows.dst[moved])
        current = current.replace(moved, change.paths)
    # every fault ends: afterwards each flow is back on its original path
    np.testing.assert_array_equal(current.link_ids, paths.link_ids)
    np.testing.assert_array_equal(capacity, topology.capacity_bps)
    result = simulate(
        paths,
        topology.capacity_bps,
        flows.size_bytes,
        flows.start_s,
        np.full(len(flows), topology.nic_rate_bps),
        changes=plan.changes,
    )
    assert np.all(np.isfinite(result.finish_s))
    assert plan.stalled.shape == (plan.segment_s.size, len(flows))
