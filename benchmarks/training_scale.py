"""How long `cloudtwin train` takes on the largest published scale: 16,384 H100 GPUs.

Runs `cloudtwin train examples/llama3-405b-h100.yaml --json` as a whole process (start-up,
scenario, fabric of 2,048 nodes, every data-parallel ring on the engine, output) several
times, pinned to one core where `taskset` exists, beside `python -c pass` in the same run,
and prints the median wall and CPU seconds of each.

    python benchmarks/training_scale.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "examples" / "llama3-405b-h100.yaml"


def _timed(command: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the child) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    cloudtwin = str(Path(sys.executable).with_name("cloudtwin"))
    commands = {
        "python -c pass": [*pin, sys.executable, "-c", "pass"],
        "cloudtwin train (16,384 H100)": [*pin, cloudtwin, "train", str(SCENARIO), "--json"],
    }
    print(f"one core: {'yes (taskset -c 0)' if pin else 'no taskset'}; load average {os.getloadavg()[0]:.1f}")
    for name, command in commands.items():
        runs = [_timed(command) for _ in range(args.runs)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"{name}: median {wall:.2f} s wall, {cpu:.2f} s CPU over {args.runs} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
