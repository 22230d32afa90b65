"""WAN faults and gateway repair on the engine: a cut link stalls what crosses it for exactly
its length, a degraded one slows it, a repaired gateway gets its links back, a flapping
gateway costs one failover per flap."""

from __future__ import annotations

import numpy as np
import pytest

from cloudtwin.errors import CloudtwinError
from cloudtwin.intercloud.plan import plan_federation
from cloudtwin.scenario.federation import load_federation
from cloudtwin.twin.federation import simulate_federation

TWO_SITES = """
name: wan
sites:
  - name: east
    fabric: {kind: leaf-spine, leaves: 1, spines: 1, hosts_per_leaf: 2}
    gateway: {capacity: 40Gbps}
    tenants: [{name: red, vni: 11, hosts: "0", address: 10.1.0.10/24}]
  - name: west
    fabric: {kind: leaf-spine, leaves: 1, spines: 1, hosts_per_leaf: 2}
    gateway: {capacity: 40Gbps}
    tenants: [{name: red, vni: 12, hosts: "0", address: 10.2.0.10/24}]
wan: [{between: [east, west], bandwidth: 10Gbps, latency: 5ms}]
networks: [{name: red-net, tenant: red, mode: l3-routed, sites: [east, west]}]
traffic: [{network: red-net, pattern: ring, size: 1GiB}]
"""


def _finish(*overrides: str) -> np.ndarray:
    run = simulate_federation(plan_federation(load_federation(TWO_SITES, overrides=overrides)))
    return run.result.finish_s


def test_a_cut_wan_link_stalls_each_flow_for_exactly_the_cut() -> None:
    base = _finish()
    assert base.size == 2 and base.min() > 0.5  # one flow each way, each alone on its direction
    cut = _finish("wan_faults=[{between: [east, west], at: 0.2s, until: 0.45s}]")
    np.testing.assert_allclose(cut - base, 0.25, rtol=1e-9)


def test_a_degraded_wan_link_slows_each_flow_by_the_rate_it_lost() -> None:
    base = _finish()
    # at 40% for 0.5 s, each flow sends 0.2 s worth of bytes: 0.3 s behind
    slow = _finish("wan_faults=[{between: [west, east], at: 0.1s, until: 0.6s, capacity: 40%}]")
    np.testing.assert_allclose(slow - base, 0.3, rtol=1e-9)


def test_a_flapping_wan_link_stalls_each_flow_for_every_flap() -> None:
    base = _finish()
    flaps = _finish(
        "wan_faults=[{between: [east, west], at: 0.1s, flap: {period: 100ms, count: 3, down: 20ms}}]"
    )
    np.testing.assert_allclose(flaps - base, 0.06, rtol=1e-9)


def test_a_repaired_gateway_gets_its_links_back_and_stays_the_standby() -> None:
    plan = plan_federation(
        load_federation(TWO_SITES, overrides=["gateway_faults=[{site: east, at: 0.1s, until: 0.3s}]"])
    )
    run = simulate_federation(plan)
    down, moved, repaired = run.changes
    assert repaired.time_s == 0.3
    np.testing.assert_array_equal(repaired.link_ids, down.link_ids)
    assert (down.capacity_bps == 0).all()
    np.testing.assert_array_equal(repaired.capacity_bps, run.capacity_bps[down.link_ids])
    assert moved.paths is not None  # the traffic stays on the standby: nothing moves back


#: east's failover: 10 ms detection + 6 ms election + no tunnel set-up (VXLAN) + 4 ms routes.
FAST_FAILOVER = "sites.0.gateway={capacity: 40Gbps, detection: 10ms, election: 6ms, route_propagation: 4ms}"


def test_a_flapping_gateway_stalls_each_flow_for_one_failover_per_flap() -> None:
    base = _finish(FAST_FAILOVER)
    repaired = _finish(FAST_FAILOVER, "gateway_faults=[{site: east, at: 0.1s, until: 0.15s}]")
    np.testing.assert_allclose(repaired - base, 0.02, rtol=1e-9)  # both flows cross east: 20 ms each
    flaps = _finish(FAST_FAILOVER, "gateway_faults=[{site: east, at: 0.1s, flap: {period: 100ms, count: 3}}]")
    np.testing.assert_allclose(flaps - base, 3 * 0.02, rtol=1e-9)


def test_each_flap_fails_the_gateway_active_then_and_repairs_it_as_the_standby() -> None:
    scenario = load_federation(
        TWO_SITES,
        overrides=[
            FAST_FAILOVER,
            "gateway_faults=[{site: east, at: 0.1s, flap: {period: 100ms, count: 3, down: 30ms}}]",
        ],
    )
    run = simulate_federation(plan_federation(scenario))
    assert [(f.site, f.at_s, f.total_s) for f in run.failovers] == [
        ("east", 0.1, pytest.approx(0.02)),
        ("east", 0.2, pytest.approx(0.02)),
        ("east", pytest.approx(0.3), pytest.approx(0.02)),
    ]
    dead = [c for c in run.changes if c.paths is None and not c.capacity_bps.any()]
    back = [c for c in run.changes if c.paths is None and c.capacity_bps.any()]
    assert [c.time_s for c in back] == pytest.approx([0.13, 0.23, 0.33])
    # gw0 fails, then gw1 (which took over), then gw0 again; each is repaired 30 ms later
    gw0, gw1, gw0_again = (set(c.link_ids.tolist()) for c in dead)
    assert gw0 == gw0_again and not gw0 & gw1
    assert [set(c.link_ids.tolist()) for c in back] == [gw0, gw1, gw0]


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("wan_faults=[{between: [east, west], at: 1s}]", "wan_faults.0"),
        ("wan_faults=[{between: [east, mars], at: 1s, until: 2s}]", "wan_faults.0.between.1"),
        ("wan_faults=[{between: [east, east], at: 1s, until: 2s}]", "wan_faults.0.between"),
        ("wan_faults=[{between: [east, west], at: 2s, until: 1s}]", "wan_faults.0.until"),
        (
            "wan_faults=[{between: [east, west], at: 1s, capacity: 40%, flap: {period: 1s, count: 2}}]",
            "wan_faults.0",
        ),
        ("gateway_faults=[{site: east, at: 2s, until: 2s}]", "gateway_faults.0.until"),
        (
            "gateway_faults=[{site: east, at: 1s, until: 2s, flap: {period: 1s, count: 2}}]",
            "gateway_faults.0.flap",
        ),
        ("gateway_faults=[{site: east, flap: {period: 1s, count: 2, down: 1s}}]", "gateway_faults.0.flap"),
    ],
)
def test_bad_wan_and_gateway_faults_name_the_field(override: str, field: str) -> None:
    with pytest.raises(CloudtwinError) as caught:
        plan_federation(load_federation(TWO_SITES, overrides=[override]))
    assert field in str(caught.value) and "\n" not in str(caught.value)


def test_a_cloud_run_cuts_its_wan_link_and_its_traffic_waits() -> None:
    from pathlib import Path

    from cloudtwin.scenario.cloud import load_cloud
    from cloudtwin.twin.cloud import run_cloud

    text = (Path(__file__).resolve().parents[2] / "examples" / "one-cloud.yaml").read_text()
    base = run_cloud(load_cloud(text))
    hit = run_cloud(
        load_cloud(text, overrides=["federation.wan_faults=[{between: [east, west], at: 0.5s, until: 1.5s}]"])
    )
    assert hit.history is not None and hit.traffic is not None and base.traffic is not None
    wan = {hit.joined.wan_links[(0, 1)], hit.joined.wan_links[(1, 0)]}
    cuts = [
        (c.time_s, float(c.capacity_bps.max()))
        for c in hit.history.changes
        if set(c.link_ids.tolist()) == wan
    ]
    assert cuts == [(0.5, 0.0), (1.5, float(hit.capacity_bps[min(wan)]))]
    assert hit.finish_s[hit.traffic.ids].max() > base.finish_s[base.traffic.ids].max()
