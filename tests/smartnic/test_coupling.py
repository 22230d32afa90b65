"""The NIC datapath in the engine: bit-identical with `basic` NICs or a pipeline at line rate,
tiers cap throughput where they are slower than the fabric."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.cli.cli_helpers import cloudtwin
from tests.conftest import scenario_from

from cloudtwin.evaluation import run_scenario
from cloudtwin.flows import Paths
from cloudtwin.scenario.nic import Nic
from cloudtwin.smartnic.coupling import couple_nics, flow_hosts
from cloudtwin.smartnic.placement import plan_nics
from cloudtwin.topology import build_topology

SMALL = ("fabric.leaves=4", "fabric.spines=2", "fabric.hosts_per_leaf=2", "workload.size=4MiB")
PIPELINE_ONLY = "nic.functions=[{name: overlay}, {name: security-groups}, {name: rate-limiter}]"


def test_one_flow_through_bmv2_like_nics_is_capped_at_096_gbps() -> None:
    scenario = scenario_from(*SMALL, "workload.pattern=pairs", "nic.profile=bmv2-like", "workload.size=1MiB")
    run = run_scenario(scenario)
    topology = build_topology(scenario)
    latency = run.paths.latency_s(topology) + 2 / 80_000  # the fabric's links and two bmv2 pipelines
    expected = run.flows.size_bytes * 8 / 0.96e9 + latency
    np.testing.assert_allclose(run.result.fct_s, expected, rtol=1e-9)


def test_a_slower_tier_caps_and_a_line_rate_pipeline_does_not() -> None:
    base = run_scenario(scenario_from(*SMALL))
    vswitch = run_scenario(scenario_from(*SMALL, "nic.profile=software-vswitch"))
    assert vswitch.result.completion_s > base.result.completion_s
    janus = run_scenario(scenario_from(*SMALL, "nic.profile=janus-100g", PIPELINE_ONLY))
    np.testing.assert_array_equal(janus.result.finish_s, base.result.finish_s)


@pytest.mark.parametrize(
    "command",
    [
        ["run", "examples/leaf-spine-perftest.yaml", "--set", "workload.size=8MiB"],
        [
            "compare",
            "examples/leaf-spine-perftest.yaml",
            "--strategies",
            "ecmp,pinning",
            "--set",
            "workload.size=8MiB",
        ],
        ["nccl-tests", "examples/routing-strategies.yaml", "--minbytes", "64M", "--maxbytes", "64M"],
    ],
)
def test_existing_results_are_bit_identical_with_basic_or_line_rate_nics(command: list[str]) -> None:
    plain = cloudtwin(*command, "--json")
    assert plain.returncode == 0, plain.stderr
    for extra in (
        ["--set", "nic.profile=basic"],
        ["--set", "nic.profile=janus-100g", "--set", PIPELINE_ONLY],
    ):
        coupled = cloudtwin(*command, *extra, "--json")
        assert coupled.returncode == 0, coupled.stderr
        assert json.loads(coupled.stdout) == json.loads(plain.stdout)


def test_nccl_tests_slow_down_behind_a_software_datapath() -> None:
    command = [
        "nccl-tests",
        "examples/routing-strategies.yaml",
        "--minbytes",
        "64M",
        "--maxbytes",
        "64M",
        "--json",
    ]
    plain = json.loads(cloudtwin(*command).stdout)
    vswitch = cloudtwin(*command, "--set", "nic.profile=software-vswitch")
    assert vswitch.returncode == 0, vswitch.stderr
    assert json.dumps(json.loads(vswitch.stdout)) != json.dumps(plain)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(0, 40), min_size=1, max_size=6), min_size=1, max_size=20))
def test_appended_paths_keep_every_original_hop_in_order(raw: list[list[int]]) -> None:
    scenario = scenario_from(
        "fabric.leaves=2", "fabric.spines=2", "fabric.hosts_per_leaf=2", "nic.profile=software-vswitch"
    )
    topology = build_topology(scenario)
    rows = [[h % topology.link_count for h in r] for r in raw]
    paths = Paths(
        np.cumsum([0] + [len(r) for r in rows]), np.array([h for r in rows for h in r], dtype=np.int64)
    )
    coupled = couple_nics(
        topology, topology.capacity_bps, paths, plan_nics(scenario.nic, topology.host_count)
    )
    src_host, _, dst_host, _ = flow_hosts(topology, paths)
    for f in range(paths.flow_count):
        new = coupled.paths.path(f)
        np.testing.assert_array_equal(new[: len(rows[f])], rows[f])
        extra = new[len(rows[f]) :]
        assert (extra >= topology.link_count).all()
        assert len(extra) == len({h for h in (src_host[f], dst_host[f]) if h >= 0})


def test_basic_plan_adds_nothing() -> None:
    assert not plan_nics(Nic(), 8).modelled


def test_a_pipeline_swap_stalls_the_hosts_flows_for_the_profiles_stall() -> None:
    pairs = (*SMALL, "workload.pattern=pairs", "workload.size=64MiB")
    base = run_scenario(scenario_from(*pairs, "nic.profile=janus-100g", PIPELINE_ONLY))
    swapped = run_scenario(
        scenario_from(
            *pairs, "nic.profile=janus-100g", PIPELINE_ONLY, "nic.pipeline_swaps=[{hosts: 0, at: 1ms}]"
        )
    )
    touched = (swapped.flows.src == swapped.topology.host_nics[0, 0]) | (
        swapped.flows.dst == swapped.topology.host_nics[0, 0]
    )
    assert touched.any()
    delay = swapped.result.finish_s - base.result.finish_s
    np.testing.assert_allclose(delay[touched], 0.05, rtol=1e-9)  # janus-100g: 50 ms
    np.testing.assert_array_equal(delay[~touched], 0.0)


def test_a_swap_needs_a_pipeline() -> None:
    from cloudtwin.errors import NicError

    with pytest.raises(NicError, match=r"nic.pipeline_swaps.0.hosts: host 1's NIC \(software-vswitch\)"):
        plan_nics(
            scenario_from(*SMALL, "nic.profile=software-vswitch", "nic.pipeline_swaps=[{hosts: 1}]").nic, 16
        )
