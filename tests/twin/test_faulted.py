"""`evaluate` and `diagnose` read one faulted run: the same flows, repairs and engine result."""

from __future__ import annotations

import numpy as np
import pytest
from tests.cli.cli_helpers import REPO

from cloudtwin.evaluation.evaluate import evaluate
from cloudtwin.evaluation.usecases import BUILTIN_STRATEGIES
from cloudtwin.scenario.loader import load_scenario
from cloudtwin.twin import simulate_faulted

EXAMPLE = REPO / "examples" / "diagnose.yaml"


@pytest.mark.parametrize("install", ["rules", "source-port"])
def test_diagnose_runs_the_faulted_run_that_evaluate_reports(install: str) -> None:
    scenario = load_scenario(EXAMPLE.read_text(), str(EXAMPLE), [f"reaction.pinning_install={install}"])
    evaluation = evaluate(scenario, list(BUILTIN_STRATEGIES))
    for outcome in evaluation.outcomes:
        # what `cloudtwin diagnose` simulates: the scenario with routing.strategy set
        routing = scenario.routing.model_copy(update={"strategy": outcome.spec})
        chosen = scenario.model_copy(update={"routing": routing})
        run = simulate_faulted(chosen)
        assert run.strategy == outcome.name
        assert np.array_equal(run.result.start_s, outcome.faulted.start_s), outcome.name
        assert np.array_equal(run.result.finish_s, outcome.faulted.finish_s), outcome.name
        assert run.result.completion_s == outcome.resiliency.completion_s
        moved = [(r.phase, r.moved_s, r.flows, r.rules_changed) for r in run.plan.repairs]
        reported = [
            (r.phase, r.moved_s, r.flows, r.rules_changed) for r in outcome.resiliency.repairs
        ]
        assert moved == reported, outcome.name


def test_source_port_pinning_is_repaired_by_the_switches_before_the_controller() -> None:
    sets = ["routing.strategy=pinning", "reaction.pinning_install=source-port"]
    scenario = load_scenario(EXAMPLE.read_text(), str(EXAMPLE), sets)
    run = simulate_faulted(scenario)
    phases = [r.phase for r in run.plan.repairs]
    assert phases[0] == "local repair" and "controller" in phases
    assert run.reaction == "controller"
