"""The use cases return what the CLI prints: `to_json()` is byte for byte the `--json` output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cloudtwin.cli.app import main
from cloudtwin.errors import RoutingError, ScenarioError
from cloudtwin.evaluation import usecases
from cloudtwin.scenario.loader import load_scenario

SMALL = """
name: small
fabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}
hosts: {nics: 1, gpus: 2}
workload: {kind: perftest, pattern: permutation, size: 1MiB, qps: 2}
"""
COLLECTIVE = "workload={kind: collective, op: allreduce, size: 1MiB, channels: 2}"
TRAINING = """
fabric: {kind: leaf-spine, leaves: 4, spines: 16, hosts_per_leaf: 2}
hosts: {nics: 8}
workload: {kind: training, layers: 8, hidden: 2048, heads: 16, sequence: 1024, vocabulary: 32000,
           global_batch: 32, tensor: 8, pipeline: 2}
"""


def _printed(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main([*args, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _dumped(document: object) -> str:
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(SMALL)
    return path


def test_run_and_compare(capsys: pytest.CaptureFixture[str], small: Path) -> None:
    scenario = load_scenario(SMALL)
    assert _printed(capsys, "run", str(small)) == _dumped(usecases.run(scenario).to_json())
    comparison = usecases.compare(scenario, ["ecmp", "pinning"])
    printed = _printed(capsys, "compare", str(small), "--strategies", "ecmp,pinning")
    assert printed == _dumped(comparison.to_json())
    assert comparison.ratios["ecmp"] == 1.0
    assert [s.strategy for s in comparison.summaries] == ["ecmp", "pinning"]


def test_nccl_tests(capsys: pytest.CaptureFixture[str], small: Path) -> None:
    scenario = load_scenario(SMALL, overrides=[COLLECTIVE])
    sizes = usecases.nccl_sizes("1M", "4M", 2)
    assert sizes == [1 << 20, 2 << 20, 4 << 20]
    seen: list[tuple[str, int, int]] = []
    sweep = usecases.nccl_tests(scenario, sizes, ["ecmp"], lambda *step: seen.append(step))
    assert seen == [("ecmp", 1, 3), ("ecmp", 2, 3), ("ecmp", 3, 3)]
    args = ("-b", "1M", "-e", "4M", "--strategies", "ecmp")
    printed = _printed(capsys, "nccl-tests", str(small), "--set", COLLECTIVE, *args)
    assert printed == _dumped(sweep.to_json())


def test_train(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "train.yaml"
    path.write_text(TRAINING)
    prediction = usecases.train(load_scenario(TRAINING), [16, 32])
    assert _printed(capsys, "train", str(path), "--gpus", "16,32") == _dumped(prediction.to_json())
    single = usecases.train(load_scenario(TRAINING))
    assert isinstance(single.to_json(), dict) and not single.curve


def test_evaluate_keeps_files_for_the_caller(capsys: pytest.CaptureFixture[str], small: Path) -> None:
    scenario = load_scenario(SMALL)
    report = usecases.evaluate(scenario, ["ecmp", "pinning"])
    assert report.run_id is None and set(report.files) == {"results.json", "report.md", "report.html"}
    assert report.files["results.json"] == json.dumps(report.results.to_json(), indent=2) + "\n"
    printed = _printed(capsys, "evaluate", str(small), "--strategies", "ecmp,pinning", "--no-store",
                       "--out", str(small.parent / "rep"))
    assert printed == _dumped(report.to_json())
    assert (small.parent / "rep" / "results.json").read_text() == report.files["results.json"]


def test_strategy_lists_name_the_field() -> None:
    assert usecases.parse_strategies(None) == list(usecases.BUILTIN_STRATEGIES)
    assert usecases.parse_strategies(["ecmp", " pinning "]) == ["ecmp", "pinning"]
    with pytest.raises(RoutingError, match="^strategies: no strategy named"):
        usecases.parse_strategies(" , ")
    with pytest.raises(RoutingError, match="^strategies: ecmp named twice"):
        usecases.parse_strategies("ecmp,pinning,ecmp", unique=True)
    with pytest.raises(ScenarioError, match="^minbytes: '1X'"):
        usecases.nccl_sizes("1X", "1G")
    with pytest.raises(ScenarioError, match="^stepfactor"):
        usecases.nccl_sizes("1M", "1G", 1)


def test_the_default_strategies_are_the_clis_and_the_registrys() -> None:
    from cloudtwin.cli.output import BUILTIN_STRATEGIES
    from cloudtwin.routing import strategy_names

    assert tuple(BUILTIN_STRATEGIES.split(",")) == usecases.BUILTIN_STRATEGIES
    every = [*usecases.BUILTIN_STRATEGIES, *usecases.BASELINE_STRATEGIES]
    assert sorted(every) == sorted(strategy_names())


def test_report_headers_stay_whole() -> None:
    from cloudtwin.evaluation.report import _html_table

    table = _html_table(["strategy", "routes_per_switch_max"], [["ecmp", "12"]])
    assert "<th>routes_per_switch_max</th>" in table and "<wbr>" not in table
