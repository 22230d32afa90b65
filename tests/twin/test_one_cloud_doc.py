"""docs/one-cloud.md: its commands run in order in one folder, as a reader would; its tables
are what `evaluate` prints now, the run is in the store, `diagnose` ranks the failed-boot NIC
and the failed gateway in its top 3 from it, and the numbers quoted from `train` and
`nic offload` on the cloud file are what they print."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.cli.cli_helpers import REPO, run_documented
from tests.test_docs import console_commands

DOC = REPO / "docs" / "one-cloud.md"

pytestmark = pytest.mark.slow  # the walk-through (evaluate, diagnose, migrate), then the cloud run again


def test_the_walk_through_runs_and_its_tables_are_current(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    commands = console_commands(DOC)
    assert [c.split()[1] for c in commands] == ["evaluate", "results", "diagnose", "migrate", "train", "nic"]
    done = [run_documented(command, tmp_path) for command in commands]
    for command, result in zip(commands, done, strict=True):
        assert result.returncode == 0, f"{command}\n{result.stderr}"
    report = (tmp_path / "one-cloud" / "report.md").read_text().splitlines()
    rows = [line for line in DOC.read_text().splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) >= 14
    for row in rows:
        assert row in report, row
    assert "one-cloud" in done[1].stdout and "ecmp,pinning" in done[1].stdout  # the stored run
    ranked = done[2].stdout
    top = [line for line in ranked.splitlines() if re.match(r"│\d", line)]
    assert len(top) == 3
    assert "west.host7/nic0" in top[0] and "east.gw0" in top[1]
    migrations = json.loads(done[3].stdout)["migrations"]
    assert [m["vm"] for m in migrations] == ["shop", "cache"]
    assert all(m["converged"] and m["phase"] == "committed" for m in migrations)
    # the numbers the text quotes from `train` and `nic offload` on this file
    text = " ".join(DOC.read_text().split())
    iteration = re.search(r"│ iteration \(s\)\s+│\s+([\d.]+) │", done[4].stdout)
    assert iteration and f"against {float(iteration.group(1)):.2f} s alone" in text
    saved = re.findall(r"([\d.]+) handed back by offload", done[5].stdout)
    assert len(saved) == 2 and f"{saved[0]} and {saved[1]} host cores" in text
    pictures = re.findall(r"!\[[^]]*\]\(([\w.-]+\.png)\)", DOC.read_text())
    assert pictures == ["one-cloud-report.png", "one-cloud-run.png", "one-cloud-diagnosis.png"]
    assert all((DOC.parent / p).stat().st_size > 20_000 for p in pictures)


def test_each_site_logs_only_its_own_names(tmp_path: Path) -> None:
    from cloudtwin.scenario.cloud import load_cloud
    from cloudtwin.twin.cloud import run_cloud

    cloud = load_cloud((REPO / "examples" / "one-cloud.yaml").read_text())
    run = run_cloud(cloud)
    assert run.migrations is not None
    logs = run.migrations.logs
    east, west = json.dumps(logs["east"]), json.dumps(logs["west"])
    # the destination picks the host; the source never learns it
    for m in run.migrations.migrations:
        admitted = [r for r in logs["west"] if r["event"] == "admitted" and r.get("vm") == m.vm]
        assert admitted and admitted[0]["host"].startswith("west-h")
        assert admitted[0]["host"] not in east
    assert "east-h" not in west
