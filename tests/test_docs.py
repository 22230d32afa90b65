"""Every command shown in the README and docs/routing.md runs, and the doc's table is current."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from tests.cli.cli_helpers import REPO, cloudtwin, run_documented

DOCS = [
    REPO / "README.md", REPO / "docs" / "routing.md", REPO / "docs" / "smartnic.md",
    REPO / "docs" / "cloud-reference.md",
]


def console_commands(path: Path) -> list[str]:
    """Lines starting with `$ ` inside ```console blocks."""
    commands, inside = [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            inside = line.strip() == "```console"
            continue
        if inside and line.startswith("$ "):
            commands.append(line[2:])
    return commands


CASES = [(doc.name, command) for doc in DOCS for command in console_commands(doc)]


def test_docs_show_commands() -> None:
    assert len(CASES) >= 5


@pytest.mark.parametrize(("doc", "command"), CASES)
def test_documented_command_runs(tmp_path: Path, doc: str, command: str) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    (tmp_path / "src").symlink_to(REPO / "src")  # the shipped profiles a doc checks
    done = run_documented(command, tmp_path)
    assert done.returncode == 0, f"{doc}: {command}\n{done.stderr}"
    assert done.stdout.strip()


def test_routing_doc_table_matches_fresh_output() -> None:
    done = cloudtwin("compare", "examples/leaf-spine-perftest.yaml", "--json")
    result = json.loads(done.stdout)
    text = (REPO / "docs" / "routing.md").read_text()
    rows = re.findall(
        r"^\| (ecmp|ecmp-qp|adaptive|spray|pinning)" + r" \| ([\d.]+)" * 4 + r" \| ([\d.]+)x \|$",
        text,
        re.M,
    )
    assert [r[0] for r in rows] == ["ecmp", "ecmp-qp", "adaptive", "spray", "pinning"]
    for name, util, aggregate, low, completion, ratio in rows:
        fresh = result["results"][name]
        assert util == f"{fresh['utilization']:.3f}"
        assert aggregate == f"{fresh['aggregate_gbps']:.1f}"
        assert low == f"{fresh['per_flow_gbps']['min']:.2f}"
        assert completion == f"{fresh['completion_s'] * 1e3:.3f}"
        assert ratio == f"{result['ratios'][name]:.2f}"


def test_engine_doc_benchmark_command_runs() -> None:
    documented = console_commands(REPO / "docs" / "engine.md")
    commands = [c for c in documented if c.startswith("python benchmarks/engine.py")]
    assert commands  # the other commands there: tests/engine/test_engine_doc.py
    for command in commands:
        words = shlex.split(command)
        done = subprocess.run(
            [sys.executable, *words[1:]], cwd=REPO, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr
        assert "100,000" not in done.stdout and "2,000 Poisson flows" in done.stdout
        assert "peak" in done.stdout


PAGES = sorted((REPO / "docs").glob("*.md"))


def _opening(path: Path) -> list[str]:
    """The commands of a page's first ```console block, if it comes before the first section."""
    text = path.read_text()
    head = text.split("\n## ", 1)[0]
    block = re.search(r"```console\n(.*?)```", head, re.S)
    return [line[2:] for line in block.group(1).splitlines() if line.startswith("$ ")] if block else []


def test_every_docs_page_opens_with_a_command() -> None:
    assert len(PAGES) >= 15
    missing = [p.name for p in PAGES if not _opening(p)]
    assert missing == [], f"pages without a command before their first section: {missing}"
    # ... after saying what the page is for: prose between the title and that command
    intro = {p.name: p.read_text().split("```console", 1)[0].split("\n", 1)[1].strip() for p in PAGES}
    unsaid = [name for name, text in intro.items() if len(text) < 80]
    assert unsaid == [], f"pages whose command comes before what they are for: {unsaid}"


def test_no_page_speaks_of_issue_numbers() -> None:
    for path in [*PAGES, REPO / "README.md"]:
        assert not re.search(r"issue [0-9]", path.read_text(), re.I), path.name


@pytest.mark.slow
@pytest.mark.parametrize("page", [p.name for p in PAGES])
def test_a_page_opening_command_runs_from_a_clone(tmp_path: Path, page: str) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    for command in _opening(REPO / "docs" / page):
        if command.startswith("python "):
            words = shlex.split(command)
            done = subprocess.run(
                [sys.executable, *words[1:]], cwd=REPO, capture_output=True, text=True, timeout=600
            )
        else:
            done = run_documented(command, tmp_path)
        assert done.returncode == 0, f"{page}: {command}\n{done.stderr}"
