"""benchmarks/sweep.py runs end to end on a few short points (its figures are not checked
here: speed is the benchmark's to print, not a test's to time)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from tests.cli.cli_helpers import REPO

pytestmark = pytest.mark.slow


def test_the_sweep_benchmark_runs_small() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/sweep.py", "--points", "4", "--point-seconds", "0.1", "--rounds", "2",
         "--trivial", "50", "--stream", "500"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert len(re.findall(r"^  slice \d: points \d-\d: (serial|pool of 2) [\d.]+ s \(load ", out, re.M)) == 2
    # each point used the CPU it was calibrated for (CPU time, so the machine's load does not matter)
    low = re.search(r"CPU seconds per point: min ([\d.]+), mean ([\d.]+)", out)
    assert low and float(low.group(1)) >= 0.05, out
    assert re.search(r"cores the points got: serial [\d.]+, pool of 2 [\d.]+", out), out
    assert re.search(r"^speed-up: serial [\d.]+ s, pool of 2 [\d.]+ s: [\d.]+x", out, re.M), out
    assert "streaming: 500 trivial points" in out
