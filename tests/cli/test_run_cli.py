"""`cloudtwin run` and `cloudtwin compare` end to end, as the README runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli.cli_helpers import cloudtwin

EXAMPLE = "examples/leaf-spine-perftest.yaml"
RUN_KEYS = {
    "scenario",
    "strategy",
    "flows",
    "aggregate_gbps",
    "per_flow_gbps",
    "fct_s",
    "completion_s",
    "utilization",
}


def test_run_json_is_the_documented_object() -> None:
    done = cloudtwin("run", EXAMPLE, "--json", "--set", "routing.strategy=pinning")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # nothing but JSON on stdout
    assert set(result) == RUN_KEYS
    assert set(result["per_flow_gbps"]) == {"min", "p50", "mean", "max"}
    assert set(result["fct_s"]) == {"p50", "p99", "max"}
    assert result["strategy"] == "pinning"
    assert result["flows"] == 128  # two tenants of 64 hosts, one connection per host
    assert result["utilization"] >= 0.98
    # aggregate is the sum of per-connection throughputs: mean x count
    assert result["aggregate_gbps"] == pytest.approx(result["per_flow_gbps"]["mean"] * 128, rel=1e-9)


def test_run_table_names_every_metric() -> None:
    done = cloudtwin("run", EXAMPLE, "--set", "fabric.leaves=4", "--set", "tenants=[]")
    assert done.returncode == 0, done.stderr
    for label in (
        "flows",
        "aggregate (Gbps)",
        "per-flow min",
        "FCT p99",
        "completion time",
        "utilization",
    ):
        assert label in done.stdout


def test_compare_ratios_are_to_the_first_strategy(tmp_path: Path) -> None:
    out = tmp_path / "nested" / "compare.json"
    done = cloudtwin("compare", EXAMPLE, "--strategies", "ecmp,pinning", "--json", "--out", str(out))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert json.loads(out.read_text()) == result
    assert list(result["results"]) == ["ecmp", "pinning"]
    ecmp = result["results"]["ecmp"]["aggregate_gbps"]
    pinning = result["results"]["pinning"]["aggregate_gbps"]
    assert result["ratios"]["ecmp"] == 1.0
    assert result["ratios"]["pinning"] == pytest.approx(pinning / ecmp)
    assert result["ratios"]["pinning"] > 1.2  # ECMP collides on a permutation; pinning does not


def test_same_seed_same_numbers_different_seed_different_numbers() -> None:
    first = cloudtwin("run", EXAMPLE, "--json").stdout
    again = cloudtwin("run", EXAMPLE, "--json").stdout
    other = cloudtwin("run", EXAMPLE, "--json", "--set", "seed=2").stdout
    assert first == again
    assert json.loads(first)["aggregate_gbps"] != json.loads(other)["aggregate_gbps"]


def test_help_explains_with_an_example() -> None:
    for command in ([], ["run"], ["compare"]):
        done = cloudtwin(*command, "--help")
        assert done.returncode == 0
        assert "Example" in done.stdout


BAD_INPUTS = [
    ("fabric: [unclosed\n", [], "not valid YAML"),
    ("fabric: {kind: leaf-spine, leavs: 4}\n", [], "fabric.leavs: unknown key"),
    ("fabric: {kind: leaf-spine, host_link: 100Gbs}\n", [], "fabric.host_link"),
    ("fabric: {kind: torus}\n", [], "unknown kind 'torus'"),
    ("fabric: {kind: fat-tree, k: 5}\n", [], "k must be even"),
    ("fabric: {kind: rail-optimized, leaves: 5}\nhosts: {nics: 2}\n", [], "fabric.leaves"),
    ("workload: {kind: perftest, size: 1GB/s}\n", [], "workload.size"),
    ("name: ok\n", ["--set", "routing.strategy=teleport"], "unknown strategy 'teleport'"),
    ("name: ok\n", ["--set", "routing.strategy=nosuchmodule:X"], "cannot import module"),
    ("name: ok\n", ["--set", "fabric.leaves=-3"], "fabric.leaves"),
    ("name: ok\n", ["--set", "noequals"], "expected key=value"),
    ("tenants: [{name: a, vni: 1, hosts: 0-9}, {name: b, vni: 2, hosts: 5-12}]\n", [], "already belongs"),
]


@pytest.mark.parametrize(("text", "extra", "needle"), BAD_INPUTS)
def test_bad_input_is_one_line_exit_2(tmp_path: Path, text: str, extra: list[str], needle: str) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(text)
    out = tmp_path / "kept.json"
    out.write_text('{"kept": true}\n')
    done = cloudtwin("run", str(scenario), "--out", str(out), *extra)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert needle in lines[0]
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    assert json.loads(out.read_text()) == {"kept": True}  # nothing already stored is lost


def test_missing_file_and_empty_strategy_list(tmp_path: Path) -> None:
    done = cloudtwin("run", str(tmp_path / "absent.yaml"))
    assert done.returncode == 2
    assert "no such scenario file" in done.stderr
    done = cloudtwin("compare", EXAMPLE, "--strategies", ",")
    assert done.returncode == 2
    assert "no strategy named" in done.stderr


def test_empty_file_runs_the_defaults(tmp_path: Path) -> None:
    scenario = tmp_path / "empty.yaml"
    scenario.write_text("")
    done = cloudtwin("run", str(scenario), "--json", "--set", "workload.size=1MiB")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["flows"] == 128  # default fabric: 16 leaves x 8 hosts


def test_the_default_strategy_list_is_the_registry() -> None:
    from cloudtwin.cli.output import BUILTIN_STRATEGIES
    from cloudtwin.evaluation.usecases import BASELINE_STRATEGIES
    from cloudtwin.routing import strategy_names

    assert sorted([*BUILTIN_STRATEGIES.split(","), *BASELINE_STRATEGIES]) == sorted(strategy_names())
    assert BUILTIN_STRATEGIES.split(",")[0] == "ecmp"  # ratios are to the first
