"""`cloudtwin evaluate` and `cloudtwin results` end to end, and the report in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.cli.cli_helpers import REPO, cloudtwin

RESILIENCY = str(REPO / "examples" / "resiliency.yaml")
ACCEPTANCE = str(REPO / "examples" / "routing-strategies.yaml")
CHROMIUM = "/usr/bin/chromium"
BUILTINS = ["ecmp", "ecmp-qp", "adaptive", "spray", "pinning"]


def test_evaluate_writes_the_report_and_stores_the_run(tmp_path: Path) -> None:
    done = cloudtwin(
        "evaluate",
        RESILIENCY,
        "--strategies",
        "ecmp,pinning",
        "--out",
        "rep",
        "--db",
        "t.duckdb",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    for name in ("report.html", "report.md", "results.json"):
        assert (tmp_path / "rep" / name).stat().st_size > 0
    assert "All techniques are resilient:" in done.stdout and "Recommendation:" in done.stdout
    document = json.loads((tmp_path / "rep" / "results.json").read_text())
    assert list(document["strategies"]) == ["ecmp", "pinning"]
    listed = cloudtwin("results", "list", "--db", "t.duckdb", "--json", cwd=tmp_path)
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [1]
    shown = json.loads(cloudtwin("results", "show", "1", "--db", "t.duckdb", "--json", cwd=tmp_path).stdout)
    assert shown["strategies"] == document["strategies"]
    # 16 hosts x 2 QPs (t1) + 16 hosts x 1 QP (t2) per strategy
    assert shown["flow_rows"] == 2 * (32 + 16)
    table = cloudtwin("results", "show", "1", "--db", "t.duckdb", cwd=tmp_path)
    assert table.returncode == 0 and "pinning" in table.stdout


def test_json_is_the_only_output_and_no_store_without_out_writes_nothing(tmp_path: Path) -> None:
    done = cloudtwin("evaluate", RESILIENCY, "--strategies", "ecmp", "--no-store", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["run_id"] is None and document["scenario"] == "resiliency"
    assert list(tmp_path.iterdir()) == [] and done.stderr == ""  # no ./evaluation-resiliency/


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["evaluate", RESILIENCY, "--strategies", "ecmp,nope"], "unknown strategy 'nope'"),
        (["evaluate", RESILIENCY, "--strategies", "ecmp,pinning,ecmp"], "ecmp named twice"),
        (["evaluate", RESILIENCY, "--set", "faults.0.target=leaf99-spine0"], "faults.0.target"),
        (["evaluate", RESILIENCY, "--set", "faults.1.until=1ms"], "faults.1"),
        (["evaluate", RESILIENCY, "--set", "workloads.0.tenants=nobody"], "workloads.0.tenants"),
        (["evaluate", "missing.yaml"], "no such scenario file"),
        (["results", "show", "9", "--db", "t.duckdb"], "no store there yet"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    done = cloudtwin(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_help_shows_an_example() -> None:
    for args in (["evaluate", "--help"], ["results", "--help"], ["results", "show", "--help"]):
        done = cloudtwin(*args)
        assert done.returncode == 0 and "Example:" in done.stdout


@pytest.fixture(scope="module")
def acceptance_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The acceptance run: all five strategies and a user strategy on the shipped example."""
    out = tmp_path_factory.mktemp("acceptance")
    strategies = ",".join([*BUILTINS, "user_strategy:LowestSpine"])
    done = cloudtwin(
        "evaluate",
        ACCEPTANCE,
        "--strategies",
        strategies,
        "--out",
        str(out),
        "--no-store",
        env={"PYTHONPATH": str(REPO / "examples")},
    )
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.slow
def test_acceptance_example_covers_every_strategy_on_three_dimensions(acceptance_report: Path) -> None:
    document = json.loads((acceptance_report / "results.json").read_text())
    assert list(document["strategies"]) == [*BUILTINS, "lowest-spine"]
    for strategy in document["strategies"].values():
        assert strategy["performance"]["busbw"]["busbw_GBps"] > 0
        assert isinstance(strategy["resiliency"]["recovered"], bool)
        assert strategy["complexity"]["score"] > 0
    assert isinstance(document["conclusions"]["all_resilient"], bool)
    assert isinstance(document["conclusions"]["pinning_fastest"], bool)
    markdown = (acceptance_report / "report.md").read_text()
    assert "lowest-spine" in markdown and "All techniques are resilient:" in markdown


@pytest.mark.slow
def test_report_opens_in_headless_chromium_and_shows_the_numbers(
    acceptance_report: Path, tmp_path: Path
) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: `make test` installs it (apt-get install -y chromium)")
    report = acceptance_report / "report.html"
    text = report.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text), "the report must work offline"
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            report.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert 'data-rendered="6 strategies"' in dom  # the inline script ran
    assert "Uncaught" not in done.stderr and "Failed to load resource" not in done.stderr
    assert dom.count("<svg") >= 6 + 3
    document = json.loads((acceptance_report / "results.json").read_text())
    for name, strategy in document["strategies"].items():
        assert f"<td>{name}</td>" in dom
        assert f"{strategy['performance']['busbw']['busbw_GBps']:.1f}" in dom
        assert f"{strategy['complexity']['score']:.2f}" in dom
        assert f"{strategy['resiliency']['dip']:.3f}" in dom
    assert document["recommendation"] in dom
    shutil.rmtree(tmp_path / "profile", ignore_errors=True)
