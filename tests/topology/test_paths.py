"""Equal-cost paths and hop-by-hop routing: counts, contiguity, endpoints."""

from __future__ import annotations

import numpy as np
import pytest

from cloudtwin.errors import TopologyError
from cloudtwin.scenario import FatTreeFabric, Hosts
from cloudtwin.topology import (
    NodeKind,
    Paths,
    build_topology,
    equal_cost_paths,
    fat_tree,
    pick_nth,
    route_hop_by_hop,
    spread_fractions,
)


def check_path(topology, path, src: int, dst: int) -> None:
    path = np.asarray(path)
    assert topology.link_src[path[0]] == src
    assert topology.link_dst[path[-1]] == dst
    np.testing.assert_array_equal(topology.link_dst[path[:-1]], topology.link_src[path[1:]])


@pytest.mark.parametrize(("spines", "parallel"), [(8, 1), (4, 2), (1, 3)])
def test_leaf_spine_path_counts(make_scenario, spines: int, parallel: int) -> None:
    topology = build_topology(
        make_scenario(
            "fabric.leaves=3",
            f"fabric.spines={spines}",
            "fabric.hosts_per_leaf=2",
            f"fabric.uplinks_per_spine={parallel}",
        )
    )
    a, b, c = (int(topology.nic(h)) for h in (0, 1, 2))  # hosts 0,1 on leaf0; 2 on leaf1
    between = equal_cost_paths(topology, a, c)
    # one of `parallel` cables up to each spine, and one of `parallel` cables down from it:
    # spines * parallel^2 distinct link paths (8, 16, 9); spines * parallel distinct uplinks.
    assert len(between) == spines * parallel**2
    assert len({path[1] for path in between}) == spines * parallel
    assert len(set(between)) == len(between)  # all distinct (parallel links count apart)
    for path in between:
        assert len(path) == 4  # nic->leaf->spine->leaf->nic
        check_path(topology, path, a, c)
    within = equal_cost_paths(topology, a, b)
    assert len(within) == 1 and len(within[0]) == 2  # nic->leaf->nic
    check_path(topology, within[0], a, b)


@pytest.mark.parametrize("k", [4, 8])
def test_fat_tree_path_counts(k: int) -> None:
    topology = fat_tree(FatTreeFabric(k=k), Hosts())
    half = k // 2
    per_pod = half * half  # hosts per pod
    same_edge = (0, 1)
    same_pod = (0, half)  # host `half` is on the pod's second edge switch
    other_pod = (0, per_pod)
    expect = {same_edge: (1, 2), same_pod: (half, 4), other_pod: (half * half, 6)}
    for (h1, h2), (count, length) in expect.items():
        src, dst = int(topology.nic(h1)), int(topology.nic(h2))
        paths = equal_cost_paths(topology, src, dst)
        assert len(paths) == count
        assert len(set(paths)) == count
        for path in paths:
            assert len(path) == length
            check_path(topology, path, src, dst)


def test_route_hop_by_hop_follows_chooser(make_scenario) -> None:
    topology = build_topology(
        make_scenario("fabric.leaves=2", "fabric.spines=4", "fabric.hosts_per_leaf=4")
    )
    src = topology.nic(np.arange(4))
    dst = topology.nic(np.arange(4, 8))

    def choose(hop, flows, nodes, cand, ok):
        return pick_nth(ok, flows % ok.sum(axis=1))  # flow i takes spine i

    paths = route_hop_by_hop(topology, src, dst, choose)
    for flow in range(4):
        path = paths.path(flow)
        check_path(topology, path, int(src[flow]), int(dst[flow]))
        spine = topology.link_dst[path[1]]
        assert topology.node_kind[spine] == NodeKind.SPINE
        assert topology.node_index[spine] == flow


def test_route_hop_by_hop_rejects_self_flow(make_scenario) -> None:
    topology = build_topology(make_scenario("fabric.leaves=2"))
    with pytest.raises(TopologyError, match="to itself"):
        route_hop_by_hop(
            topology, np.array([3]), np.array([3]), lambda *a: np.zeros(1, dtype=np.int64)
        )


def test_spread_fractions_leaf_spine(make_scenario) -> None:
    topology = build_topology(
        make_scenario("fabric.leaves=2", "fabric.spines=4", "fabric.uplinks_per_spine=2")
    )
    leaves = np.flatnonzero(topology.node_kind == NodeKind.LEAF)
    fractions = spread_fractions(topology, int(leaves[0]), int(leaves[1]))
    assert len(fractions) == 16  # 8 up (4 spines x 2 cables), 8 down
    assert all(f == pytest.approx(1 / 8) for f in fractions.values())


def test_paths_helpers() -> None:
    paths = Paths.from_rows(np.array([[0, 1, -1], [2, -1, -1], [3, 4, 5]]))
    np.testing.assert_array_equal(paths.indptr, [0, 2, 3, 6])
    np.testing.assert_array_equal(paths.path(2), [3, 4, 5])
    np.testing.assert_array_equal(paths.flow_of_entry, [0, 0, 1, 2, 2, 2])
    joined = Paths.concat([paths, Paths(np.array([0, 2]), np.array([7, 8]), np.array([0.5, 0.5]))])
    assert joined.flow_count == 4
    np.testing.assert_array_equal(joined.path(3), [7, 8])
    np.testing.assert_array_equal(joined.entry_weights, [1, 1, 1, 1, 1, 1, 0.5, 0.5])
