"""The commands that README.md and docs/service.md show for the service run as shown."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from tests.cli.cli_helpers import REPO
from tests.service.server import free_port, running_server

DOCS = [REPO / "README.md", REPO / "docs" / "service.md"]
DOCUMENTED_PORT = "8000"


def shell_commands(path: Path) -> list[str]:
    """Lines starting with `$ ` inside ```shell blocks (commands that keep running, or
    that need a running service, so tests/test_docs.py does not run them alone)."""
    commands, inside = [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            inside = line.strip() == "```shell"
            continue
        if inside and line.startswith("$ "):
            commands.append(line[2:])
    return commands


def test_the_readme_shows_the_command_and_a_screenshot() -> None:
    text = DOCS[0].read_text()
    assert "$ cloudtwin serve --db cloudtwin.duckdb --port 8000" in text
    picture = re.search(r"!\[[^]]*\]\((docs/[\w.-]+\.png)\)", text)
    assert picture and (REPO / picture.group(1)).stat().st_size > 5_000


@pytest.mark.slow
def test_documented_serve_and_curl_commands_run(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    serves = [c for doc in DOCS for c in shell_commands(doc) if c.startswith("cloudtwin serve")]
    assert serves and len(set(serves)) == 1
    curls = [c for c in shell_commands(DOCS[1]) if c.startswith("curl")]
    assert len(curls) == 3
    port = free_port()
    args = shlex.split(serves[0])[2:]
    args[args.index("--port") + 1] = str(port)
    with running_server(tmp_path / "cloudtwin.duckdb", tmp_path, args=args, port=port, cwd=tmp_path,
                        token_file=tmp_path / "cloudtwin.duckdb.token"):
        outputs = []
        for command in curls:
            line = command.replace(f":{DOCUMENTED_PORT}/", f":{port}/")
            done = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True,
                                  timeout=60)
            assert done.returncode == 0, f"{command}\n{done.stderr}"
            outputs.append(json.loads(done.stdout))
    assert outputs[0]["job_id"] == 1 and outputs[0]["kind"] == "compare"
    assert outputs[1]["job_id"] == 1 and outputs[1]["state"] in ("queued", "running", "done")
    assert outputs[2]["total"] == 0


@pytest.mark.slow
def test_documented_benchmark_runs_small() -> None:
    commands = [c for c in shell_commands(DOCS[1]) if c.startswith("python benchmarks/")]
    assert commands == ["python benchmarks/service.py"]
    words = shlex.split(commands[0])
    done = subprocess.run(
        [sys.executable, *words[1:], "--runs", "200", "--flows", "40000", "--requests", "20"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "store: 200 runs" in done.stdout and re.search(r"worst p95 [\d.]+ ms", done.stdout)
