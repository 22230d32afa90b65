"""A pause over the VM's downtime limit is flagged wherever a migration is reported:
`evaluate`'s JSON and report (as `migrate run` flags it in its notes)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.cli_helpers import cloudtwin

SCENARIO = "examples/migration.yaml"


def _evaluate(tmp_path: Path, *sets: str) -> tuple[dict[str, object], str]:
    args = [a for s in sets for a in ("--set", s)]
    done = cloudtwin(
        "evaluate", SCENARIO, "--strategies", "ecmp", "--no-store", "--out", str(tmp_path), "--json", *args
    )
    assert done.returncode == 0, done.stderr
    web1 = json.loads(done.stdout)["strategies"]["ecmp"]["migrations"]["web1"]
    return web1, (tmp_path / "report.md").read_text()


def test_a_pause_over_the_limit_is_flagged_in_the_json_and_the_report(tmp_path: Path) -> None:
    within, report = _evaluate(tmp_path / "a")
    assert within["downtime_s"] < 0.3 and not within["over_limit"]
    assert "| ecmp | web1 |" in report and "| within |" in report
    # web1 pauses 262.8 ms: a 262 ms limit is passed, without and with the faults
    over, report = _evaluate(tmp_path / "b", "mobility.migrations.0.downtime_limit=262ms")
    assert over["downtime_s"] > 0.262 and over["over_limit"] and over["faulted_over_limit"]
    row = next(line for line in report.splitlines() if line.startswith("| ecmp | web1 |"))
    assert "| OVER THE LIMIT |" in row


def test_migrate_run_json_counts_whole_bytes() -> None:
    done = cloudtwin("migrate", "run", SCENARIO, "--json")
    assert done.returncode == 0, done.stderr
    migrations = json.loads(done.stdout)["migrations"]
    counts = [m["bytes"] for m in migrations] + [r["bytes"] for m in migrations for r in m["timeline"]]
    assert counts and all(isinstance(c, int) for c in counts)
    # whole bytes, and the rounds still add up to the migration's total (to a byte per round)
    for m in migrations:
        assert abs(sum(r["bytes"] for r in m["timeline"]) - m["bytes"]) <= len(m["timeline"])
