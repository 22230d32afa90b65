"""D-mod-k: one path per destination, chosen by the destination's index."""

from __future__ import annotations

import numpy as np

from cloudtwin.evaluation.run import route_flows
from cloudtwin.routing import load_strategy
from cloudtwin.scenario import load_scenario
from cloudtwin.topology import build_topology
from cloudtwin.workloads import qp_flows


def routed(fabric: str, src: np.ndarray, dst: np.ndarray):
    scenario = load_scenario(f"fabric: {fabric}\n")
    topology = build_topology(scenario)
    flows = qp_flows(
        topology,
        topology.host_nics[src, 0],
        topology.host_nics[dst, 0],
        np.full(src.size, 1e6),
        1,
        np.random.default_rng(0),
    )
    return topology, route_flows(scenario, topology, flows, load_strategy("dmodk"))


def test_leaf_spine_spine_is_destination_mod_spines() -> None:
    src, dst = np.repeat(np.arange(0, 16), 48), np.tile(np.arange(16, 64), 16)
    topology, paths = routed("{kind: leaf-spine, leaves: 4, spines: 4, hosts_per_leaf: 16}", src, dst)
    spine = topology.node_index[topology.link_dst[paths.link_ids[paths.indptr[:-1] + 1]]]
    np.testing.assert_array_equal(spine, dst % 4)


def test_fat_tree_aggregation_then_core_by_destination_digits() -> None:
    # k=4: 16 hosts, 4 pods of 4; aggregation (d mod 2) then core ((d // 2) mod 2) within
    # the aggregation switch's group: every flow to d takes the same core, from any pod
    src = np.array([s for s in range(16) for d in range(16) if s // 4 != d // 4])
    dst = np.array([d for s in range(16) for d in range(16) if s // 4 != d // 4])
    topology, paths = routed("{kind: fat-tree, k: 4}", src, dst)
    core = topology.link_dst[paths.link_ids[paths.indptr[:-1] + 2]]
    for d in range(16):
        assert np.unique(core[dst == d]).size == 1
    # and the 16 destinations spread evenly over the 4 cores
    per_dest = np.array([core[dst == d][0] for d in range(16)])
    assert sorted(np.bincount(per_dest)[np.bincount(per_dest) > 0]) == [4, 4, 4, 4]


def test_same_input_same_paths() -> None:
    src, dst = np.arange(8), (np.arange(8) + 5) % 16
    _, a = routed("{kind: fat-tree, k: 4}", src, dst)
    _, b = routed("{kind: fat-tree, k: 4}", src, dst)
    assert a.link_ids.tobytes() == b.link_ids.tobytes()
