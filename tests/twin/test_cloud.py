# ruff: noqa: E501  (scenario text)
"""One cloud on one run (twin/cloud.py): site jobs, federated traffic and migrations between
sites, through the NICs, with gateway failover; the scenario's checks name the field."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudtwin.errors import ScenarioError
from cloudtwin.mobility.plan import memory_of
from cloudtwin.mobility.precopy import plan_migration
from cloudtwin.scenario.cloud import load_cloud
from cloudtwin.twin.cloud import run_cloud

TWO_SITES = """
name: pair
seed: 5
federation:
  sites:
    - name: east
      fabric: {kind: leaf-spine, leaves: 2, spines: 1, hosts_per_leaf: 2, host_link: @HOSTLINK@, uplink: 100Gbps, latency: @LAT@}
      tenants: [{name: web, vni: 10, hosts: "0-3", address: 10.0.0.10/24}]
      gateway: {capacity: @GATEWAY@, border_leaf: 1}
    - name: west
      fabric: {kind: leaf-spine, leaves: 2, spines: 1, hosts_per_leaf: 2, host_link: @HOSTLINK@, uplink: 100Gbps, latency: @LAT@}
      tenants: [{name: web, vni: 20, hosts: "0-3", address: 10.0.0.20/24}]
  wan: [{between: [east, west], bandwidth: @WAN@, latency: @WANLAT@}]
  networks: [{name: web, tenant: web, mode: @MODE@, sites: [east, west]}]
mobility:
  vms:
    - {name: vm0, cloud: east, host: 0, network: web, memory: @MEMORY@, working_set: 128MiB, dirty_rate: @DIRTY@}
  migrations:
    - {vm: vm0, to: west}
"""


def _cloud(text: str = TWO_SITES, *overrides: str, **values: str):
    fill = {
        "HOSTLINK": "25Gbps",
        "GATEWAY": "10Gbps",
        "WAN": "40Gbps",
        "MODE": "l2-stretch",
        "MEMORY": "1GiB",
        "DIRTY": "50MiB/s",
        "WANLAT": "4ms",
        "LAT": "1us",
    }
    fill.update(values)
    for key, value in fill.items():
        text = text.replace(f"@{key}@", value)
    return load_cloud(text, "<test>", overrides)


@settings(max_examples=10, deadline=None)
@given(
    host=st.sampled_from(["10Gbps", "25Gbps", "100Gbps"]),
    gateway=st.sampled_from(["5Gbps", "20Gbps", "40Gbps"]),
    wan=st.sampled_from(["2Gbps", "10Gbps", "50Gbps"]),
    memory=st.sampled_from(["512MiB", "1GiB", "2GiB"]),
    dirty=st.integers(1, 400),
    mode=st.sampled_from(["l2-stretch", "global-nat"]),
)
def test_a_migration_across_the_federation_alone_equals_its_plan(
    host, gateway, wan, memory, dirty, mode
) -> None:
    # no propagation delay on the path: the plan knows none (the engine adds it per round)
    cloud = _cloud(
        HOSTLINK=host,
        GATEWAY=gateway,
        WAN=wan,
        MEMORY=memory,
        DIRTY=f"{dirty}MiB/s",
        MODE=mode,
        WANLAT="0s",
        LAT="0s",
    )
    run = run_cloud(cloud)
    assert run.migrations is not None
    (got,) = [m.to_json() for m in run.migrations.migrations]
    # the path's bottleneck from the scenario itself (not from what the run built): the host
    # NIC, a gateway or the WAN, the tunnelled links counted in payload
    from dataclasses import replace

    from cloudtwin.intercloud.encapsulation import goodput_fraction
    from cloudtwin.mobility.plan import options_of
    from cloudtwin.twin.cloud import identity_update_s

    fed = cloud.federation
    tunnel = goodput_fraction(fed.encapsulation, fed.underlay_mtu, mode == "l2-stretch")
    payload = tunnel / goodput_fraction(None, fed.underlay_mtu)
    east_site, west_site = fed.sites
    tunnelled = (east_site.gateway.capacity, west_site.gateway.capacity, fed.wan[0].bandwidth)
    bandwidth = min(float(east_site.fabric.host_link), *(payload * float(c) for c in tunnelled))
    latency = 0.0  # WANLAT and LAT are 0
    joined = run.joined

    vm, job = cloud.mobility.vms[0], cloud.mobility.migrations[0]
    options = replace(
        options_of(job, bandwidth, 2 * latency), overlay_update_s=identity_update_s(cloud, vm, "west", joined)
    )
    want = plan_migration(memory_of(vm), options).to_dict()
    for key in ("total_time_s", "downtime_s", "connectivity_downtime_s", "bytes"):
        assert got[key] == pytest.approx(want[key], rel=1e-9, abs=1e-12), key
    assert got["rounds"] == want["rounds"] and got["converged"] == want["converged"]


def test_the_identity_follows_the_address_mode() -> None:
    stretched = run_cloud(_cloud()).migrations.migrations[0]
    # l2-stretch: the source site's gateway learns the new location one WAN crossing later
    assert stretched.connectivity_downtime_s - stretched.downtime_s == pytest.approx(0.004, rel=1e-9)
    natted = run_cloud(_cloud(MODE="global-nat")).migrations.migrations[0]
    # global-nat: the NAT entries move with a route propagation (1 s by default)
    assert natted.connectivity_downtime_s - natted.downtime_s == pytest.approx(1.0, rel=1e-12)


def test_a_gateway_failover_stalls_the_stream_for_the_failover_time() -> None:
    # nothing dirtied: one round, which the failover of east's gateway interrupts for 4.05 s
    text = TWO_SITES.replace("dirty_rate: @DIRTY@", "dirty_rate: 0").replace(
        "mobility:", "  gateway_faults: [{site: east, at: 0.2s}]\nmobility:"
    )
    cloud = _cloud(text)
    clean, hit = run_cloud(cloud, faults=False), run_cloud(cloud, faults=True)
    (failed,) = hit.failovers
    assert failed.total_s == pytest.approx(3.0 + 0.05 + 0.0 + 1.0)
    a, b = clean.migrations.migrations[0], hit.migrations.migrations[0]
    assert a.rounds == b.rounds == 1
    assert b.total_time_s == pytest.approx(a.total_time_s + failed.total_s, rel=1e-9)
    events = [(e["time_s"], e["event"]) for e in b.path_events]
    assert events == [(0.2, "stalled: gateway of east failed"), (pytest.approx(4.25), "re-routed")]


def test_a_site_part_alone_equals_the_same_part_in_the_cloud_bit_for_bit() -> None:
    # east's tenant stays on leaf 0 (hosts 0-1); the VM leaves host 2 on the border leaf 1
    text = (
        TWO_SITES.replace(
            "      gateway: {capacity: @GATEWAY@, border_leaf: 1}",
            "      gateway: {capacity: @GATEWAY@, border_leaf: 1}\n"
            "      workloads: [{kind: perftest, pattern: all-to-all, size: 3GiB, tenants: [db]}]",
        )
        .replace(
            'tenants: [{name: web, vni: 10, hosts: "0-3", address: 10.0.0.10/24}]',
            'tenants: [{name: web, vni: 10, hosts: "2-3", address: 10.0.0.10/24},'
            ' {name: db, vni: 11, hosts: "0-1", address: 10.9.0.10/24}]',
        )
        .replace("host: 0, network", "host: 2, network")
    )
    from cloudtwin.twin import run_scenario_jobs

    cloud = _cloud(text)
    run = run_cloud(cloud)
    (east, _) = run.sites
    alone = run_scenario_jobs(east.scenario).result.finish_s
    assert alone.size and run.migrations.migrations[0].converged
    np.testing.assert_array_equal(run.finish_s[east.flows], alone)


def test_the_hosts_nic_tiers_slow_a_migration_between_sites() -> None:
    slow = TWO_SITES.replace(
        "      gateway: {capacity: @GATEWAY@, border_leaf: 1}",
        "      gateway: {capacity: @GATEWAY@, border_leaf: 1}\n"
        "      nic: {profile: software-vswitch, functions: [{name: overlay}, {name: security-groups},"
        " {name: conntrack}], packet_size: 128B}",
    )
    fast = run_cloud(_cloud(GATEWAY="100Gbps", WAN="100Gbps")).migrations.migrations[0]
    slowed = run_cloud(_cloud(slow, GATEWAY="100Gbps", WAN="100Gbps")).migrations.migrations[0]
    assert slowed.total_time_s > 1.5 * fast.total_time_s


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("cloud: east, host: 0", "cloud: north, host: 0"), "mobility.vms.0.cloud"),
        (("sites: [east, west]}]", "sites: [east]}]"), "mobility.migrations.0.to"),
        (("mode: @MODE@", "mode: l3-routed"), "mobility.migrations.0.to"),
        (
            ("mobility:", "  gateway_faults: [{site: south, at: 1s}]\nmobility:"),
            "federation.gateway_faults.0.site",
        ),
        (("host: 0, network", "host: 9, network"), "mobility.vms.0.host"),
        (("network: web, memory", "network: nope, memory"), "mobility.vms.0.network"),
        (("mobility:", "  limits: {sites: 5}\nmobility:"), "federation.limits"),
    ],
)
def test_bad_cloud_input_is_one_line_naming_the_field(change: tuple[str, str], field: str) -> None:
    text = TWO_SITES.replace(*change)
    with pytest.raises(ScenarioError) as caught:
        _cloud(text)
    message = str(caught.value)
    assert "\n" not in message and f"{field}:" in message


def test_l3_routed_moves_when_renumbering_is_allowed() -> None:
    text = (
        TWO_SITES.replace("mode: @MODE@", "mode: l3-routed")
        .replace("mobility:\n", "mobility:\n  allow_renumbering: true\n")
        .replace("address: 10.0.0.20/24", "address: 10.0.1.20/24")
    )
    (m,) = run_cloud(_cloud(text)).migrations.migrations
    assert m.converged
    assert m.connectivity_downtime_s - m.downtime_s == pytest.approx(1.0, rel=1e-12)


EXAMPLE = "examples/one-cloud.yaml"


@pytest.mark.parametrize(
    ("command", "override", "field"),
    [
        (["evaluate", EXAMPLE, "--no-store", "--json"], "mobility.vms.0.cloud=north", "mobility.vms.0.cloud"),
        (["migrate", "run", EXAMPLE, "--json"], "federation.networks.0.sites=[east]", "mobility.migrations.0.to"),
        (["diagnose", EXAMPLE, "--db", "/nonexistent/x.duckdb"], "federation.networks.0.mode=l3-routed",
         "mobility.migrations.0.to"),
        (["evaluate", EXAMPLE, "--no-store"], "federation.gateway_faults.0.site=south",
         "federation.gateway_faults.0.site"),
    ],
)
def test_bad_cloud_keys_are_one_line_exit_2(command: list[str], override: str, field: str) -> None:
    from tests.cli.cli_helpers import cloudtwin

    done = cloudtwin(*command, "--set", override)
    assert done.returncode == 2, (command, done.stderr)
    (line,) = done.stderr.splitlines()
    assert f"{field}:" in line and "Traceback" not in done.stderr


HPL_SITE = """
      hosts: {gpus: 8}
      cluster: {node: a100-80g-8, virtualization: vm}
      workload: {kind: hpl, n: 200000, nb: 384, p: 4, q: 8, channels: 2}
"""


def test_hpl_and_a_collective_run_beside_the_migration_in_one_cloud() -> None:
    from cloudtwin.evaluation.cloud import evaluate_cloud
    from cloudtwin.evaluation.hpl import predict_hpl

    text = TWO_SITES.replace(
        '      gateway: {capacity: @GATEWAY@, border_leaf: 1}', '      gateway: {capacity: @GATEWAY@, border_leaf: 1}' + HPL_SITE
    ).replace(
        '      tenants: [{name: web, vni: 20, hosts: "0-3", address: 10.0.0.20/24}]',
        '      tenants: [{name: web, vni: 20, hosts: "0-3", address: 10.0.0.20/24}]\n'
        '      hosts: {gpus: 2}\n'
        '      workload: {kind: collective, op: allreduce, size: 256MiB, algorithm: ring}',
    )
    cloud = _cloud(text, HOSTLINK="100Gbps")
    (outcome,) = evaluate_cloud(cloud, ["ecmp"]).results.strategies.values()
    east, west = outcome.sites.values()
    alone = predict_hpl(east_scenario := cloud.federation.sites[0].site_scenario(
        cloud.seed, cloud.routing, cloud.reaction, cloud.limits))
    assert east_scenario.workload.kind == "hpl"
    # the rings share host 0's NIC with the migration: no faster than alone, not stopped
    assert 0 < east.hpl_tflops_per_gpu <= alone.tflops_per_gpu * (1 + 1e-9)
    assert west.flows > 0 and west.completion_s > 0
    (m,) = outcome.migrations.values()
    assert m.converged


@pytest.mark.parametrize(
    ("overrides", "limit"),
    [
        (["federation.sites.0.workload={kind: perftest, pattern: all-to-all, size: 1MiB, qps: 64}",
          "federation.sites.0.fabric.hosts_per_leaf=64", "federation.sites.0.fabric.leaves=16"], "limits.flows"),
        (["federation.sites.1.fabric={kind: fat-tree, k: 96}", "limits.flows=100000000000"], "limits.memory"),
        (["limits.migrations=1"], "limits.migrations"),
        (["limits.sites=1"], "limits.sites"),
        (["federation.traffic.0.pattern=all-pairs", "limits.flows=10"], "limits.flows"),
    ],
)
def test_a_cloud_above_its_limits_is_refused_before_anything_is_built(overrides: list[str], limit: str) -> None:
    from tests.cli.cli_helpers import REPO

    from cloudtwin.errors import LimitError

    cloud = load_cloud((REPO / "examples" / "one-cloud.yaml").read_text(), "<test>", overrides)
    with pytest.raises(LimitError) as caught:
        run_cloud(cloud)
    assert caught.value.field == limit and "\n" not in str(caught.value)


def test_thousands_of_sites_joined_by_every_pair_are_refused_before_joining() -> None:
    from cloudtwin.errors import LimitError

    text = "federation:\n  sites:\n" + "".join(f"    - {{name: s{i}}}\n" for i in range(3000))
    with pytest.raises(LimitError) as caught:
        run_cloud(load_cloud(text))
    assert caught.value.field == "limits.sites" and "4,498,500 WAN links" in str(caught.value)


def test_a_wan_link_listed_twice_is_refused_naming_the_clouds_field() -> None:
    from cloudtwin.errors import FederationError

    text = TWO_SITES.replace(
        "wan: [{between: [east, west], bandwidth: @WAN@, latency: @WANLAT@}]",
        "wan: [{between: [east, west], bandwidth: 1Gbps}, {between: [west, east], bandwidth: 40Gbps}]",
    )
    with pytest.raises(FederationError) as caught:
        run_cloud(_cloud(text))
    assert caught.value.field == "federation.wan.1.between"
