"""Engine benchmark: wall time and peak memory of the fluid simulator on two workloads.

(a) a permutation on a 32-leaf x 16-spine x 16-host leaf-spine (512 flows), once per
    routing strategy (routing + simulation);
(b) 100,000 flows with Poisson arrivals on a k=16 fat-tree (1,024 hosts), ECMP, run to
    completion. Flow sizes are log-uniform between 64 KiB and 16 MiB, sources and
    destinations uniform over hosts, and the arrival rate offers 40% of the hosts'
    line rate on average (the load is stated so the figure can be reproduced).

Each case runs in its own process so that peak memory (max RSS) is its own.

Usage:  python benchmarks/engine.py [--flows 100000] [--load 0.4] [--skip-a] [--skip-b]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from isolation import run_isolated

STRATEGIES = ["ecmp", "ecmp-qp", "adaptive", "spray", "pinning"]


def case_a(strategy: str) -> dict[str, float]:
    from cloudtwin.evaluation import run_scenario
    from cloudtwin.scenario import load_scenario

    scenario = load_scenario(
        "fabric: {kind: leaf-spine, leaves: 32, spines: 16, hosts_per_leaf: 16}\n"
        "workload: {kind: perftest, pattern: permutation, size: 1GiB}\n"
    )
    begin, cpu = time.perf_counter(), time.process_time()
    run = run_scenario(scenario, strategy)
    wall, cpu = time.perf_counter() - begin, time.process_time() - cpu
    return {"wall_s": wall, "cpu_s": cpu, "flows": len(run.flows), "utilization": run.summary.utilization}


def case_b(flows: int, load: float, seed: int = 1) -> dict[str, float]:
    from cloudtwin.engine import simulate
    from cloudtwin.evaluation import route_flows
    from cloudtwin.routing import load_strategy
    from cloudtwin.scenario import load_scenario
    from cloudtwin.topology import build_topology
    from cloudtwin.workloads import qp_flows

    scenario = load_scenario("fabric: {kind: fat-tree, k: 16}\n")
    topology = build_topology(scenario)
    rng = np.random.default_rng(seed)
    hosts = topology.host_count
    src = rng.integers(0, hosts, flows)
    dst = (src + rng.integers(1, hosts, flows)) % hosts
    size = np.exp(rng.uniform(np.log(64 * 1024), np.log(16 * 1024 * 1024), flows))
    mean_bits = float(size.mean()) * 8
    arrival_rate = load * hosts * topology.nic_rate_bps / mean_bits
    start = np.cumsum(rng.exponential(1 / arrival_rate, flows))
    begin, cpu = time.perf_counter(), time.process_time()
    table = qp_flows(
        topology, topology.host_nics[src, 0], topology.host_nics[dst, 0], size, 1, rng, start
    )
    paths = route_flows(scenario, topology, table, load_strategy("ecmp"))
    routed = time.perf_counter()
    result = simulate(
        paths,
        topology.capacity_bps,
        table.size_bytes,
        table.start_s,
        np.full(flows, topology.nic_rate_bps),
        latency_s=paths.latency_s(topology),
    )
    end, cpu = time.perf_counter(), time.process_time() - cpu
    return {
        "wall_s": end - begin,
        "cpu_s": cpu,
        "route_s": routed - begin,
        "simulate_s": end - routed,
        "events": result.events,
        "solves": result.solves,
        "simulated_s": result.completion_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--flows", type=int, default=100_000)
    parser.add_argument("--load", type=float, default=0.4)
    parser.add_argument("--skip-a", action="store_true", help="skip case (a)")
    parser.add_argument("--skip-b", action="store_true", help="skip case (b)")
    parser.add_argument("--strategies", default=",".join(STRATEGIES), help="case (a)'s strategies")
    args = parser.parse_args()
    strategies = [] if args.skip_a else args.strategies.split(",")
    if strategies:
        print("(a) permutation, leaf-spine 32 x 16 x 16 (512 flows), target < 1 s per strategy")
        print(f"{'strategy':<10} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9} {'utilization':>12}")
    for strategy in strategies:
        r = run_isolated(case_a, strategy)
        print(
            f"{strategy:<10} {r['wall_s']:>8.3f} {r['cpu_s']:>8.3f} {r['peak_rss_mib']:>9.0f} "
            f"{r['utilization']:>12.3f}"
        )
    if args.skip_b:
        return
    print(
        f"\n(b) {args.flows:,} Poisson flows, fat-tree k=16 (1,024 hosts), load {args.load}, ECMP;"
        " target < 60 s, < 4 GiB"
    )
    r = run_isolated(case_b, args.flows, args.load)
    print(
        f"wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s (routing {r['route_s']:.1f} s, "
        f"simulation {r['simulate_s']:.1f} s), "
        f"peak {r['peak_rss_mib']:.0f} MiB, {r['events']:,} events, {r['solves']:,} full solves, "
        f"{r['simulated_s'] * 1e3:.1f} ms simulated"
    )


if __name__ == "__main__":
    main()
