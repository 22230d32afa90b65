"""Every command in docs/diagnose.md runs (in order, in one directory), and its ranking tables
(one fabric, one cloud) are current."""

from __future__ import annotations

import json
import re
import shlex
from datetime import datetime
from pathlib import Path

from tests.cli.cli_helpers import REPO, cloudtwin
from tests.test_docs import console_commands

DOC = REPO / "docs" / "diagnose.md"


def test_doc_commands_run_and_the_ranking_table_is_current(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    commands = console_commands(DOC)
    assert len(commands) >= 4
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "cloudtwin"
        done = cloudtwin(*words[1:], cwd=tmp_path)
        assert done.returncode == 0, f"{command}\n{done.stderr}"
        assert done.stdout.strip()
    fresh = cloudtwin("diagnose", "--db", "diagnose.duckdb", "--json", "--top", "5", cwd=tmp_path)
    rows = [
        f"| {s['rank']} | {s['component']} | {s['kind']} | {s['score']:.3f} | "
        f"{s['tomography']:.3f} | {s['logs']:.3f} |"
        for s in json.loads(fresh.stdout)["suspects"]
    ]
    text = DOC.read_text()
    fabric, rest = text.split("## A whole cloud")
    cloud = rest.split("```\npython")[0]
    assert re.findall(r"^\| \d+ \| .+ \|$", fabric, re.M) == rows
    ranked = cloudtwin(
        "diagnose", "--db", "incident.duckdb", "--run", "one-cloud", "--json", "--top", "6", cwd=tmp_path
    )
    cloud_rows = [
        f"| {s['rank']} | {s['component']} | {s['kind']} | {s['score']:.3f} | {_window(s)} |"
        for s in json.loads(ranked.stdout)["suspects"]
    ]
    assert re.findall(r"^\| \d+ \| .+ \|$", cloud, re.M) == cloud_rows


def _window(suspect: dict[str, str | None]) -> str:
    """`12:00:01.200 - 12:00:02.050`, or `-`."""
    if not suspect["since"] or not suspect["until"]:
        return "-"
    since, until = (datetime.fromisoformat(str(suspect[k])) for k in ("since", "until"))
    return f"{since:%H:%M:%S.%f}"[:-3] + " - " + f"{until:%H:%M:%S.%f}"[:-3]
