"""Running scenarios end to end: determinism, consistency of a Run, and the issue's acceptance."""

from __future__ import annotations

import numpy as np
import pytest

from cloudtwin.engine import simulate
from cloudtwin.evaluation import build_flows, run_scenario, summarize
from cloudtwin.scenario import Scenario, load_scenario
from cloudtwin.topology import build_topology, pick_nth, route_hop_by_hop

SEEDS = range(1, 11)
NON_BLOCKING = (
    "name: acceptance\nfabric: {kind: leaf-spine, leaves: 16, spines: 8, hosts_per_leaf: 8}\n"
)


def acceptance(seed: int, *overrides: str) -> Scenario:
    return load_scenario(NON_BLOCKING, "<acceptance>", [f"seed={seed}", *overrides])


@pytest.mark.parametrize("strategy", ["ecmp", "ecmp-qp", "adaptive", "spray", "pinning"])
def test_same_seed_same_run(make_scenario, strategy: str) -> None:
    scenario = make_scenario("fabric.leaves=4", "workload.qps=2", "seed=5")
    a, b = run_scenario(scenario, strategy), run_scenario(scenario, strategy)
    assert a.result.finish_s.tobytes() == b.result.finish_s.tobytes()
    assert a.paths.link_ids.tobytes() == b.paths.link_ids.tobytes()
    assert a.summary == b.summary


def test_run_is_consistent(make_scenario) -> None:
    scenario = make_scenario("fabric.leaves=4", "workload.qps=2", "workload.size=1MiB")
    run = run_scenario(scenario)
    assert run.strategy == "ecmp"  # the scenario's own strategy
    assert len(run.flows) == 32 * 2
    assert run.summary.flows == 32  # connections, as perftest reports pairs
    assert run.paths.flow_count == len(run.flows)
    # each QP: 2^19 bytes at <= 100G, plus 1 us per link (2 links within a leaf, 4 across)
    latency = run.paths.latency_s(run.topology)
    assert set(np.round(latency * 1e6, 9).tolist()) == {2.0, 4.0}
    floor = run.flows.size_bytes * 8 / 100e9 + latency
    assert np.all(run.result.fct_s >= floor * (1 - 1e-12))
    assert 0 < run.summary.utilization <= 1
    assert run.summary.completion_s == pytest.approx(run.result.completion_s)


def test_strategy_argument_overrides_scenario(make_scenario) -> None:
    run = run_scenario(make_scenario("fabric.leaves=2", "routing.strategy=ecmp"), "pinning")
    assert run.strategy == "pinning" and run.summary.strategy == "pinning"


def test_pinning_utilization_on_non_blocking_leaf_spine() -> None:
    # Acceptance: 16x8x8, permutation, 1 QP: pinning at least 0.98 for every seed.
    # Measured: 0.99995 for every seed (only the 3 us path latency is lost on 86 ms).
    utilization = [run_scenario(acceptance(seed), "pinning").summary.utilization for seed in SEEDS]
    assert min(utilization) >= 0.98


def random_spine_utilization(seed: int) -> float:
    """The reference ECMP is meant to match: every flow picks its spine uniformly at random."""
    scenario = acceptance(seed)
    topology = build_topology(scenario)
    flows = build_flows(scenario, topology)
    rng = np.random.default_rng(seed)

    def choose(hop, rows, nodes, cand, ok):
        return pick_nth(ok, rng.integers(0, ok.sum(axis=1)))

    paths = route_hop_by_hop(topology, flows.src, flows.dst, choose)
    rate = np.full(len(flows), topology.nic_rate_bps)
    result = simulate(
        paths,
        topology.capacity_bps,
        flows.size_bytes,
        flows.start_s,
        rate,
        paths.latency_s(topology),
    )
    return summarize(
        "ref", "random", flows.connection, flows.size_bytes, result.start_s, result.finish_s, rate
    ).utilization


def test_ecmp_matches_uniform_random_spine_choice() -> None:
    # Acceptance: ECMP's mean utilization over 10 seeds sits where uniform random spine choice
    # under max-min puts it. Measured (seeds 1-10): ecmp 0.5667, random reference 0.5628;
    # over 200 seeds the reference averages 0.5656 +- 0.0020 (and ecmp over 60 seeds 0.5703),
    # a little above the "about 0.52" the issue guessed.
    ecmp = np.mean([run_scenario(acceptance(seed), "ecmp").summary.utilization for seed in SEEDS])
    reference = np.mean([random_spine_utilization(seed) for seed in SEEDS])
    print(f"ecmp mean utilization {ecmp:.4f}, uniform random reference {reference:.4f}")
    assert abs(ecmp - reference) <= 0.03
    assert 0.45 < ecmp < 0.65


@pytest.mark.slow
def test_strategies_land_between_ecmp_and_pinning() -> None:
    # Acceptance: ecmp-qp (4 and 8 QPs), adaptive and spray at or between ecmp and pinning.
    # Measured means over seeds 1-10: ecmp 0.567, ecmp-qp/4 0.607, ecmp-qp/8 0.676,
    # adaptive 0.705, spray 0.99995, pinning 0.99995.
    def mean(strategy: str, *overrides: str) -> float:
        return float(
            np.mean(
                [
                    run_scenario(acceptance(seed, *overrides), strategy).summary.utilization
                    for seed in SEEDS
                ]
            )
        )

    ecmp, pinning = mean("ecmp"), mean("pinning")
    others = {
        "ecmp-qp/4": mean("ecmp-qp", "workload.qps=4"),
        "ecmp-qp/8": mean("ecmp-qp", "workload.qps=8"),
        "adaptive": mean("adaptive"),
        "spray": mean("spray"),
    }
    print(f"ecmp {ecmp:.4f} pinning {pinning:.4f}", {k: round(v, 4) for k, v in others.items()})
    for name, value in others.items():
        assert ecmp - 0.01 <= value <= pinning + 0.01, name
    # more QPs give ECMP more chances to spread
    assert others["ecmp-qp/4"] < others["ecmp-qp/8"]
