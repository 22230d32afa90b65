"""benchmarks/linux_datapath.py (shown in docs/smartnic.md) runs end to end: a short run
writes a profile that the `linux-kernel` loader reads. Its figures are the benchmark's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cloudtwin.smartnic.profiles import linux_kernel_profile

REPO = Path(__file__).resolve().parents[2]
TOOLS = ("ip", "nft", "tc", "trafgen", "taskset")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)"),
    pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS),
                       reason="needs trafgen and nftables (sudo make datapath-tools)"),
]


def test_a_short_run_writes_a_profile_the_loader_reads(tmp_path: Path) -> None:
    out = tmp_path / "linux-kernel.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/linux_datapath.py", "--seconds", "0.3", "--rounds", "1",
         "--out", str(out), "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert set(result["functions"]) == {"overlay", "security-groups", "conntrack", "rate-limiter"}
    assert [row["configuration"] for row in result["held_out"]] == ["whole chain, 512 B", "whole chain, mix"]
    assert all(row["measured_pps_per_core"] > 0 for row in result["held_out"])
    profile = linux_kernel_profile(out)
    assert profile.host.clock_hz == result["machine"]["clock_hz"]
    assert subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.count("ctdp-") == 0
