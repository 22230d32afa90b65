"""docs/calibrate.md: its commands run (the measuring ones parse; they run for real in the
root and QEMU tests), and every figure it quotes is what the shipped profiles give now."""

from __future__ import annotations

import json
import re
import shlex

import typer
from tests.cli.cli_helpers import REPO, cloudtwin
from tests.test_docs import console_commands

from cloudtwin.cli.app import app
from cloudtwin.cli.calibrate import datapath_rows, migration_rows
from cloudtwin.mobility.check import grade, summary

DOC = REPO / "docs" / "calibrate.md"
TEXT = " ".join(DOC.read_text().split())
MIGRATION = json.loads((REPO / "examples" / "profiles" / "qemu-tcg-loopback.json").read_text())
PREALLOC = json.loads((REPO / "examples" / "profiles" / "qemu-tcg-prealloc.json").read_text())
SECOND = json.loads((REPO / "examples" / "profiles" / "qemu-tcg-loopback-2.json").read_text())
THIRD = json.loads((REPO / "examples" / "profiles" / "qemu-tcg-loopback-3.json").read_text())
QUIET = json.loads((REPO / "examples" / "profiles" / "qemu-tcg-quiet.json").read_text())
QUIET_PREALLOC = json.loads((REPO / "examples" / "profiles" / "qemu-tcg-prealloc-quiet.json").read_text())
DATAPATH = json.loads((REPO / "src" / "cloudtwin" / "smartnic" / "data" / "linux-kernel.json").read_text())


def test_console_commands_run() -> None:
    commands = console_commands(DOC)
    assert len(commands) == 10  # the page's opening command, then the nine of its sections
    for command in commands:
        done = cloudtwin(*shlex.split(command)[1:])
        assert done.returncode == 0, f"{command}\n{done.stderr}"
        assert done.stdout.strip()


def test_measuring_commands_parse() -> None:
    shown = re.findall(r"^(?:sudo )?(cloudtwin calibrate \S+ .*)$", DOC.read_text(), re.M)
    assert len(shown) == 2
    group = typer.main.get_command(app)
    for line in shown:
        words = shlex.split(line)[1:]
        command = group.commands["calibrate"].commands[words[1]]  # type: ignore[attr-defined]
        assert command.make_context(words[1], words[2:]).params["out"].name.endswith(".json")


def test_the_quoted_datapath_points_are_the_check() -> None:
    held = [r for r in datapath_rows(DATAPATH, "x") if r["held_out"]]
    for row in held:
        assert f"{row['measured_pps_per_core']:,.0f}" in TEXT
        assert f"{row['predicted_pps_per_core']:,.0f}" in TEXT
        assert f"({row['error']:+.1%})".replace("%", " %") in TEXT


def _migration_quotes(profile: dict[str, object]) -> None:
    """The page quotes `profile`'s check as it prints now: the summary, the same plans
    without the profile, the load it was measured under, its first-time rate and each
    migration that missed a target (by its memory/working set/dirty rate/cap)."""
    rows, totals = migration_rows(profile, "x")
    assert (f"**{totals['met_every_target']} of its {totals['migrations']} held-out migrations meet every "
            f"target** ({totals['classified_right']} of 10 classified right; of the {totals['compared']} "
            f"that both converged, total time {totals['total_time_within_15pct']}, bytes "
            f"{totals['bytes_within_15pct']} and downtime {totals['downtime_within_bound']} within their "
            "bounds)") in TEXT
    before = summary(grade(profile["held_out"], None))
    assert (f"meet **{before['met_every_target']} of 10** (downtime **{before['downtime_within_bound']} of "
            f"{before['compared']}**)") in TEXT
    loads = profile["load_average"]
    assert isinstance(loads, dict)
    low, high = min(loads["fit"][0], loads["held_out"][0]), max(loads["fit"][1], loads["held_out"][1])
    assert f"between {low:.1f} and {high:.1f}" in TEXT
    parameters = profile["parameters"]
    assert isinstance(parameters, dict)
    assert f"largest pauses: {parameters['final_bandwidth_bps'] / 8e6:.0f} MB/s" in TEXT
    for row in rows:
        trial = row["plan"]
        if not row["met"]:
            shown = "/".join(str(trial[k]).removesuffix("MiB/s").removesuffix("MiB")
                             for k in ("memory", "working_set", "dirty_rate", "max_bandwidth"))
            assert shown in TEXT, shown


def test_the_quoted_migration_checks_are_the_shipped_profiles() -> None:
    _migration_quotes(MIGRATION)
    _migration_quotes(SECOND)
    _migration_quotes(THIRD)
    _migration_quotes(PREALLOC)
    _migration_quotes(QUIET)
    _migration_quotes(QUIET_PREALLOC)


def test_before_and_after_table_is_fresh() -> None:
    plans = [c for c in console_commands(DOC) if c.startswith("cloudtwin migrate plan")]
    assert len(plans) == 2
    first = MIGRATION["held_out"][0]["measured"]
    rows = [f"| QEMU | {first['total_time_s']:.3f} | {first['downtime_s'] * 1e3:.1f} | "
            f"{first['bytes'] / 1e6:.1f} |"]
    for label, command in zip(("flags alone", "with the profile"), plans, strict=True):
        done = cloudtwin(*shlex.split(command)[1:], "--json")
        plan = json.loads(done.stdout)
        rows.append(f"| {label} | {plan['total_time_s']:.3f} | {plan['downtime_s'] * 1e3:.1f} | "
                    f"{plan['bytes'] / 1e6:.1f} |")
    for row in rows:
        assert row in DOC.read_text(), row
