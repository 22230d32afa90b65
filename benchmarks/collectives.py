"""Collective benchmark: wall time and peak memory of a 1 GiB ring AllReduce on 1,536 GPUs.

192 hosts x 8 A100 GPUs, 8 x 100G NICs per host, on a rail-optimized fabric (6 groups of
32 hosts, 48 rail leaves, 32 spines: non-blocking), 8 channels, ranks in host order.
For each routing strategy: build the plan, route the QPs, run the pipelined rounds on
the engine, measure busbw. Each case runs in its own process so that peak memory (max
RSS) is its own. Target: under 10 s per strategy.

Usage:  python benchmarks/collectives.py [--strategies ecmp,pinning] [--set key=value ...]
"""

from __future__ import annotations

import argparse
import time

from isolation import run_isolated

STRATEGIES = ["ecmp", "ecmp-qp", "adaptive", "spray", "pinning"]

SCENARIO = """\
name: collectives-benchmark
seed: 1
fabric: {kind: rail-optimized, leaves: 48, spines: 32, hosts_per_leaf: 32, host_link: 100Gbps}
hosts: {nics: 8, gpus: 8}
workload: {kind: collective, op: allreduce, algorithm: ring, size: 1GiB, channels: 8}
"""


def case(strategy: str, overrides: list[str]) -> dict[str, float]:
    from cloudtwin.evaluation.collective import simulate_collective
    from cloudtwin.routing import load_strategy
    from cloudtwin.scenario import load_scenario
    from cloudtwin.topology import build_topology

    scenario = load_scenario(SCENARIO, "<benchmark>", overrides)
    begin, cpu = time.perf_counter(), time.process_time()
    topology = build_topology(scenario)
    run = simulate_collective(scenario, topology, load_strategy(strategy))
    wall, cpu = time.perf_counter() - begin, time.process_time() - cpu
    m = run.measurement
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "flows": float(run.paths.flow_count),
        "rounds": float(run.plan.rounds),
        "gpus": float(run.plan.jobs[0].size),
        "events": float(run.result.events),
        "time_ms": m.time_s * 1e3,
        "busbw": m.busbw_GBps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    print("1 GiB ring AllReduce, 192 hosts x 8 GPUs, 8 NICs, rail-optimized, 8 channels; target < 10 s")
    print(
        f"{'strategy':<10} {'wall s':>7} {'CPU s':>7} {'peak MiB':>9} {'flows':>7} {'rounds':>6} "
        f"{'events':>7} {'time ms':>8} {'busbw GB/s':>10}"
    )
    for strategy in args.strategies.split(","):
        r = run_isolated(case, strategy, args.overrides)
        print(
            f"{strategy:<10} {r['wall_s']:>7.2f} {r['cpu_s']:>7.2f} {r['peak_rss_mib']:>9.0f} "
            f"{r['flows']:>7.0f} {r['rounds']:>6.0f} {r['events']:>7.0f} {r['time_ms']:>8.2f} "
            f"{r['busbw']:>10.2f}"
        )


if __name__ == "__main__":
    main()
