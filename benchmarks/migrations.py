"""Migration benchmark: 1,000 concurrent live migrations on a 128-host leaf-spine.

Two clouds of 64 hosts each (16 leaves x 8 hosts, 8 spines, 400G links), each with one
gateway host, joined by a 400 Gbps WAN link. 1,000 VMs (4 GiB, a 256 MiB working set,
dirty rates drawn uniformly from 1-20 MiB/s, start times uniformly over the first 60 s,
or `--start-window` seconds, 0 starting all of them at once; fixed seed) spread over the
first cloud's hosts migrate to the second cloud: every round of every migration is a
flow of the engine sharing the gateways and the WAN, so hundreds are in flight at once.
Prints the wall time of the run (admission, routing, simulation; the scenario is
validated from a dict first, YAML parsing not counted), engine events and the
migrations' outcomes.

Usage:  python benchmarks/migrations.py [--migrations 1000] [--start-window 60]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from cloudtwin.twin.migration import VmMigration


def scenario_text(count: int, seed: int = 1, window_s: float = 60.0) -> str:
    rng = np.random.default_rng(seed)
    hosts = rng.integers(0, 63, count)  # host 63 is the gateway
    rates = rng.uniform(1, 20, count)
    starts = rng.uniform(0, window_s, count)
    vms = "\n".join(
        f"    - {{name: vm{i}, cloud: east, host: {h}, memory: 4GiB, working_set: 256MiB, "
        f"dirty_rate: {r:.1f}MiB/s}}"
        for i, (h, r) in enumerate(zip(hosts, rates, strict=True))
    )
    migrations = "\n".join(f"    - {{vm: vm{i}, to: west, start: {t:.3f}s}}" for i, t in enumerate(starts))
    return f"""
name: bench-migrations
limits: {{migrations: {max(count, 1)}}}
fabric: {{kind: leaf-spine, leaves: 16, spines: 8, hosts_per_leaf: 8, host_link: 400Gbps, uplink: 400Gbps}}
mobility:
  wan: {{bandwidth: 400Gbps, latency: 10ms}}
  clouds:
    - {{name: east, hosts: "0-63", gateway: 63, admission: {{max_vms: {2 * count}}}}}
    - {{name: west, hosts: "64-127", gateway: 64, admission: {{max_vms: {2 * count}}}}}
  vms:
{vms}
  migrations:
{migrations}
"""


def in_flight(migrations: list[VmMigration]) -> int:
    """The most migrations running at one instant."""
    edges = sorted(
        [(m.start_s, 1) for m in migrations] + [(m.start_s + m.total_time_s, -1) for m in migrations]
    )
    return int(np.max(np.cumsum([e[1] for e in edges])))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--migrations", type=int, default=1000)
    parser.add_argument(
        "--start-window",
        type=float,
        default=60.0,
        help="start times are drawn uniformly over this many seconds (0: every migration at once)",
    )
    args = parser.parse_args()
    import yaml

    from cloudtwin.scenario import Scenario
    from cloudtwin.twin import run_migrations

    begin = time.perf_counter()
    text = scenario_text(args.migrations, window_s=args.start_window)
    scenario = Scenario.model_validate(yaml.load(text, Loader=yaml.CSafeLoader))
    validated = time.perf_counter() - begin
    begin = time.perf_counter()
    run = run_migrations(scenario)
    wall = time.perf_counter() - begin
    converged = sum(m.converged for m in run.migrations)
    print(
        json.dumps(
            {
                "migrations": len(run.migrations),
                "hosts": scenario.host_count,
                "wall_s": round(wall, 2),
                "scenario_validation_s": round(validated, 2),
                "in_flight_max": in_flight(run.migrations),
                "engine_events": run.events,
                "converged": converged,
                "rounds_total": sum(m.rounds for m in run.migrations),
                "longest_migration_s": max(m.total_time_s for m in run.migrations),
                "mean_downtime_ms": 1e3
                * float(np.mean([m.downtime_s for m in run.migrations if m.converged])),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
