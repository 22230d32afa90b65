"""benchmarks/engine_vs.sh (named in docs/engine.md) runs: both engines, every case, alternately.
Its figures are the benchmark's to print; this only checks it runs and compares like with like."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from tests.cli.cli_helpers import REPO

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs git and a clone"
    ),
]


def test_engine_vs_runs_both_engines_on_every_case() -> None:
    done = subprocess.run(
        ["bash", "benchmarks/engine_vs.sh", "HEAD", "1", "2000"],
        cwd=REPO, capture_output=True, text=True, timeout=900,
        env={**os.environ, "PYTHON": sys.executable, "STRATEGIES": "ecmp"},
    )
    assert done.returncode == 0, done.stderr
    headers = re.findall(r"^=== (HEAD|this tree): (benchmarks/\S+ ?[^(]*)\(load ", done.stdout, re.M)
    cases = ["benchmarks/engine.py --skip-b --strategies ecmp ",
             "benchmarks/engine.py --skip-a --flows 2000 ", "benchmarks/collectives.py --strategies ecmp "]
    assert headers == [(tree, case) for case in cases for tree in ("HEAD", "this tree")], headers
    # the same model on the same revision: the same simulated results
    simulated = re.findall(r"2,000 Poisson flows.*\n.*events, ([\d,]+) full solves, ([\d.]+) ms simulated",
                           done.stdout)
    assert len(simulated) == 2 and simulated[0] == simulated[1]
    assert done.stdout.rstrip().splitlines()[-1].startswith("=== done")
