"""Live migrations as a job of the three-fold evaluation: each strategy, without and with the faults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli.cli_helpers import cloudtwin

from cloudtwin.evaluation.evaluate import evaluate
from cloudtwin.evaluation.report import render_html, render_markdown, results
from cloudtwin.scenario import load_scenario
from cloudtwin.twin import run_migrations

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "migration.yaml"
STRATEGIES = ["ecmp", "pinning"]


@pytest.fixture(scope="module")
def evaluation():
    return evaluate(load_scenario(EXAMPLE.read_text()), STRATEGIES)


def test_each_strategy_runs_the_migrations_as_migrate_run_does(evaluation) -> None:
    scenario = load_scenario(EXAMPLE.read_text())
    for outcome, spec in zip(evaluation.outcomes, STRATEGIES, strict=True):
        with_spec = [f"routing.strategy={spec}"]
        clean = run_migrations(load_scenario(EXAMPLE.read_text(), overrides=[*with_spec, "faults=[]"]))
        hit = run_migrations(load_scenario(EXAMPLE.read_text(), overrides=with_spec))
        assert outcome.migrations is not None
        assert list(outcome.migrations) == [vm.name for vm in scenario.mobility.vms]
        for base, faulted in zip(clean.migrations, hit.migrations, strict=True):
            row = outcome.migrations[base.vm]
            assert row.total_time_s == base.total_time_s
            assert row.downtime_s == base.downtime_s
            assert row.bytes == base.bytes and row.rounds == base.rounds
            assert row.faulted_total_time_s == faulted.total_time_s
            assert row.faulted_downtime_s == faulted.downtime_s
            assert row.path_events == list(faulted.path_events)
            assert row.slowdown == faulted.total_time_s / base.total_time_s


def test_the_cut_cable_slows_a_migration_whose_path_it_carries(evaluation) -> None:
    # the scenario cuts leaf0-spine0 from 1 s to 3 s while both VMs (on leaf 0) stream
    ecmp = evaluation.outcomes[0].migrations
    assert ecmp is not None
    assert all(m.converged and m.faulted_converged for m in ecmp.values())
    assert max(m.slowdown for m in ecmp.values()) > 1.0


def test_reports_carry_the_migrations_table(evaluation) -> None:
    document = results(evaluation).to_json()
    assert set(document["strategies"]["pinning"]["migrations"]) == {"web1", "cache1"}
    markdown = render_markdown(results(evaluation))
    assert "## Live migrations (without / with the faults)" in markdown
    web1 = document["strategies"]["ecmp"]["migrations"]["web1"]
    assert f"| ecmp | web1 | {web1['total_time_s']:.3f} | {web1['faulted_total_time_s']:.3f} |" in markdown
    assert "<h2>Live migrations (without / with the faults)</h2>" in render_html(results(evaluation))


def test_a_scenario_without_migrations_has_no_migrations_section() -> None:
    text = EXAMPLE.read_text().split("mobility:")[0]
    typed = results(evaluate(load_scenario(text), ["ecmp"]))
    assert "migrations" not in typed.to_json()["strategies"]["ecmp"]
    assert "Live migrations" not in render_markdown(typed)


def test_collective_jobs_run_beside_migrations_on_the_same_run() -> None:
    # refused until the migrations became a driver of the jobs' own run
    text = EXAMPLE.read_text().replace(
        "workload: {kind: perftest, pattern: all-to-all, size: 2GiB}",
        "workload: {kind: collective, op: allreduce, size: 64MiB}",
    )
    scenario = load_scenario(text)
    (outcome,) = evaluate(scenario, ["ecmp"]).outcomes
    assert outcome.migrations is not None and set(outcome.migrations) == {"web1", "cache1"}
    alone = {m.vm: m for m in run_migrations(scenario.model_copy(update={"faults": ()})).migrations}
    for vm, row in outcome.migrations.items():
        assert row.total_time_s == alone[vm].total_time_s


def test_cli_evaluate_json_has_the_migrations() -> None:
    done = cloudtwin("evaluate", str(EXAMPLE), "--strategies", "ecmp", "--no-store", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["strategies"]["ecmp"]["migrations"]
    assert {vm: row["converged"] for vm, row in rows.items()} == {"web1": True, "cache1": True}
