"""Built-in strategies: valid paths, ECMP determinism and polarisation, spraying weights."""

from __future__ import annotations

import numpy as np
import pytest

from cloudtwin.evaluation import build_flows, route_flows
from cloudtwin.routing import Strategy, load_strategy, strategy_names
from cloudtwin.topology import NodeKind, build_topology

BUILTIN = ["ecmp", "ecmp-qp", "adaptive", "spray", "pinning"]
SINGLE_PATH = ["ecmp", "ecmp-qp", "adaptive", "pinning"]

FABRICS = {
    "leaf-spine": ["fabric.leaves=4", "fabric.spines=3", "fabric.hosts_per_leaf=3"],
    "leaf-spine-parallel": ["fabric.leaves=3", "fabric.spines=2", "fabric.uplinks_per_spine=2"],
    "fat-tree": ["fabric.kind=fat-tree", "fabric.k=4"],
    "rail-optimized": [
        "fabric.kind=rail-optimized",
        "fabric.leaves=4",
        "hosts.nics=2",
        "fabric.hosts_per_leaf=2",
        "fabric.spines=2",
    ],
}


def routed(make_scenario, strategy: str, *overrides: str):
    scenario = make_scenario(*overrides)
    topology = build_topology(scenario)
    flows = build_flows(scenario, topology)
    return (
        scenario,
        topology,
        flows,
        route_flows(scenario, topology, flows, load_strategy(strategy)),
    )


def test_registry_holds_the_builtins() -> None:
    assert set(BUILTIN) <= set(strategy_names())
    for name in BUILTIN:
        strategy = load_strategy(name)
        assert isinstance(strategy, Strategy)
        assert strategy.name == name


@pytest.mark.parametrize("fabric", FABRICS)
@pytest.mark.parametrize("strategy", SINGLE_PATH)
@pytest.mark.parametrize("pattern", ["permutation", "all-to-all"])
def test_paths_are_contiguous_from_src_to_dst(
    make_scenario, assert_valid_paths, fabric, strategy, pattern
) -> None:
    _, topology, flows, paths = routed(
        make_scenario, strategy, *FABRICS[fabric], f"workload.pattern={pattern}", "workload.qps=2"
    )
    assert paths.weights is None
    assert_valid_paths(topology, paths, flows.src, flows.dst)
    # shortest: the number of links is 2 + 2 * (switch hops up)
    lengths = np.diff(paths.indptr)
    same_edge = topology.edge_of_nic[flows.src] == topology.edge_of_nic[flows.dst]
    assert np.all(lengths[same_edge] == 2)
    assert np.all(lengths[~same_edge] >= 4)


def test_ecmp_is_deterministic_and_depends_on_seed(make_scenario) -> None:
    scenario, topology, flows, first = routed(make_scenario, "ecmp", "fabric.leaves=8")
    again = route_flows(scenario, topology, flows, load_strategy("ecmp"))
    np.testing.assert_array_equal(first.link_ids, again.link_ids)
    reseeded = route_flows(
        scenario.model_copy(update={"seed": 2}), topology, flows, load_strategy("ecmp")
    )
    assert first.link_ids.size == reseeded.link_ids.size
    # 8 spines, ~112 inter-leaf flows: the same choice for all would be a 8^-112 chance
    assert np.count_nonzero(first.link_ids != reseeded.link_ids) > 20


def _tiers(topology, paths, flow: int):
    """(agg index at the edge, core index within the agg's group) for an inter-pod flow."""
    path = paths.path(flow)
    agg = int(topology.link_dst[path[1]])
    core = int(topology.link_dst[path[2]])
    assert topology.node_kind[agg] == NodeKind.AGG and topology.node_kind[core] == NodeKind.CORE
    half = int(np.sqrt(np.count_nonzero(topology.node_kind == NodeKind.CORE)))
    return int(topology.node_index[agg]) % half, int(topology.node_index[core]) % half


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_same_seed_at_every_switch_polarises_fat_tree(make_scenario, seed: int) -> None:
    # With one hash seed everywhere, a flow's hash h picks agg h % (k/2) at the edge and
    # core h % (k/2) at the agg: the same index, so half the cores an agg reaches stay idle.
    common = ["fabric.kind=fat-tree", "fabric.k=8", "workload.pattern=all-to-all", f"seed={seed}"]
    _, topology, flows, paths = routed(
        make_scenario, "ecmp", *common, "routing.per_switch_seed=false"
    )
    pod = topology.node_index[topology.edge_of_nic[flows.src]] // 4
    inter = np.flatnonzero(pod != topology.node_index[topology.edge_of_nic[flows.dst]] // 4)
    pairs = np.array([_tiers(topology, paths, int(f)) for f in inter])
    assert np.all(pairs[:, 0] == pairs[:, 1])
    assert len(set(pairs[:, 0].tolist())) == 4  # all four aggs are used at the edge
    _, topology, flows, paths = routed(
        make_scenario, "ecmp", *common, "routing.per_switch_seed=true"
    )
    pairs = np.array([_tiers(topology, paths, int(f)) for f in inter])
    # independent seeds: agreement about 1/4 of the time (k/2 = 4 choices)
    assert np.mean(pairs[:, 0] == pairs[:, 1]) < 0.4


def test_xor_hash_routes_validly(make_scenario, assert_valid_paths) -> None:
    _, topology, flows, paths = routed(make_scenario, "ecmp", "fabric.leaves=4", "routing.hash=xor")
    assert_valid_paths(topology, paths, flows.src, flows.dst)


def test_ecmp_qp_spreads_qps_that_share_a_udp_port(make_scenario) -> None:
    common = ["fabric.leaves=4", "fabric.spines=8", "workload.qps=8", "hosts.udp_sport=fixed"]
    _, topology, flows, ecmp = routed(make_scenario, "ecmp", *common)
    _, _, _, ecmp_qp = routed(make_scenario, "ecmp-qp", *common)
    inter = topology.edge_of_nic[flows.src] != topology.edge_of_nic[flows.dst]

    def spines_per_connection(paths) -> list[int]:
        uplink = paths.link_ids[paths.indptr[:-1] + 1]
        return [
            len(set(uplink[(flows.connection == c) & inter].tolist()))
            for c in np.unique(flows.connection[inter])
        ]

    # one 5-tuple per connection: plain ECMP keeps all 8 QPs on one spine
    assert set(spines_per_connection(ecmp)) == {1}
    # with the QP number hashed, 8 QPs over 8 spines land on ~5 distinct spines on average
    assert np.mean(spines_per_connection(ecmp_qp)) > 3


def test_adaptive_balances_leaf_uplinks(make_scenario) -> None:
    # 8 hosts per leaf, 8 spines, all flows start together: each leaf sends its 8 (or fewer)
    # inter-leaf flows to 8 distinct spines (least-loaded uplink first)
    _, topology, flows, paths = routed(make_scenario, "adaptive", "fabric.leaves=16")
    kind = topology.node_kind
    up = (kind[topology.link_src] == NodeKind.LEAF) & (kind[topology.link_dst] == NodeKind.SPINE)
    per_link = np.bincount(paths.link_ids, minlength=topology.link_count)
    assert per_link[up].max() == 1
    assert per_link[up].sum() == np.count_nonzero(
        topology.edge_of_nic[flows.src] != topology.edge_of_nic[flows.dst]
    )


def _weight_by_tier(topology, paths, flow: int) -> dict[tuple[int, int], float]:
    start, end = paths.indptr[flow], paths.indptr[flow + 1]
    links, weights = paths.link_ids[start:end], paths.entry_weights[start:end]
    tiers: dict[tuple[int, int], float] = {}
    for link, weight in zip(links, weights, strict=True):
        key = (
            int(topology.node_kind[topology.link_src[link]]),
            int(topology.node_kind[topology.link_dst[link]]),
        )
        tiers[key] = tiers.get(key, 0.0) + float(weight)
    return tiers


def test_spray_weights_leaf_spine(make_scenario) -> None:
    _, topology, flows, paths = routed(
        make_scenario, "spray", "fabric.leaves=4", "fabric.spines=4", "fabric.hosts_per_leaf=4"
    )
    L, S, N = NodeKind.LEAF, NodeKind.SPINE, NodeKind.NIC
    for flow in range(len(flows)):
        start, end = paths.indptr[flow], paths.indptr[flow + 1]
        links, weights = paths.link_ids[start:end], paths.entry_weights[start:end]
        assert topology.link_src[links[0]] == flows.src[flow] and weights[0] == 1
        assert topology.link_dst[links[-1]] == flows.dst[flow] and weights[-1] == 1
        if topology.edge_of_nic[flows.src[flow]] == topology.edge_of_nic[flows.dst[flow]]:
            assert links.size == 2
            continue
        # 4 uplinks and 4 downlinks at 1/4 each (1/spines per uplink)
        assert links.size == 2 + 4 + 4
        np.testing.assert_allclose(weights[1:-1], 0.25)
        tiers = _weight_by_tier(topology, paths, flow)
        assert tiers == pytest.approx({(N, L): 1.0, (L, S): 1.0, (S, L): 1.0, (L, N): 1.0})
        up = links[(topology.node_kind[topology.link_dst[links]] == S)]
        assert sorted(topology.node_index[topology.link_dst[up]].tolist()) == [0, 1, 2, 3]


def test_spray_weights_fat_tree(make_scenario) -> None:
    _, topology, flows, paths = routed(make_scenario, "spray", "fabric.kind=fat-tree", "fabric.k=4")
    E, A, C, N = NodeKind.LEAF, NodeKind.AGG, NodeKind.CORE, NodeKind.NIC
    pod = topology.node_index[topology.edge_of_nic[flows.src]] // 2
    dst_pod = topology.node_index[topology.edge_of_nic[flows.dst]] // 2
    checked = 0
    for flow in np.flatnonzero(pod != dst_pod):
        tiers = _weight_by_tier(topology, paths, int(flow))
        want = {(N, E): 1, (E, A): 1, (A, C): 1, (C, A): 1, (A, E): 1, (E, N): 1}
        assert tiers == pytest.approx(want)
        checked += 1
    assert checked > 0
