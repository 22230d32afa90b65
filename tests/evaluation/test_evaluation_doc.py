"""docs/evaluation.md: every command runs (in order, in one directory) and its tables are current."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.cli.cli_helpers import REPO, cloudtwin, run_documented
from tests.test_docs import console_commands

from cloudtwin.evaluation.report import tradeoff_rows
from cloudtwin.evaluation.results import Results

DOC = REPO / "docs" / "evaluation.md"


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run the doc's commands one after the other, as a reader would."""
    where = tmp_path_factory.mktemp("evaluation-doc")
    (where / "examples").symlink_to(REPO / "examples")
    commands = console_commands(DOC)
    assert len(commands) >= 5
    for command in commands:
        done = run_documented(command, where)
        assert done.returncode == 0, f"{command}\n{done.stderr}"
        assert done.stdout.strip(), command
    return where


def _doc_table(header_start: str) -> list[str]:
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(line)
    return table


def _fresh_table(results: Path) -> list[str]:
    header, rows = tradeoff_rows(Results.from_json(json.loads(results.read_text())))
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(row) + " |" for row in rows
    ]


@pytest.mark.slow
def test_the_resiliency_table_matches_fresh_output(ran: Path) -> None:
    fresh = ran / "report" / "results.json"
    assert _doc_table("| strategy | aggregate Gbps") == _fresh_table(fresh)
    document = json.loads(fresh.read_text())
    # what the doc's prose says about these numbers
    verdicts = document["conclusions"]
    assert verdicts["all_resilient"] and verdicts["pinning_fastest"] and verdicts["pinning_most_complex"]
    assert document["recommendation"].startswith("pinning:")
    assert "spray (" in document["recommendation"]
    stall = {n: s["resiliency"]["max_stall_s"] for n, s in document["strategies"].items()}
    assert stall["pinning"] == pytest.approx(0.073)
    assert all(stall[n] == pytest.approx(0.25) for n in stall if n != "pinning")
    slowdown = {n: max(s["resiliency"]["job_slowdown"].values()) for n, s in document["strategies"].items()}
    assert slowdown["spray"] == max(slowdown.values())


@pytest.mark.slow
def test_the_acceptance_table_matches_fresh_output(ran: Path) -> None:
    fresh = ran / "evaluation-routing-strategies" / "results.json"
    assert _doc_table("| strategy | busbw GB/s") == _fresh_table(fresh)
    document = json.loads(fresh.read_text())
    assert document["default_faults"] is True
    text = DOC.read_text()
    for verdict in ("all_resilient", "pinning_fastest", "pinning_most_complex"):
        assert document["conclusions"][verdict] is True, verdict  # the doc says both hold
    assert re.search(r"Both conclusions hold here as well", text)


@pytest.mark.slow
def test_the_stored_run_is_listed(ran: Path) -> None:
    listed = json.loads(cloudtwin("results", "list", "--json", cwd=ran).stdout)
    assert [r["scenario"] for r in listed] == ["routing-strategies", "resiliency"]
