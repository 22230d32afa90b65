"""Collectives: busbw factors, the analytical ring bound, ring vs tree, slow links, routing."""

from __future__ import annotations

import numpy as np
import pytest

from cloudtwin.engine import simulate
from cloudtwin.errors import ScenarioError, WorkloadError
from cloudtwin.evaluation.collective import plan_for, simulate_collective
from cloudtwin.evaluation.run import route_flows, run_scenario
from cloudtwin.routing import load_strategy
from cloudtwin.scenario import Scenario, load_scenario
from cloudtwin.topology import build_topology
from cloudtwin.workloads.collective import bus_factor, ring_bound
from cloudtwin.workloads.pipeline import Template, unroll

GiB = 1 << 30


def collective(fabric: str, hosts: str, *overrides: str, workload: str = "") -> Scenario:
    text = f"fabric: {{{fabric}}}\nhosts: {{{hosts}}}\nworkload: {{kind: collective{workload}}}\n"
    return load_scenario(text, "<test>", list(overrides))


def run(scenario: Scenario, strategy: str = "pinning", size: int | None = None):
    return simulate_collective(scenario, build_topology(scenario), load_strategy(strategy), size)


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [
        ("allreduce", 8, 14 / 8),
        ("allreduce", 2, 1.0),
        ("allgather", 4, 3 / 4),
        ("reducescatter", 16, 15 / 16),
        ("alltoall", 8, 7 / 8),
        ("broadcast", 8, 1.0),
        ("sendrecv", 8, 1.0),
    ],
)
def test_bus_factor_is_nccl_tests(op: str, n: int, factor: float) -> None:
    assert bus_factor(op, n) == pytest.approx(factor)  # type: ignore[arg-type]


def test_unroll_ring_of_two_units_by_hand() -> None:
    # two units in a ring: each waits for itself and the other in the previous round
    template = Template(
        route=np.array([0, 1]),
        bytes_per_round=np.array([10.0, 20.0]),
        rate_cap_bps=np.ones(2),
        gap_first_s=np.array([1.0, 2.0]),
        gap_later_s=np.array([0.5, 0.5]),
        job=np.zeros(2, dtype=np.int64),
        same_indptr=np.zeros(3, dtype=np.int64),
        same_after=np.empty(0, dtype=np.int64),
        prev_indptr=np.array([0, 2, 4]),
        prev_after=np.array([0, 1, 1, 0]),
    )
    out = unroll(template, 3)
    deps = out.dependencies
    assert out.size_bytes.tolist() == [10, 20] * 3
    assert out.start_s.tolist() == [1.0, 2.0, 0, 0, 0, 0]
    assert deps.gap_s.tolist() == [1.0, 2.0, 0.5, 0.5, 0.5, 0.5]
    assert deps.indptr.tolist() == [0, 0, 0, 2, 4, 6, 8]
    assert sorted(deps.after[4:6].tolist()) == [2, 3]  # round 2 unit 0 waits for round 1


# Ring AllReduce, 1 GiB, no contention: busbw within 2% of the analytical bound.
UNCONTENDED = [
    # one host: NVLink only, 8 GPUs, 8 channels: 300 GB/s / 8 channels per GPU link
    ("kind: leaf-spine, leaves: 1, spines: 1, hosts_per_leaf: 1", "nics: 1, gpus: 8", 300.0),
    # 8 hosts x 1 GPU, 1 NIC of 100G: the NIC bounds busbw at 12.5 GB/s
    ("kind: leaf-spine, leaves: 4, spines: 2, hosts_per_leaf: 2", "nics: 1, gpus: 1", 12.5),
    # 8 hosts x 8 GPUs x 8 NICs, rail-optimized: 8 x 12.5 GB/s
    ("kind: rail-optimized, leaves: 16, spines: 4, hosts_per_leaf: 4", "nics: 8, gpus: 8", 100.0),
    # 2 NICs and 4 channels: 2 channels per NIC
    ("kind: leaf-spine, leaves: 4, spines: 4, hosts_per_leaf: 2", "nics: 2, gpus: 8", 25.0),
]


@pytest.mark.parametrize(("fabric", "hosts", "bus_GBps"), UNCONTENDED)
def test_ring_allreduce_meets_the_analytical_bound(fabric: str, hosts: str, bus_GBps: float) -> None:
    scenario = collective(fabric, hosts, workload=", channels: 8, rounds: 32")
    result = run(scenario, "ecmp", GiB)
    job = result.plan.jobs[0]
    topology = build_topology(scenario)
    bound = ring_bound(
        scenario.workload,
        job,
        GiB,
        scenario.hosts.gpus,
        topology.nics_per_host,  # type: ignore[arg-type]
        topology.nic_rate_bps,
        scenario.hosts.nvlink,
    )
    n = job.size
    bound_bus = GiB / bound * 2 * (n - 1) / n / 1e9
    # the bound itself: the constraint by hand, less NCCL's per-step latency
    assert bound_bus < bus_GBps and bound_bus > bus_GBps * 0.9
    assert result.measurement.busbw_GBps == pytest.approx(bound_bus, rel=0.02)


def test_ring_latency_is_nccls_per_step_sum() -> None:
    # 2 hosts x 1 GPU, 8 KiB: 2 steps, both over the network, 14 us each
    scenario = collective(
        "kind: leaf-spine, leaves: 1, spines: 1, hosts_per_leaf: 2",
        "nics: 1, gpus: 1",
        workload=", channels: 1",
    )
    result = run(scenario, "ecmp", 8192)
    bytes_on_wire = 2 * 1 / 2 * 8192
    assert result.measurement.time_s == pytest.approx(2 * 14e-6 + bytes_on_wire * 8 / 100e9, rel=1e-6)


def test_one_slow_link_slows_the_whole_ring() -> None:
    scenario = collective(
        "kind: leaf-spine, leaves: 4, spines: 2, hosts_per_leaf: 2",
        "nics: 1, gpus: 1",
        workload=", channels: 1, size: 256MiB",
    )
    topology = build_topology(scenario)
    plan = plan_for(scenario, topology)
    paths = plan.flow_paths(route_flows(scenario, topology, plan.connections, load_strategy("pinning")))
    capacity = plan.nvlink.capacity_bps(topology)
    u = plan.unrolled

    def time_with(cap: np.ndarray) -> float:
        return simulate(
            paths, cap, u.size_bytes, u.start_s, u.rate_cap_bps, dependencies=u.dependencies
        ).completion_s

    fast = time_with(capacity)
    slow_cap = capacity.copy()
    slow_cap[topology.out_links[topology.host_nics[3, 0], 0]] /= 2  # one NIC uplink at half speed
    slow = time_with(slow_cap)
    # every hop waits for the slow one: the whole ring runs at half speed (latency aside)
    assert slow / fast == pytest.approx(2.0, rel=0.02)


def test_tree_wins_small_ring_wins_large_and_auto_picks_the_faster() -> None:
    scenario = collective(
        "kind: leaf-spine, leaves: 4, spines: 4, hosts_per_leaf: 8",
        "nics: 1, gpus: 8",
        workload=", channels: 2",
    )
    topology = build_topology(scenario)
    busbw = {}
    for algorithm in ("ring", "tree", "auto"):
        s = scenario.model_copy(
            update={"workload": scenario.workload.model_copy(update={"algorithm": algorithm})}
        )
        for size in (1 << 20, GiB):
            r = simulate_collective(s, topology, load_strategy("pinning"), size)
            busbw[algorithm, size] = r.measurement.busbw_GBps
    # 256 ranks: the ring pays 510 step latencies, the tree 2 x (7 NVLink + 5 network)
    assert busbw["tree", 1 << 20] > 2 * busbw["ring", 1 << 20]
    assert busbw["ring", GiB] > busbw["tree", GiB]
    for size in (1 << 20, GiB):
        assert busbw["auto", size] == pytest.approx(max(busbw["ring", size], busbw["tree", size]))


def test_ecmp_collisions_slow_the_ring_and_pinning_stays_at_the_bound() -> None:
    scenario = collective(
        "kind: leaf-spine, leaves: 8, spines: 8, hosts_per_leaf: 4",
        "nics: 2, gpus: 8",
        workload=", channels: 4, host_order: random, rounds: 16",
    )
    ecmp, pinning = run(scenario, "ecmp", GiB), run(scenario, "pinning", GiB)
    job = pinning.plan.jobs[0]
    bound = ring_bound(scenario.workload, job, GiB, 8, 2, 100e9, scenario.hosts.nvlink)  # type: ignore[arg-type]
    bound_bus = GiB / bound * 2 * (job.size - 1) / job.size / 1e9
    assert pinning.measurement.busbw_GBps == pytest.approx(bound_bus, rel=0.02)
    assert ecmp.measurement.busbw_GBps < 0.8 * pinning.measurement.busbw_GBps


def test_channels_are_their_own_qps_with_their_own_ports() -> None:
    scenario = collective(
        "kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2",
        "nics: 1, gpus: 2",
        workload=", channels: 4, qps_per_connection: 2",
    )
    connections = plan_for(scenario, build_topology(scenario)).connections
    # 4 hosts -> 4 network hops per channel, 4 channels, 2 QPs each
    assert len(connections) == 4 * 4 * 2
    pairs = {(int(a), int(b)) for a, b in zip(connections.src, connections.dst, strict=True)}
    assert len(pairs) == 4  # every QP of a hop joins the same two NICs
    assert np.unique(connections.sport).size == len(connections)


# 4 hosts x 2 GPUs, one 100G NIC each (12.5 GB/s), 256 MiB, by hand:
# ring ops, broadcast and sendrecv move busbw x time through every NIC: busbw -> 12.5 GB/s;
# alltoall: each host sends 2 GPUs x 6 remote peers x size/8 = 1.5 x size through its NIC,
# so algbw = 12.5 / 1.5 and busbw = 7/8 of that.
EXPECTED_BUSBW = {
    "allreduce": 12.5,
    "allgather": 12.5,
    "reducescatter": 12.5,
    "broadcast": 12.5,
    "sendrecv": 12.5,
    "alltoall": 12.5 / 1.5 * 7 / 8,
}


@pytest.mark.parametrize("op", list(EXPECTED_BUSBW))
def test_every_op_reaches_its_hand_computed_busbw(op: str) -> None:
    scenario = collective(
        "kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2",
        "nics: 1, gpus: 2",
        f"workload.op={op}",
        workload=", channels: 2",
    )
    m = run(scenario, "pinning", 256 << 20).measurement
    # latencies (a few hundred microseconds at most) cost under 2% at 256 MiB
    assert m.busbw_GBps <= EXPECTED_BUSBW[op] * 1.0001
    assert m.busbw_GBps == pytest.approx(EXPECTED_BUSBW[op], rel=0.02)
    assert m.algbw_GBps * bus_factor(op, 8) == pytest.approx(m.busbw_GBps)  # type: ignore[arg-type]


def test_tenants_run_one_job_each_and_same_seed_same_numbers() -> None:
    text = (
        "fabric: {kind: leaf-spine, leaves: 4, spines: 4, hosts_per_leaf: 2}\n"
        "hosts: {nics: 1, gpus: 2}\n"
        "tenants: [{name: a, vni: 10, hosts: '0-3'}, {name: b, vni: 20, hosts: '4-7'}]\n"
        "workload: {kind: collective, host_order: random, size: 64MiB, rounds: 8}\n"
    )
    scenario = load_scenario(text)
    first, again = run(scenario, "ecmp"), run(scenario, "ecmp")
    assert len(first.plan.jobs) == 2 and len(first.measurement.job_time_s) == 2
    assert first.result.finish_s.tobytes() == again.result.finish_s.tobytes()
    assert set(first.plan.connections.tenant.tolist()) == {0, 1}
    summary = run_scenario(scenario, "ecmp").summary
    # the summary runs from the first flow's start (after its step latency) to the last finish
    begin = float(first.result.start_s.min())
    assert summary.completion_s == pytest.approx(max(first.measurement.job_time_s) - begin)


def test_bad_collectives_are_named() -> None:
    base = "fabric: {leaves: 1, hosts_per_leaf: 2}\nhosts: {gpus: 2}\n"
    with pytest.raises(ScenarioError, match="workload.ranks"):
        load_scenario(base + "workload: {kind: collective, ranks: '0-9'}\n")
    with pytest.raises(ScenarioError, match="workload.op"):
        load_scenario(base + "workload: {kind: collective, op: gather}\n")
    scenario = load_scenario(base + "workload: {kind: collective, ranks: '0-2'}\n")
    with pytest.raises(WorkloadError, match="same number of ranks"):
        plan_for(scenario, build_topology(scenario))
    scenario = load_scenario(base + "workload: {kind: collective, op: allgather, algorithm: tree}\n")
    with pytest.raises(WorkloadError, match="tree runs allreduce only"):
        plan_for(scenario, build_topology(scenario))


def test_ring_results_do_not_depend_on_the_number_of_rounds() -> None:
    scenario = collective(
        "kind: leaf-spine, leaves: 4, spines: 4, hosts_per_leaf: 2",
        "nics: 1, gpus: 2",
        workload=", channels: 2, host_order: random",
    )
    topology = build_topology(scenario)
    busbw = []
    for rounds in (8, 32):
        s = scenario.model_copy(update={"workload": scenario.workload.model_copy(update={"rounds": rounds})})
        busbw.append(
            simulate_collective(s, topology, load_strategy("ecmp"), 256 << 20).measurement.busbw_GBps
        )
    assert busbw[0] == pytest.approx(busbw[1], rel=1e-6)


def test_rings_are_rail_aligned_and_follow_gpu_nic_affinity() -> None:
    scenario = collective(
        "kind: rail-optimized, leaves: 8, spines: 4, hosts_per_leaf: 2",
        "nics: 4, gpus: 8",
        workload=", channels: 8",
    )
    topology = build_topology(scenario)
    connections = plan_for(scenario, topology).connections
    rail = topology.node_index[connections.src] % 4
    # every hop leaves and enters through the same rail: it never crosses to another rail leaf group
    np.testing.assert_array_equal(rail, topology.node_index[connections.dst] % 4)
    # 8 channels over 4 NICs: two channels per rail, one network hop per host each
    assert np.bincount(rail).tolist() == [2 * 4] * 4


def test_ranks_pick_gpus_and_their_order() -> None:
    # GPU 0 of every host, in reverse host order: one rank per host, all hops on the network
    scenario = collective(
        "kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2",
        "nics: 1, gpus: 2",
        "workload.ranks=[6, 4, 2, 0]",
        workload=", channels: 1",
    )
    result = run(scenario, "pinning", 256 << 20)
    job = result.plan.jobs[0]
    assert job.hosts.tolist() == [3, 2, 1, 0] and job.local.ravel().tolist() == [6, 4, 2, 0]
    assert len(result.plan.segments.indptr) == 1  # no NVLink segment
    topology = build_topology(scenario)
    assert result.plan.connections.src.tolist() == topology.host_nics[[3, 2, 1, 0], 0].tolist()
    assert result.measurement.busbw_GBps == pytest.approx(12.5, rel=0.01)
