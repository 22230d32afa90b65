"""Inter-site flows in the engine: contiguous paths through both gateways and the WAN, the tunnel's
goodput on gateway links, and a gateway failover that stalls exactly its flows for the failover time."""

from __future__ import annotations

import numpy as np
import pytest

from cloudtwin.intercloud.plan import plan_federation
from cloudtwin.scenario.federation import load_federation
from cloudtwin.twin.federation import simulate_federation

TWO_SITES = """
name: two-sites
encapsulation: ipsec-esp
sites:
  - name: east
    fabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2, host_link: 100Gbps, uplink: 100Gbps}
    gateway: {capacity: 10Gbps}
    tenants: [{name: red, vni: 11, hosts: "0-3", address: 10.1.0.10/24}]
  - name: west
    fabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}
    gateway: {capacity: 10Gbps}
    tenants: [{name: red, vni: 12, hosts: "0-3", address: 10.2.0.10/24}]
wan: [{between: [east, west], bandwidth: 10Gbps, latency: 10ms}]
networks: [{name: red-net, tenant: red, mode: l3-routed, sites: [east, west]}]
traffic: [{network: red-net, pattern: all-pairs, size: 1GiB}]
"""
FAULT = ["gateway_faults=[{site: east, at: 2s}]"]
# IPsec ESP (AES-GCM) over a 1500-byte underlay: 57 header bytes; TCP payload per packet
# 1500 - 57 - 52 = 1391 against 1448 without the tunnel.
PAYLOAD_RATIO = 1391 / 1448


def _run(*overrides: str):  # noqa: ANN202
    return simulate_federation(plan_federation(load_federation(TWO_SITES, overrides=list(overrides))))


def test_inter_site_paths_cross_both_gateways_and_the_wan() -> None:
    run = _run()
    joined, paths = run.joined, run.paths
    names = [joined.link_name(k) for k in range(joined.link_count)]
    for f in range(paths.flow_count):
        path = paths.path(f)
        np.testing.assert_array_equal(joined.link_dst[path[:-1]], joined.link_src[path[1:]])
        hops = [names[k] for k in path]
        if run.inter_site[f]:
            a, b = ("east", "west") if hops[0].startswith("east") else ("west", "east")
            assert (
                f"{a}.leaf0->{a}.gw0" in hops
                and f"{a}.wan->{b}.wan" in hops
                and f"{b}.gw0->{b}.leaf0" in hops
            )
        else:
            assert not any(".gw" in h or ".wan" in h for h in hops)
    assert run.inter_site.sum() == 2 * 4 * 4 and (~run.inter_site).sum() == 2 * 4 * 3


def test_gateway_capacity_carries_payload_at_the_tunnel_goodput() -> None:
    run = _run()
    # 16 flows of 1 GiB leave each site through one 10 Gbit/s gateway, at payload rate 10G x 1391/1448.
    expected = 16 * 2**30 * 8 / (10e9 * PAYLOAD_RATIO)
    inter = run.inter_site
    assert run.baseline.finish_s[inter].max() == pytest.approx(
        expected + run.latency_s[inter].max(), rel=1e-9
    )


def test_failover_stalls_the_gateways_flows_for_the_failover_time() -> None:
    run = _run(*FAULT)
    (info,) = run.failovers
    # VRRP detection 3 s + election 0.05 s + IKEv2 two round trips of 20 ms + route propagation 1 s.
    assert info.total_s == pytest.approx(3 + 0.05 + 2 * 0.020 + 1.0)
    stalled = run.stalled[0]
    assert stalled.sum() == 16 + 16  # every flow into or out of east crosses its active gateway
    shift = run.result.finish_s[stalled] - run.baseline.finish_s[stalled]
    np.testing.assert_allclose(shift, info.total_s, rtol=1e-9)
    np.testing.assert_allclose(run.result.finish_s[~stalled], run.baseline.finish_s[~stalled])
    # Both directions stop for the failover time at 10G x payload ratio each.
    assert run.summary()["bytes_delayed"] == pytest.approx(
        2 * info.total_s * 10e9 * PAYLOAD_RATIO / 8, rel=1e-6
    )
    names = [run.joined.link_name(k) for k in run.changes[1].paths.link_ids]
    assert "east.leaf0->east.gw1" in names and "east.leaf0->east.gw0" not in names


def test_wireguard_and_vxlan_set_up_tunnels_in_fewer_round_trips() -> None:
    assert _run(*FAULT, "encapsulation=wireguard").failovers[0].tunnel_setup_s == pytest.approx(0.020)
    assert _run(*FAULT, "encapsulation=vxlan").failovers[0].tunnel_setup_s == 0.0


def test_global_nat_translations_are_counted_per_gateway() -> None:
    run = _run("networks.0.mode=global-nat")
    usage = run.summary()["nat"]
    # 4 senders per site, each with one flow to each of the 4 endpoints of the other site.
    assert usage == {
        "east": {"translations": 16, "refused": 0, "global_addresses": 4},
        "west": {"translations": 16, "refused": 0, "global_addresses": 4},
    }
