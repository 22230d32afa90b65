"""docs/engine.md: its flow-list command runs, and its SimGrid command where SimGrid is built."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from tests.cli.cli_helpers import REPO, run_documented
from tests.test_docs import console_commands

DOC = REPO / "docs" / "engine.md"
COMMANDS = console_commands(DOC)
SIMGRID = Path(os.environ.get("SIMGRID_VENV", REPO / ".simgrid-venv"))


def test_every_command_is_covered() -> None:
    kinds = {"python benchmarks/engine.py", "python benchmarks/vs_simgrid.py", "cloudtwin run"}
    assert all(any(c.startswith(k) for k in kinds) for c in COMMANDS)
    assert any(c.startswith("cloudtwin run") for c in COMMANDS)
    assert any(c.startswith("python benchmarks/vs_simgrid.py") for c in COMMANDS)


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.startswith("cloudtwin")])
def test_documented_cloudtwin_command_runs(tmp_path: Path, command: str) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    done = run_documented(command, tmp_path)
    assert done.returncode == 0, done.stderr
    words = shlex.split(command)
    written = words[words.index("--flows-out") + 1]
    assert f"1,000 flows written to {written}" in done.stdout
    assert (tmp_path / written).stat().st_size > 0


@pytest.mark.slow
@pytest.mark.skipif(not (SIMGRID / "bin" / "python").exists(), reason="SimGrid not built (make simgrid)")
@pytest.mark.parametrize("command", [c for c in COMMANDS if c.startswith("python benchmarks/vs_simgrid.py")])
def test_documented_simgrid_comparison_runs(command: str) -> None:
    words = shlex.split(command)
    done = subprocess.run([sys.executable, *words[1:]], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "K = 1,000: cloudtwin" in done.stdout and "SimGrid Full:" in done.stdout
    assert "makespan 3.040004000 s" in done.stdout
