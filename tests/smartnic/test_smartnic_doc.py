"""docs/smartnic.md: its Vela table and storm figures are what the tool prints now."""

from __future__ import annotations

import json
import re

import pytest
from tests.cli.cli_helpers import REPO, cloudtwin

DOC = (REPO / "docs" / "smartnic.md").read_text()
PIPELINE_ONLY = "nic.functions=[{name: overlay}, {name: security-groups}, {name: rate-limiter}]"
ROWS = {
    "`software-vswitch` (all on host)": ["--set", "nic.profile=software-vswitch"],
    "`janus-100g` (conntrack on NIC cores)": ["--set", "nic.profile=janus-100g"],
    "`janus-100g`, chain without conntrack, all in the pipeline": [
        "--set",
        "nic.profile=janus-100g",
        "--set",
        PIPELINE_ONLY,
    ],
}


def _row(label: str) -> list[str]:
    line = next(line for line in DOC.splitlines() if line.startswith(f"| {label} |"))
    return [cell.strip() for cell in line.strip("|").split("|")][1:]


@pytest.mark.parametrize("label", ROWS)
def test_vela_offload_row_matches_fresh_output(label: str) -> None:
    done = cloudtwin("nic", "offload", "examples/vela.yaml", *ROWS[label], "--json")
    host = json.loads(done.stdout)["hosts"]["host0"]
    gbps, cores, without, _ = _row(label)
    assert gbps == f"{host['throughput_gbps']:,.1f} Gbps"
    assert cores == f"{host['host_cores']:.1f}"
    assert without == f"{host['host_cores_without_offload']:.1f}"


@pytest.mark.slow
@pytest.mark.parametrize("label", ROWS)
def test_vela_training_column_matches_fresh_output(label: str) -> None:
    done = cloudtwin("train", "examples/vela.yaml", *ROWS[label], "--json")
    assert _row(label)[-1] == f"{json.loads(done.stdout)['iteration_s']:.2f} s"


def test_storm_sentence_matches_fresh_output() -> None:
    storm = json.loads(cloudtwin("nic", "offload", "examples/smartnic.yaml", "--json").stdout)["storm"]
    found = re.search(
        r"puts (\d+)% of new flows on the slow path, throughput dips from ([\d.]+) to ([\d.]+) Gbps, "
        r"and it\s+recovers ([\d.]+) ms after the storm",
        DOC,
    )
    assert found is not None
    share, before, low, recovery = found.groups()
    assert share == f"{storm['steady_slow_path_share']:.0%}".rstrip("%")
    assert (before, low) == (f"{storm['baseline_gbps']:.1f}", f"{storm['minimum_gbps']:.1f}")
    assert recovery == f"{storm['recovery_s'] * 1e3:.1f}"
