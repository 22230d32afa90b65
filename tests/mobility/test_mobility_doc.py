"""Every command in docs/mobility.md and docs/mobility-validation.md runs, and their QEMU and
worked-example tables are current."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from tests.cli.cli_helpers import REPO, cloudtwin
from tests.test_docs import console_commands

DOC = REPO / "docs" / "mobility.md"
VALIDATION = REPO / "docs" / "mobility-validation.md"
COMMANDS = console_commands(DOC)


def test_doc_cloudtwin_commands_run(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    commands = [c for c in COMMANDS if c.startswith("cloudtwin ")]
    assert len(commands) >= 5
    for command in commands:
        done = cloudtwin(*shlex.split(command)[1:], cwd=tmp_path)
        assert done.returncode == 0, f"{command}\n{done.stderr}"
        assert done.stdout.strip()
    assert (tmp_path / "rounds.png").stat().st_size > 0


def _python(command: str) -> subprocess.CompletedProcess[str]:
    words = shlex.split(command)
    assert words[0] == "python"
    return subprocess.run([sys.executable, *words[1:]], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_qemu_tables_are_what_the_benchmark_prints_from_the_kept_measurements() -> None:
    shown = {doc: [c for c in console_commands(doc) if "qemu_migration.py" in c] for doc in (DOC, VALIDATION)}
    # grids 1-11 and the three random grids, each replayed from its statistics
    assert len({c for commands in shown.values() for c in commands}) == 14
    assert len(shown[DOC]) == 2  # the current validation: grid 11 and the random grid of seed 9182
    for doc, commands in shown.items():
        for command in commands:
            done = _python(command)
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip() in doc.read_text(), f"{doc.name}: {command}"


def test_mobility_page_keeps_the_model_and_the_validation_page_the_history() -> None:
    text = DOC.read_text()
    assert len(text.splitlines()) < 450
    assert "## How well it predicts" in text and "(mobility-validation.md)" in text
    history = VALIDATION.read_text()
    for grid in ("Grid 4 (quiet machine)", "grid 6", "Grids 7 and 8", "seed 2112", "seed 7345"):
        assert grid in history and grid not in text


def test_worked_example_table_is_current() -> None:
    done = cloudtwin("migrate", "run", "examples/migration.yaml", "--json")
    result = json.loads(done.stdout)
    rows = [
        f"| {m['vm']} | {m['rounds']} | {m['total_time_s']:.3f} | {m['total_time_alone_s']:.3f} | "
        f"{m['downtime_s'] * 1e3:.1f} | {m['connectivity_downtime_s'] * 1e3:.1f} | {m['bytes'] / 1e9:.3f} |"
        for m in result["migrations"]
    ]
    documented = re.findall(r"^\| (?:web1|cache1) \|.+\|$", DOC.read_text(), re.M)
    assert documented == rows
    tenants = result["tenants"]
    assert f"{tenants['completion_s']:.3f} s instead of {tenants['completion_without_migrations_s']:.3f}" in (
        " ".join(DOC.read_text().split())
    )


@pytest.mark.slow
def test_scale_benchmark_command_runs() -> None:
    commands = [c for c in COMMANDS if "benchmarks/migrations.py" in c]
    assert len(commands) == 2
    for command in commands:
        done = _python(command)
        assert done.returncode == 0, done.stderr
        figures = json.loads(done.stdout)
        assert figures["migrations"] == 1000 and figures["hosts"] == 128
        if "--start-window 0" in command:
            assert figures["in_flight_max"] == 1000


def test_first_touch_command_prints_one_line_per_wait() -> None:
    commands = [c for c in COMMANDS if "benchmarks/first_touch.py" in c]
    assert commands == ["python benchmarks/first_touch.py"]
    done = _python(commands[0])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("free page reporting: ")
    touches = [line for line in lines[1:] if "first touched in" in line]
    waits = [line.split(" s,")[0].split()[-1] for line in touches]
    assert waits == ["0.0", "0.0", "0.5", "1.0", "2.0", "3.0", "5.0", "0.0"]
    for line in touches:
        assert "200 MiB (transparent huge pages)" in line and line.endswith("us per 4 KiB)")
    small = _python("python benchmarks/first_touch.py --mib 4 --waits 0 --small-pages --json")
    figures = json.loads(small.stdout)
    assert figures["mib"] == 4 and not figures["huge_pages"]
    assert [t["idle_s"] for t in figures["touches"]] == [0.0]
    assert figures["touches"][0]["us_per_page"] == pytest.approx(figures["touches"][0]["ms"] * 1e3 / 1024)


def test_placed_working_set_sentence_is_what_the_plans_say() -> None:
    plain, placed = (c for c in COMMANDS if c.startswith("cloudtwin migrate plan --memory 4GiB --dirty-rate"))
    results = [json.loads(cloudtwin(*shlex.split(c)[1:], "--json").stdout) for c in (plain, placed)]
    assert "--working-set-at last --write-order descending" in placed
    sentence = (
        f"one round fewer ({results[1]['rounds']} against {results[0]['rounds']}) and "
        f"{results[1]['bytes'] / 1e9:.3f} GB sent against {results[0]['bytes'] / 1e9:.3f}"
    )
    assert results[1]["rounds"] == results[0]["rounds"] - 1
    assert sentence in " ".join(DOC.read_text().split())
