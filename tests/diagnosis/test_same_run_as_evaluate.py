# ruff: noqa: E501  (scenario text)
"""`cloudtwin diagnose` ranks from the very run `cloudtwin evaluate` reports, through the
commands themselves: same scenario, `--set seed=`, random faults (drawn from the seed)
-> the same strategy, fault set and flow completion times, for a scenario and a cloud.

Both commands run in-process; the emitter each diagnosis writes the store from is
replaced by one that keeps what it was given and stops there (no store, no ranking),
so the comparison is exact and cheap."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.cli.cli_helpers import REPO

from cloudtwin.cli.app import main

EXAMPLE = REPO / "examples" / "diagnose.yaml"
#: The shipped example with its one fault drawn from the seed instead of named.
RANDOM_FAULT = "  - {kind: random, count: 2, at: 120ms, until: 450ms}\n"


class _Stop(Exception):
    """Raised by the captured emitter: the run is known, the rest is not under test."""


def _scenario(tmp_path: Path) -> Path:
    text = EXAMPLE.read_text()
    fault = next(line for line in text.splitlines(keepends=True) if "kind: link" in line)
    path = tmp_path / "random.yaml"
    path.write_text(text.replace(fault, RANDOM_FAULT))
    return path


def test_diagnose_ranks_from_the_faulted_run_evaluate_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cloudtwin.diagnosis.usecase as diagnosis

    # the module, not the function `cloudtwin.evaluation` re-exports under its name
    three_fold = importlib.import_module("cloudtwin.evaluation.evaluate")

    seen: dict[str, Any] = {}
    real_evaluate = three_fold.evaluate

    def keep_evaluation(*args: Any, **kwargs: Any) -> Any:
        seen["evaluation"] = real_evaluate(*args, **kwargs)
        return seen["evaluation"]

    def keep_run(store: object, run: object) -> None:
        seen["run"] = run
        raise _Stop

    monkeypatch.setattr(three_fold, "evaluate", keep_evaluation)
    monkeypatch.setattr(diagnosis, "emit_run", keep_run)
    scenario = str(_scenario(tmp_path))
    sets = ["--set", "seed=8"]
    code = main(["evaluate", scenario, "--strategies", "ecmp", "--no-store", "--json",
                 "--out", str(tmp_path / "report"), *sets])
    assert code == 0
    with pytest.raises(_Stop):
        main(["diagnose", scenario, "--db", str(tmp_path / "d.duckdb"), *sets])
    run, evaluation = seen["run"], seen["evaluation"]
    assert run.scenario.seed == evaluation.scenario.seed == 8
    outcome = next(o for o in evaluation.outcomes if o.name == run.strategy == "ecmp")
    # the fault set: when, which links, how much capacity they keep
    faults = [(s.time_s, sorted({run.topology.link_name(int(i)) for i in s.changed})) for s in run.states]
    assert faults == [(f.at_s, sorted(f.links)) for f in evaluation.faults]
    assert len(faults) == 2 and len(faults[0][1]) >= 2  # two random cables down (each both ways)
    # the flows: the engine's start and completion times, bit for bit
    assert np.array_equal(run.result.start_s, outcome.faulted.start_s)
    assert np.array_equal(run.result.finish_s, outcome.faulted.finish_s)
    moved = [(r.phase, r.moved_s, r.flows) for r in run.plan.repairs]
    assert moved == [(r.phase, r.moved_s, r.flows) for r in outcome.resiliency.repairs]


CLOUD = """
name: pair
seed: 5
routing: {strategy: ecmp}
federation:
  sites:
    - name: east
      fabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2, host_link: 100Gbps, uplink: 100Gbps}
      tenants: [{name: web, vni: 10, hosts: "0-3", address: 10.0.0.10/24}]
      workload: {kind: perftest, pattern: all-to-all, size: 64MiB}
      faults: [{kind: random, count: 1, at: 1ms, until: 20ms}]
      gateway: {capacity: 10Gbps, border_leaf: 1}
    - name: west
      fabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2, host_link: 100Gbps, uplink: 100Gbps}
      tenants: [{name: web, vni: 20, hosts: "0-3", address: 10.0.0.20/24}]
      gateway: {capacity: 10Gbps, border_leaf: 0}
  wan: [{between: [east, west], bandwidth: 10Gbps, latency: 2ms}]
  networks: [{name: web, tenant: web, mode: l2-stretch, sites: [east, west]}]
  gateway_faults: [{site: east, at: 30ms}]
  traffic: [{network: web, pattern: ring, size: 256MiB}]
"""


def test_diagnose_ranks_a_cloud_from_the_runs_evaluate_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cloudtwin.diagnosis.cloud as cloud_ops

    emitted: list[tuple[Any, Any]] = []

    def keep_runs(store: object, clean: object, hit: object) -> None:
        emitted.append((clean, hit))
        raise _Stop

    monkeypatch.setattr(cloud_ops, "emit_cloud", keep_runs)
    scenario = tmp_path / "cloud.yaml"
    scenario.write_text(CLOUD)
    sets = ["--set", "seed=9"]
    # evaluate writes the operations data of its own strategy's runs, diagnose of its own
    with pytest.raises(_Stop):
        main(["evaluate", str(scenario), "--strategies", "pinning,ecmp", "--out",
              str(tmp_path / "report"), "--db", str(tmp_path / "e.duckdb"), "--json", *sets])
    with pytest.raises(_Stop):
        main(["diagnose", str(scenario), "--db", str(tmp_path / "d.duckdb"), *sets])
    (evaluated_clean, evaluated_hit), (clean, hit) = emitted
    for mine, theirs in ((clean, evaluated_clean), (hit, evaluated_hit)):
        assert (mine.strategy, mine.faults, mine.cloud.seed) == (theirs.strategy, theirs.faults, 9)
        assert mine.strategy == "ecmp"
        assert np.array_equal(mine.start_s, theirs.start_s)
        assert np.array_equal(mine.finish_s, theirs.finish_s)
        assert mine.failovers == theirs.failovers
        for a, b in zip(mine.sites, theirs.sites, strict=True):
            assert _changes(a.jobs.changes) == _changes(b.jobs.changes), a.name
    assert _changes(hit.sites[0].jobs.changes)  # the random fault was drawn and applied


def _changes(changes: list[Any]) -> list[tuple[float, list[int], list[float], list[int]]]:
    return [(c.time_s, c.link_ids.tolist(), c.capacity_bps.tolist(), c.flows.tolist()) for c in changes]


def test_diagnose_ranks_from_the_run_evaluate_reports_with_its_migrations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """examples/migration.yaml: the tenants' flows share links with two migrations, so a
    faulted run without them ends 0.80 s off evaluate's; diagnose must run them too."""
    import cloudtwin.diagnosis.usecase as diagnosis

    three_fold = importlib.import_module("cloudtwin.evaluation.evaluate")
    seen: dict[str, Any] = {}
    real_evaluate = three_fold.evaluate

    def keep_evaluation(*args: Any, **kwargs: Any) -> Any:
        seen["evaluation"] = real_evaluate(*args, **kwargs)
        return seen["evaluation"]

    def keep_run(store: object, run: object) -> None:
        seen["run"] = run
        raise _Stop

    monkeypatch.setattr(three_fold, "evaluate", keep_evaluation)
    monkeypatch.setattr(diagnosis, "emit_run", keep_run)
    scenario = str(REPO / "examples" / "migration.yaml")
    assert main(["evaluate", scenario, "--strategies", "ecmp", "--no-store", "--json",
                 "--out", str(tmp_path / "report")]) == 0
    with pytest.raises(_Stop):
        main(["diagnose", scenario, "--db", str(tmp_path / "d.duckdb")])
    run, evaluation = seen["run"], seen["evaluation"]
    outcome = next(o for o in evaluation.outcomes if o.name == run.strategy)
    assert outcome.migrations  # the scenario's migrations ran in evaluate's faulted run
    assert np.array_equal(run.result.start_s, outcome.faulted.start_s)
    assert np.array_equal(run.result.finish_s, outcome.faulted.finish_s)
