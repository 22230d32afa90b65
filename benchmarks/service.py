"""Benchmark of `cloudtwin serve` over a large store: latency of the runs list and run pages.

Builds a store with 10,000 evaluation runs and 10,000,000 per-flow rows: one real
evaluation (examples/leaf-spine-perftest.yaml, ecmp and pinning) is stored, then its
document, strategy rows and timelines are repeated under new run ids, scenario names
and seeds, and about 1,000 per-flow rows per run are drawn from a seeded generator (the
pages read them as they would read real ones). Then it starts `cloudtwin serve` on a
local port and times requests made one after another over HTTP: the runs list (API and
page, with sorting, filtering and deep pages) and a run (API, its plots, its page), at
random run ids. Prints p50, p95 and max per kind of request.

Usage:  python benchmarks/service.py [--runs 10000] [--flows 10000000] [--requests 200]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "leaf-spine-perftest.yaml"


def build_store(db: Path, runs: int, flows: int) -> None:
    """One real run, repeated to `runs` runs with at least `flows` flow rows in all."""
    from cloudtwin.evaluation import usecases
    from cloudtwin.scenario.loader import load_scenario
    from cloudtwin.store.database import Store

    scenario = load_scenario(EXAMPLE.read_text(), EXAMPLE.name)
    with Store(db) as store:
        usecases.evaluate(scenario, ["ecmp", "pinning"], store=store)
        with store.transaction() as con:
            con.execute(
                "INSERT INTO eval_runs SELECT r, created_at + to_seconds(r), "
                "scenario || '-' || (r % 97), r % 13, strategies, recommendation, document "
                "FROM eval_runs, range(2, ?) t(r) WHERE run_id = 1", [runs + 1]
            )
            con.execute(
                "INSERT INTO eval_strategies SELECT r, strategy, aggregate_gbps, recovered, "
                "time_to_recover_s, dip, bytes_delayed, complexity_score "
                "FROM eval_strategies, range(2, ?) t(r) WHERE run_id = 1", [runs + 1]
            )
            con.execute(
                "INSERT INTO eval_timelines SELECT r, strategy, t_s, baseline_gbps, faulted_gbps "
                "FROM eval_timelines, range(2, ?) t(r) WHERE run_id = 1", [runs + 1]
            )
            con.execute("SELECT setseed(0.25)")
            real = con.execute("SELECT count(*) FROM eval_flows").fetchone()[0]
            half = -(-(flows - real) // (2 * (runs - 1)))  # per strategy, so the total reaches `flows`
            con.execute(
                "INSERT INTO eval_flows SELECT r, s.strategy, f, 'job0', 't' || (f % 2), f % 128, "
                "(f * 7) % 128, 1073741824.0, 0.0, 0.01 + random() * 0.2, 0.01 + random() * 0.1, "
                "0.0, random() < 0.1 FROM range(2, ?) t(r), range(?) g(f), "
                "(VALUES ('ecmp'), ('pinning')) s(strategy) ORDER BY r",
                [runs + 1, half],
            )


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return statistics.median(ordered), p95, ordered[-1]


def measure(url: str, paths: list[str]) -> list[float]:
    times = []
    with httpx.Client(base_url=url, timeout=60) as http:
        http.get(paths[0])  # warm the connection
        for path in paths:
            start = time.perf_counter()
            answer = http.get(path)
            times.append(1e3 * (time.perf_counter() - start))
            if answer.status_code != 200:
                raise SystemExit(f"{path}: HTTP {answer.status_code}: {answer.text[:200]}")
    return times


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--flows", type=int, default=10_000_000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="cloudtwin-bench-"))
    try:
        run(folder, args.runs, args.flows, args.requests)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run(folder: Path, runs: int, flows: int, requests: int) -> None:
    db = folder / "bench.duckdb"
    start = time.perf_counter()
    build_store(db, runs, flows)
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        n_runs = con.execute("SELECT count(*) FROM eval_runs").fetchone()[0]
        n_flows = con.execute("SELECT count(*) FROM eval_flows").fetchone()[0]
    print(f"store: {n_runs:,} runs, {n_flows:,} flow rows, {db.stat().st_size / 2**20:.0f} MiB, "
          f"built in {time.perf_counter() - start:.0f} s")
    sys.path.insert(0, str(REPO))
    from tests.service.server import running_server

    rng = random.Random(7)
    ids = [rng.randint(1, n_runs) for _ in range(requests)]
    sorts = ["run_id", "created_at", "scenario", "seed", "strategies"]
    lists = [
        f"/api/runs?sort={rng.choice(sorts)}&order={rng.choice(['asc', 'desc'])}"
        f"&offset={rng.randrange(0, n_runs, 50)}" + (f"&scenario=-{rng.randrange(97)}" if i % 3 == 0 else "")
        for i in range(requests)
    ]
    pages = [p.replace("/api/runs", "/") for p in lists]
    kinds = {
        "runs list (API)": lists,
        "runs list (page)": pages,
        "one run (API, results show --json)": [f"/api/runs/{i}" for i in ids],
        "run plots (API)": [f"/api/runs/{i}/plots" for i in ids],
        "run page (HTML)": [f"/runs/{i}" for i in ids],
    }
    start = time.perf_counter()
    with running_server(db, folder) as server:
        print(f"cloudtwin serve answered after {time.perf_counter() - start:.1f} s (first snapshot copied)")
        print(f"{'request':40s} {'n':>5s} {'p50 ms':>8s} {'p95 ms':>8s} {'max ms':>8s}")
        worst = 0.0
        for name, paths in kinds.items():
            p50, p95, top = percentiles(measure(server.url, paths))
            worst = max(worst, p95) if "list" in name or "page" in name or "run" in name else worst
            print(f"{name:40s} {len(paths):5d} {p50:8.1f} {p95:8.1f} {top:8.1f}")
    verdict = "under" if worst < 200 else "NOT under"
    print(f"worst p95 {worst:.1f} ms: {verdict} 200 ms at {n_runs:,} runs and {n_flows:,} flow rows")


if __name__ == "__main__":
    main()
