"""Every command in docs/diagnose.md runs (in order, in one directory), and its table is current."""

from __future__ import annotations

import json
import re
import shlex
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
    documented = re.findall(r"^\| \d+ \| .+ \|$", DOC.read_text(), re.M)
    assert documented == rows
