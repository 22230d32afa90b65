"""Sweep benchmark: parallel speed-up, per-point overhead, and time to the first result.

1. Speed-up: `--points` CPU-bound points of at least `--point-seconds` CPU seconds each
   (a pure-Python loop of a fixed length, calibrated on CPU time, not wall time, on the
   fastest of several probes, so a busy machine does not shorten the points; each point
   reports the CPU seconds it used, and the smallest is printed), run serially in the
   driver and on a local pool of 2 workers. To give both the same machine, the points are
   cut into `--rounds` slices and each slice runs both ways, alternating which goes first;
   the speed-up is the serial wall time over the pool's, summed over the slices, and the
   load average is printed beside each slice, with the cores the points got (their CPU
   seconds over the wall time: about 1 and 2 on 2 free cores). Target on 2 free cores: at least 1.7x for
   points of 1 s or more (the pool's start-up, once per slice, is counted against it).
2. Start-up and per-point overhead: the seconds until a fresh pool answers its first
   point; then trivial points (they return at once) on the serial executor and on a
   pool, batched as the driver batches them and one point per batch: wall time per
   point, pool start-up and store writes included.
3. Streaming: 100,000 trivial points; seconds from the command's start (planning and
   keys included) to the first result stored, and to the last.

Every sweep writes to a fresh store in a temporary directory.

Usage:  python benchmarks/sweep.py [--points 200] [--point-seconds 1.0] [--rounds 4] [--skip-speedup]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cloudtwin.store.database import Store
from cloudtwin.sweep import Plan, PoolExecutor, SerialExecutor, Task, parse_vary, run_points
from cloudtwin.sweep.executors import Executor, points_job

SCENARIO = "name: sweep-benchmark\n"


class Trivial(Task):
    """A point that does nothing but return its seed."""

    def __call__(self, overrides: Sequence[str]) -> dict[str, Any]:
        return {"seed": int(overrides[0].split("=")[1])}


class Busy(Task):
    """A point that spins the CPU for a fixed number of loop iterations."""

    loops: int = 0

    def __call__(self, overrides: Sequence[str]) -> dict[str, Any]:
        cpu = time.process_time()
        total = 0
        for i in range(self.loops):
            total += i * i % 7
        return {"seed": int(overrides[0].split("=")[1]), "total": total, "cpu_s": time.process_time() - cpu}


def busy_task(seconds: float) -> Busy:
    """A Busy task calibrated (in this process, on CPU time) to use `seconds` of CPU per point
    or more: the loop count is taken from the fastest of five probes, so a probe slowed by
    other work on the machine does not make the points shorter than asked."""
    probe = Busy(SCENARIO, "<benchmark>", "run")
    object.__setattr__(probe, "loops", 2_000_000)
    per_loop = min(probe(["seed=0"])["cpu_s"] for _ in range(5)) / 2_000_000
    task = Busy(SCENARIO, "<benchmark>", "run", sets=(f"name=busy-{seconds}",))
    # a quarter more: a loop's CPU time varies by about that much between points when
    # other work shares the cores' caches, and the points must not be shorter than asked
    object.__setattr__(task, "loops", int(1.25 * seconds / per_loop))
    return task


def sweep(task: Task, points: int, executor: Executor, folder: Path, name: str, target_s: float = 0.1,
          first: int = 1) -> tuple[float, Any]:
    start = time.perf_counter()
    plan = Plan((parse_vary(f"seed={first}..{first + points - 1}"),))
    keyed = plan.points(task.digest)
    with Store(folder / f"{name}.duckdb") as store:
        run = run_points(keyed, task, store, executor, "benchmark", target_batch_s=target_s)
    return time.perf_counter() - start, run


def point_cpu_seconds(db: Path) -> list[float]:
    """The CPU seconds each stored point reported."""
    with Store(db) as store:
        _, rows = store.query("SELECT json_extract(result, '$.cpu_s')::DOUBLE FROM sweep_points")
    return [float(row[0]) for row in rows]


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def speedup(points: int, seconds: float, rounds: int, folder: Path) -> None:
    task = busy_task(seconds)
    legs = {"serial": (lambda: SerialExecutor()), "pool of 2": (lambda: PoolExecutor(2))}
    wall = dict.fromkeys(legs, 0.0)
    cpu: dict[str, list[float]] = {leg: [] for leg in legs}
    size = -(-points // rounds)
    print(f"speed-up: {points} points of >= {seconds:g} CPU s ({task.loops:,} loops), serial against a "
          f"pool of 2 workers, in {rounds} slices of {size} (load average 1/5/15 min: {load()})")
    for slice_no, first in enumerate(range(1, points + 1, size)):
        count = min(size, points - first + 1)
        order = list(legs) if slice_no % 2 == 0 else list(reversed(legs))
        line = []
        for leg in order:
            name = f"speedup-{leg.replace(' ', '')}-{slice_no}"
            took, run = sweep(task, count, legs[leg](), folder, name, first=first)
            assert run.executed == count, run.to_json()
            wall[leg] += took
            cpu[leg] += point_cpu_seconds(folder / f"{name}.duckdb")
            line.append(f"{leg} {took:.1f} s (load {load()})")
        print(f"  slice {slice_no + 1}: points {first}-{first + count - 1}: " + ", ".join(line))
    every = cpu["serial"] + cpu["pool of 2"]
    print(f"  CPU seconds per point: min {min(every):.2f}, mean {statistics.fmean(every):.2f}, "
          f"max {max(every):.2f}")
    # the points' CPU seconds over the wall time: about 1 and 2 on 2 free cores; less
    # says how much of the machine other work took, and bounds the speed-up
    print(f"  cores the points got: serial {sum(cpu['serial']) / wall['serial']:.2f}, "
          f"pool of 2 {sum(cpu['pool of 2']) / wall['pool of 2']:.2f}")
    ratio = wall["serial"] / wall["pool of 2"]
    print(f"speed-up: serial {wall['serial']:.1f} s, pool of 2 {wall['pool of 2']:.1f} s: {ratio:.2f}x "
          f"(target >= 1.7x on 2 free cores; load average now {load()})")


def overhead(points: int, folder: Path) -> None:
    task = Trivial(SCENARIO, "<benchmark>", "run")
    start = time.perf_counter()
    executor = PoolExecutor(2)
    executor.start(points_job(task))
    executor.submit(0, [("seed=1",)])
    while not executor.finished(0.01):
        pass
    print(f"start-up: a local pool of 2 workers answers its first point after "
          f"{time.perf_counter() - start:.2f} s")
    executor.close()
    cases = [
        ("serial, batched", SerialExecutor(), 0.1),
        ("pool of 2, batched", PoolExecutor(2), 0.1),
        ("pool of 2, one point per batch", PoolExecutor(2), 0.0),
    ]
    for label, executor, target in cases:
        wall, run = sweep(task, points, executor, folder, label.replace(" ", "-").replace(",", ""), target)
        print(f"overhead: {points:,} trivial points, {label}: {wall:.2f} s, "
              f"{wall / points * 1e3:.3f} ms per point, {run.batches:,} batches")


def streaming(points: int, folder: Path) -> None:
    task = Trivial(SCENARIO, "<benchmark>", "run", sets=("name=streaming",))
    wall, run = sweep(task, points, PoolExecutor(2), folder, "streaming")
    planning = wall - run.seconds
    first = planning + (run.first_result_s or float("nan"))
    print(f"streaming: {points:,} trivial points on a pool of 2: first result after {first:.2f} s "
          f"(planning {planning:.2f} s; target < 5 s), all {run.executed:,} stored after {wall:.1f} s")


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--points", type=int, default=200, help="points in the speed-up sweep")
    parser.add_argument("--point-seconds", type=float, default=1.0, help="CPU seconds per point")
    parser.add_argument("--rounds", type=int, default=4, help="slices the speed-up sweep alternates over")
    parser.add_argument("--trivial", type=int, default=2000, help="points in the overhead sweeps")
    parser.add_argument("--stream", type=int, default=100_000, help="points in the streaming sweep")
    parser.add_argument("--skip-speedup", action="store_true", help="only overhead and streaming")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
          "(other work on the machine slows the 2-worker case most)")
    with tempfile.TemporaryDirectory(prefix="cloudtwin-sweep-bench-") as tmp:
        folder = Path(tmp)
        overhead(args.trivial, folder)  # first: the pool's start-up is measured cold
        if not args.skip_speedup:
            speedup(args.points, args.point_seconds, args.rounds, folder)
        streaming(args.stream, folder)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
