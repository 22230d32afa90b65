"""perftest traffic: patterns inside each tenant, QPs, QP numbers and UDP source ports."""

from __future__ import annotations

import numpy as np
import pytest

from cloudtwin.errors import WorkloadError
from cloudtwin.evaluation import build_flows
from cloudtwin.topology import build_topology
from cloudtwin.workloads import host_pairs

TENANTS = 'tenants=[{name: a, vni: 1, hosts: "0-9"}, {name: b, vni: 2, hosts: "10-20,25"}]'


def flows_of(make_scenario, *overrides):
    scenario = make_scenario(*overrides)
    topology = build_topology(scenario)
    return scenario, topology, build_flows(scenario, topology)


def host_of(topology, nic: np.ndarray) -> np.ndarray:
    return nic // topology.nics_per_host


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_permutation_is_a_derangement_within_each_tenant(make_scenario, seed: int) -> None:
    scenario, topology, flows = flows_of(make_scenario, "fabric.leaves=4", TENANTS, f"seed={seed}")
    src, dst = host_of(topology, flows.src), host_of(topology, flows.dst)
    assert np.all(src != dst)
    for index, tenant in enumerate(scenario.tenants):
        mine = flows.tenant == index
        assert sorted(src[mine].tolist()) == sorted(tenant.hosts)
        assert sorted(dst[mine].tolist()) == sorted(tenant.hosts)  # a permutation
        assert set(dst[mine].tolist()) <= set(tenant.hosts)  # no cross-tenant flow
    assert len(flows) == 10 + 12


def test_permutation_changes_with_seed(make_scenario) -> None:
    _, _, a = flows_of(make_scenario, "fabric.leaves=4", "seed=1")
    _, _, b = flows_of(make_scenario, "fabric.leaves=4", "seed=1")
    _, _, c = flows_of(make_scenario, "fabric.leaves=4", "seed=2")
    np.testing.assert_array_equal(a.dst, b.dst)
    np.testing.assert_array_equal(a.src_qp, b.src_qp)
    np.testing.assert_array_equal(a.sport, b.sport)
    assert np.any(a.dst != c.dst)


def test_shift_default_leaves_the_leaf(make_scenario) -> None:
    _, topology, flows = flows_of(
        make_scenario, "fabric.leaves=4", "fabric.hosts_per_leaf=4", "workload.pattern=shift"
    )
    src, dst = host_of(topology, flows.src), host_of(topology, flows.dst)
    np.testing.assert_array_equal(dst, (src + 4) % 16)  # default shift: hosts per leaf
    assert np.all(topology.edge_of_nic[flows.src] != topology.edge_of_nic[flows.dst])


def test_shift_explicit(make_scenario) -> None:
    _, topology, flows = flows_of(
        make_scenario,
        "fabric.leaves=2",
        "fabric.hosts_per_leaf=4",
        "workload.pattern=shift",
        "workload.shift=3",
    )
    np.testing.assert_array_equal(host_of(topology, flows.dst), (np.arange(8) + 3) % 8)


def test_incast(make_scenario) -> None:
    _, topology, flows = flows_of(make_scenario, "fabric.leaves=2", "workload.pattern=incast")
    assert len(flows) == 15  # 16 hosts: all others write to host 0
    assert np.all(host_of(topology, flows.dst) == 0)
    assert sorted(host_of(topology, flows.src).tolist()) == list(range(1, 16))
    _, topology, flows = flows_of(
        make_scenario, "fabric.leaves=2", "workload.pattern=incast", "workload.incast_senders=3"
    )
    assert host_of(topology, flows.src).tolist() == [1, 2, 3]


def test_all_to_all_counts(make_scenario) -> None:
    scenario, topology, flows = flows_of(
        make_scenario, "fabric.leaves=4", TENANTS, "workload.pattern=all-to-all"
    )
    # tenant a: 10 hosts -> 90 flows; tenant b: 12 hosts -> 132
    assert len(flows) == 10 * 9 + 12 * 11
    pairs = set(
        zip(
            host_of(topology, flows.src).tolist(),
            host_of(topology, flows.dst).tolist(),
            strict=True,
        )
    )
    assert len(pairs) == len(flows)
    hosts_b = set(scenario.tenants[1].hosts)
    for s, d in pairs:
        assert (s in hosts_b) == (d in hosts_b)


def test_pairs(make_scenario) -> None:
    _, topology, flows = flows_of(
        make_scenario, "fabric.leaves=2", "fabric.hosts_per_leaf=7", "workload.pattern=pairs"
    )
    src, dst = host_of(topology, flows.src), host_of(topology, flows.dst)
    assert len(flows) == 7  # 14 hosts -> 7 pairs
    assert len(set(src.tolist()) | set(dst.tolist())) == 14  # every host in exactly one pair


def test_pairs_odd_leaves_one_out() -> None:
    src, dst = host_pairs("pairs", np.arange(5), np.random.default_rng(0), 1, None)
    assert src.size == dst.size == 2
    assert len(set(src.tolist()) | set(dst.tolist())) == 4


def test_qps_split_bytes(make_scenario) -> None:
    _, _, flows = flows_of(make_scenario, "fabric.leaves=2", "workload.qps=4", "workload.size=1GiB")
    assert len(flows) == 16 * 4
    np.testing.assert_allclose(flows.size_bytes, 2**28)  # 1 GiB / 4
    per_connection = np.bincount(flows.connection, flows.size_bytes)
    np.testing.assert_allclose(per_connection, 2**30)
    assert np.all(np.bincount(flows.connection) == 4)


def test_qp_numbers_distinct_per_nic(make_scenario) -> None:
    _, _, flows = flows_of(
        make_scenario, "fabric.leaves=2", "workload.pattern=all-to-all", "workload.qps=3"
    )
    for nic in np.unique(np.concatenate((flows.src, flows.dst))):
        local = np.concatenate((flows.src_qp[flows.src == nic], flows.dst_qp[flows.dst == nic]))
        assert np.unique(local).size == local.size
    assert np.all((flows.src_qp > 0) & (flows.src_qp < 1 << 24))
    assert np.all((flows.dst_qp > 0) & (flows.dst_qp < 1 << 24))


def test_udp_sport_fixed_is_one_port_per_connection(make_scenario) -> None:
    _, _, flows = flows_of(
        make_scenario, "fabric.leaves=2", "workload.qps=8", "hosts.udp_sport=fixed"
    )
    for c in np.unique(flows.connection):
        assert np.unique(flows.sport[flows.connection == c]).size == 1
    _, _, flows = flows_of(make_scenario, "fabric.leaves=2", "workload.qps=8")
    distinct = [
        np.unique(flows.sport[flows.connection == c]).size for c in np.unique(flows.connection)
    ]
    assert np.mean(distinct) > 7  # per-QP ports: 8 QPs, 14-bit hash, rare collisions


def test_multi_nic_connections_are_rail_aligned(make_scenario) -> None:
    _, topology, flows = flows_of(
        make_scenario,
        "fabric.kind=rail-optimized",
        "fabric.leaves=8",
        "hosts.nics=4",
        "fabric.hosts_per_leaf=2",
        "workload.qps=2",
    )
    # 2 groups x 2 hosts = 4 hosts, permutation: 4 host pairs x 4 rails = 16 connections x 2 QPs
    assert len(flows) == 32
    assert np.unique(flows.connection).size == 16
    rail_src = flows.src % topology.nics_per_host
    rail_dst = flows.dst % topology.nics_per_host
    np.testing.assert_array_equal(rail_src, rail_dst)
    np.testing.assert_array_equal(
        topology.host_nics[host_of(topology, flows.src), rail_src], flows.src
    )
    # each host pair uses all 4 rails
    pairs = {
        (int(s), int(d))
        for s, d in zip(host_of(topology, flows.src), host_of(topology, flows.dst), strict=True)
    }
    for s, d in pairs:
        mine = (host_of(topology, flows.src) == s) & (host_of(topology, flows.dst) == d)
        assert sorted(set(rail_src[mine].tolist())) == [0, 1, 2, 3]


def test_start_time_is_applied(make_scenario) -> None:
    _, _, flows = flows_of(make_scenario, "fabric.leaves=2", "workload.start=5ms")
    np.testing.assert_allclose(flows.start_s, 5e-3)


@pytest.mark.parametrize(
    ("pattern", "hosts", "shift", "senders", "message"),
    [
        ("permutation", [3], 1, None, "needs at least 2 hosts"),
        ("shift", [0, 1, 2], 3, None, "maps every one of 3 hosts onto itself"),
        ("incast", [0, 1, 2], 1, 3, "more than the 2 other hosts"),
        ("ring", [0, 1], 1, None, "unknown pattern 'ring'"),
    ],
)
def test_bad_patterns(pattern, hosts, shift, senders, message) -> None:
    with pytest.raises(WorkloadError, match=message):
        host_pairs(pattern, np.array(hosts), np.random.default_rng(0), shift, senders)


def test_single_host_tenant_is_rejected(make_scenario) -> None:
    scenario = make_scenario("fabric.leaves=2", 'tenants=[{name: a, vni: 1, hosts: "4"}]')
    with pytest.raises(WorkloadError, match="workload.pattern"):
        build_flows(scenario, build_topology(scenario))
