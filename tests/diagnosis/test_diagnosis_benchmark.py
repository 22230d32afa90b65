"""benchmarks/diagnosis.py runs end to end on a few incidents (its figures are not checked
here), and in single-fault incidents the failed component ranks above the components it
took down: a switch above its cables, a gateway above its cables and its WAN edge, a WAN
link above the WAN edges, a NIC above its leaf."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.cli.cli_helpers import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import diagnosis as bench  # noqa: E402


def test_the_benchmark_runs_and_reports_every_table(tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/diagnosis.py", "--incidents", "2", "--quiet", "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    for header in ("| K |", "| fault kind |", "| cloud |", "time per incident"):
        assert header in done.stdout
    result = json.loads(out.read_text())
    assert [len(d["faults"]) for d in result["details"]] == [1, 2]
    truth = {f["component"] for d in result["details"] for f in d["faults"]}
    assert truth  # the ground truth is the injected faults, named as the diagnosis names them


def _single(kind: str, component: str, below: tuple[str, ...], site: str | None, spec: dict) -> bench.Fault:
    return bench.Fault(kind, component, below, site, spec)


SINGLE = [
    _single(
        "switch",
        "south.spine1",
        (
            "south.leaf0-south.spine1",
            "south.leaf1-south.spine1",
            "south.leaf2-south.spine1",
            "south.leaf3-south.spine1",
        ),
        "south",
        {"kind": "switch", "target": "spine1", "at": "0.3s", "until": "0.9s"},
    ),
    _single(
        "gateway",
        "north.gw0",
        ("north.leaf3-north.gw0", "north.gw0-north.wan", "north.wan"),
        None,
        {"site": "north", "at": "0.2s", "until": "1.5s"},
    ),
    _single(
        "wan-cut",
        "north.wan-south.wan",
        ("north.wan", "south.wan"),
        None,
        {"between": ["north", "south"], "at": "0.4s", "until": "0.8s"},
    ),
    _single(
        "nic",
        "north.host5/nic0",
        ("north.leaf1",),
        "north",
        {"kind": "nic", "target": "host5/nic0", "at": "0.5s", "until": "1s"},
    ),
]


@pytest.mark.parametrize("fault", SINGLE, ids=[f.kind for f in SINGLE])
def test_the_failed_component_ranks_above_what_it_took_down(fault: bench.Fault) -> None:
    data = bench.pair()
    bench._inject(data, fault)
    ranked, _ = bench.run_incident(data, 30)
    rank = {c: i for i, c in enumerate(ranked)}
    assert rank[fault.component] == 0, ranked[:5]
    assert all(rank.get(b, 99) > rank[fault.component] for b in fault.below)
