"""Clos builders: node and link counts, attachment of NICs, oversubscription."""

from __future__ import annotations

import numpy as np
import pytest

from cloudtwin.errors import TopologyError
from cloudtwin.scenario import FatTreeFabric, Hosts, RailOptimizedFabric
from cloudtwin.topology import NodeKind, build_topology, fat_tree, rail_optimized


def kinds(topology) -> dict[NodeKind, int]:
    return {kind: int(np.count_nonzero(topology.node_kind == kind)) for kind in NodeKind}


def test_leaf_spine_16x8x8_counts(make_scenario) -> None:
    topology = build_topology(
        make_scenario("fabric.leaves=16", "fabric.spines=8", "fabric.hosts_per_leaf=8")
    )
    # 16*8 = 128 NICs, 16 leaves, 8 spines.
    assert kinds(topology) == {
        NodeKind.NIC: 128,
        NodeKind.LEAF: 16,
        NodeKind.SPINE: 8,
        NodeKind.AGG: 0,
        NodeKind.CORE: 0,
    }
    assert topology.host_count == 128 and topology.switch_count == 24 and topology.node_count == 152
    # cables: 128 host cables + 16*8 leaf-spine cables = 256; two directed links each.
    assert topology.link_count == 512
    assert topology.describe()["links"] == 256
    # every leaf has 8 NIC ports + 8 uplinks; every spine 16 downlinks (out-degree).
    degree = np.bincount(topology.link_src, minlength=topology.node_count)
    assert np.all(degree[:128] == 1)
    assert np.all(degree[128:144] == 16)
    assert np.all(degree[144:] == 16)
    # each directed link has its reverse
    forward = set(zip(topology.link_src.tolist(), topology.link_dst.tolist(), strict=True))
    assert all((b, a) in forward for a, b in forward)
    assert np.all(topology.capacity_bps == 100e9)
    assert np.all(topology.latency_s == pytest.approx(1e-6))


def test_leaf_spine_host_attachment(make_scenario) -> None:
    topology = build_topology(
        make_scenario("fabric.leaves=4", "fabric.spines=2", "fabric.hosts_per_leaf=3")
    )
    for host in range(12):
        nic = int(topology.nic(host))
        edge = int(topology.edge_of_nic[nic])
        assert topology.node_kind[edge] == NodeKind.LEAF
        assert topology.node_index[edge] == host // 3  # hosts 0-2 on leaf0, 3-5 on leaf1...
        assert topology.link_src[topology.down_link[nic]] == edge


def test_leaf_spine_parallel_uplinks_and_nics(make_scenario) -> None:
    topology = build_topology(
        make_scenario(
            "fabric.leaves=4",
            "fabric.spines=2",
            "fabric.hosts_per_leaf=2",
            "fabric.uplinks_per_spine=3",
            "hosts.nics=2",
        )
    )
    # NICs: 4*2*2 = 16; cables: 16 host + 4*2*3 = 24 uplinks -> 40 cables, 80 links.
    assert kinds(topology)[NodeKind.NIC] == 16
    assert topology.host_count == 8 and topology.nics_per_host == 2
    assert topology.link_count == 80
    leaf = int(np.flatnonzero(topology.node_kind == NodeKind.LEAF)[0])
    spine = int(np.flatnonzero(topology.node_kind == NodeKind.SPINE)[0])
    assert np.count_nonzero((topology.link_src == leaf) & (topology.link_dst == spine)) == 3
    # both NICs of a host on the host's leaf
    edges = topology.edge_of_nic[topology.host_nics]
    assert np.all(edges[:, 0] == edges[:, 1])


@pytest.mark.parametrize(
    ("overrides", "ratio"),
    [
        (["fabric.hosts_per_leaf=8", "fabric.spines=4"], 2.0),  # 8*100G down / 4*100G up
        (["fabric.hosts_per_leaf=8", "fabric.spines=4", "fabric.uplink=200G"], 1.0),
        (["fabric.hosts_per_leaf=8", "fabric.spines=8"], 1.0),
        (
            ["fabric.hosts_per_leaf=6", "fabric.spines=2", "fabric.uplinks_per_spine=2"],
            1.5,
        ),  # 600/400
        (["fabric.hosts_per_leaf=4", "fabric.spines=4", "fabric.host_link=400G"], 4.0),
        (
            ["fabric.hosts_per_leaf=4", "fabric.spines=4", "hosts.nic_rate=25G"],
            0.25,
        ),  # NIC caps 100G port
    ],
)
def test_oversubscription(make_scenario, overrides: list[str], ratio: float) -> None:
    topology = build_topology(make_scenario("fabric.leaves=4", *overrides))
    assert topology.oversubscription == pytest.approx(ratio)


def test_nic_rate_caps_host_link(make_scenario) -> None:
    topology = build_topology(make_scenario("fabric.leaves=2", "hosts.nic_rate=25G"))
    assert topology.nic_rate_bps == 25e9
    nic_links = topology.node_kind[topology.link_src] == NodeKind.NIC
    assert np.all(topology.capacity_bps[nic_links] == 25e9)


@pytest.mark.parametrize("k", [4, 8])
def test_fat_tree_counts(k: int) -> None:
    topology = fat_tree(FatTreeFabric(k=k), Hosts())
    half = k // 2
    counts = kinds(topology)
    assert counts[NodeKind.NIC] == k**3 // 4  # k=4: 16, k=8: 128
    assert counts[NodeKind.LEAF] == counts[NodeKind.AGG] == k * half
    assert counts[NodeKind.CORE] == half**2
    assert topology.switch_count == 5 * k**2 // 4  # k=4: 20, k=8: 80
    # cables: k^3/4 host + k*(k/2)^2 edge-agg + k*(k/2)^2 agg-core = 3k^3/4 (48 for k=4)
    assert topology.link_count == 2 * 3 * k**3 // 4
    degree = np.bincount(topology.link_src, minlength=topology.node_count)
    switch = topology.node_kind != NodeKind.NIC
    assert np.all(degree[switch] == k)  # every switch has k ports
    core = np.flatnonzero(topology.node_kind == NodeKind.CORE)
    # every core reaches one agg in every pod
    for c in core:
        aggs = topology.link_dst[topology.link_src == c]
        assert sorted((topology.node_index[aggs] // half).tolist()) == list(range(k))


def test_fat_tree_nics_must_divide_edge_ports() -> None:
    with pytest.raises(TopologyError, match="hosts.nics"):
        fat_tree(FatTreeFabric(k=4), Hosts(nics=3))


def test_rail_optimized_nic_r_of_host_h_on_leaf_group_times_nics_plus_r() -> None:
    fabric = RailOptimizedFabric(leaves=8, spines=4, hosts_per_leaf=4)
    topology = rail_optimized(fabric, Hosts(nics=4))
    # 8 leaves / 4 NICs = 2 groups of 4 hosts = 8 hosts, 32 NICs
    assert topology.host_count == 8 and topology.nics_per_host == 4
    assert kinds(topology)[NodeKind.NIC] == 32
    # cables: 32 host + 8*4 uplinks = 64 -> 128 links
    assert topology.link_count == 128
    for host in range(8):
        for rail in range(4):
            leaf = topology.edge_of_nic[topology.nic(host, rail)]
            assert topology.node_index[leaf] == (host // 4) * 4 + rail
    # each leaf holds exactly hosts_per_leaf NICs, all of one rail
    assert np.all(
        np.bincount(topology.node_index[topology.edge_of_nic[topology.host_nics]].ravel()) == 4
    )
    assert topology.oversubscription == pytest.approx(1.0)  # 4*100G down, 4*100G up


def test_rail_optimized_rejects_leaves_not_multiple_of_nics() -> None:
    with pytest.raises(TopologyError, match="fabric.leaves"):
        rail_optimized(RailOptimizedFabric(leaves=6), Hosts(nics=4))


def test_node_and_link_names(make_scenario) -> None:
    topology = build_topology(
        make_scenario(
            "fabric.leaves=2", "fabric.spines=2", "fabric.hosts_per_leaf=2", "hosts.nics=2"
        )
    )
    assert topology.node_name(int(topology.nic(1, 1))) == "host1/nic1"
    leaf = int(topology.edge_of_nic[topology.nic(3, 0)])
    assert topology.node_name(leaf) == "leaf1"
    spine = int(np.flatnonzero(topology.node_kind == NodeKind.SPINE)[1])
    assert topology.link_name(topology.find_link(leaf, spine)) == "leaf1->spine1"
    with pytest.raises(TopologyError, match="no link from leaf1 to host0/nic0"):
        topology.find_link(leaf, int(topology.nic(0, 0)))
