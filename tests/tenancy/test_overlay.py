"""VXLAN overlays: outer headers carry the inner entropy in the UDP source port only."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from cloudtwin.evaluation import build_flows
from cloudtwin.flows import ROCE_UDP_PORT
from cloudtwin.tenancy import VXLAN_UDP_PORT, outer_headers, underlay_ip
from cloudtwin.topology import build_topology

TWO_TENANTS = [
    'tenants=[{name: a, vni: 1001, hosts: "0-15"}, {name: b, vni: 2002, hosts: "16-31"}]',
    "fabric.leaves=4",
]


def headers_for(make_scenario, *overrides):
    scenario = make_scenario(*overrides)
    topology = build_topology(scenario)
    flows = build_flows(scenario, topology)
    vnis = np.array([t.vni for t in scenario.tenants] or [0])
    return topology, flows, vnis, outer_headers(topology, flows, vnis)


def test_tenant_flows_are_vxlan(make_scenario) -> None:
    _, flows, _, headers = headers_for(make_scenario, *TWO_TENANTS, "workload.qps=4")
    assert np.all(flows.tenant >= 0)
    assert np.all(headers.dport == VXLAN_UDP_PORT)  # 4789
    assert np.all((headers.sport >= 49152) & (headers.sport <= 65535))
    assert np.all(headers.proto == 17)
    np.testing.assert_array_equal(headers.src_ip, underlay_ip(flows.src))
    np.testing.assert_array_equal(headers.dst_ip, underlay_ip(flows.dst))
    # QPs differ in their inner sport, so the outer sport differs too (with 14 bits of hash,
    # collisions among 4 QPs of a connection are rare: ask for most connections to see 4)
    distinct = [
        len(set(headers.sport[flows.connection == c].tolist())) for c in np.unique(flows.connection)
    ]
    assert np.mean(np.array(distinct) == 4) > 0.9


def test_outer_sport_depends_on_inner_headers(make_scenario) -> None:
    topology, flows, vnis, headers = headers_for(make_scenario, *TWO_TENANTS)
    changed = replace(flows, sport=flows.sport ^ 1)  # only the inner UDP source port changes
    again = outer_headers(topology, changed, vnis)
    assert np.mean(again.sport != headers.sport) > 0.9
    np.testing.assert_array_equal(again.dport, headers.dport)
    np.testing.assert_array_equal(again.src_ip, headers.src_ip)
    # and the same inner headers give the same outer port (a hash, not a random draw)
    np.testing.assert_array_equal(outer_headers(topology, flows, vnis).sport, headers.sport)


def test_flows_without_tenant_keep_roce_port(make_scenario) -> None:
    _, flows, _, headers = headers_for(make_scenario, "fabric.leaves=4")
    assert np.all(flows.tenant == -1)
    assert np.all(headers.dport == ROCE_UDP_PORT)  # 4791
    np.testing.assert_array_equal(headers.sport, flows.sport)
    assert np.all((headers.sport >= 0xC000) & (headers.sport <= 0xFFFF))  # RoCE sports


def test_tenants_with_same_inner_headers_on_different_hosts_differ_outside(make_scenario) -> None:
    # Two tenants each run a flow with identical inner fields (same QP numbers and inner
    # sport); their VMs sit on different hosts, so the outer headers must differ.
    topology, flows, vnis, _ = headers_for(make_scenario, *TWO_TENANTS)
    pick = np.array([0, int(np.flatnonzero(flows.tenant == 1)[0])])
    twins = replace(
        flows,
        **{
            name: getattr(flows, name)[pick]
            for name in ("src", "dst", "size_bytes", "start_s", "tenant", "job", "connection")
        },
        src_qp=np.array([0x111, 0x111]),
        dst_qp=np.array([0x222, 0x222]),
        sport=np.array([50000, 50000]),
    )
    assert twins.tenant.tolist() == [0, 1]
    headers = outer_headers(topology, twins, vnis)
    first = tuple(int(f[0]) for f in headers.fields())
    second = tuple(int(f[1]) for f in headers.fields())
    assert first != second
    assert headers.src_ip[0] != headers.src_ip[1]
    assert np.all(headers.dport == VXLAN_UDP_PORT)


def test_mixed_tenant_and_plain_flows(make_scenario) -> None:
    topology, flows, vnis, _ = headers_for(make_scenario, *TWO_TENANTS)
    mixed = replace(flows, tenant=np.where(np.arange(len(flows)) % 2 == 0, flows.tenant, -1))
    headers = outer_headers(topology, mixed, vnis)
    plain = mixed.tenant < 0
    assert np.all(headers.dport[plain] == ROCE_UDP_PORT)
    np.testing.assert_array_equal(headers.sport[plain], mixed.sport[plain])
    assert np.all(headers.dport[~plain] == VXLAN_UDP_PORT)
