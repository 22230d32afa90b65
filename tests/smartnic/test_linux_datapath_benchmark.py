"""`cloudtwin calibrate datapath` measures for real (root, trafgen, nftables): a short run
writes a profile the loader reads and the --check path re-reads. Its figures are the
command's; on a machine without root or the tools the test skips and says why."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from tests.cli.cli_helpers import cloudtwin

from cloudtwin.cli.measure.datapath import missing
from cloudtwin.smartnic.profiles import nic_profile_from_data

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(missing() is not None, reason=f"calibrate datapath cannot measure here: {missing()}"),
]


def test_a_short_run_writes_a_profile_the_loader_reads(tmp_path: Path) -> None:
    out = tmp_path / "hosts.json"
    done = cloudtwin("calibrate", "datapath", "--seconds", "0.3", "--rounds", "1", "--out", str(out),
                     "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    held = [row for row in result["points"] if row["held_out"]]
    assert [row["configuration"] for row in held] == [
        "whole chain, 512 B (held out)", "whole chain, mix (held out)"]
    assert all(row["measured_pps_per_core"] > 0 and row["predicted_pps_per_core"] > 0 for row in held)
    written = json.loads(out.read_text())
    assert set(written["functions"]) == {"overlay", "security-groups", "conntrack", "rate-limiter"}
    assert written["provenance"]["command"][:3] == ["cloudtwin", "calibrate", "datapath"]
    assert nic_profile_from_data(written, str(out)).host.clock_hz == written["machine"]["clock_hz"]
    again = cloudtwin("calibrate", "datapath", "--check", str(out), "--json")
    assert json.loads(again.stdout)["points"] == result["points"]
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    # the command's namespaces (named after its process, which has ended) are all removed;
    # those of a measurement running at the same time have a live process
    left = [m.group(1) for m in re.finditer(r"^ctdp(\d+)-", listing, re.M)]
    assert all(Path(f"/proc/{pid}").exists() for pid in left), listing
    assert os.geteuid() == 0
