"""Strategies loaded by dotted path, the shipped example, and bad strategy specs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cloudtwin.errors import RoutingError
from cloudtwin.evaluation import build_flows, route_flows, run_scenario
from cloudtwin.routing import Strategy, load_strategy
from cloudtwin.topology import NodeKind, build_topology

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SPEC = "user_strategy:LowestSpine"


@pytest.fixture
def examples_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))


def test_example_loads_by_dotted_path(examples_on_path) -> None:
    strategy = load_strategy(SPEC)
    assert isinstance(strategy, Strategy)
    assert strategy.name == "lowest-spine"


def test_example_takes_the_lowest_spine(
    examples_on_path, make_scenario, assert_valid_paths
) -> None:
    scenario = make_scenario("fabric.leaves=4", "fabric.spines=4")
    topology = build_topology(scenario)
    flows = build_flows(scenario, topology)
    paths = route_flows(scenario, topology, flows, load_strategy(SPEC))
    assert_valid_paths(topology, paths, flows.src, flows.dst)
    spines = topology.link_dst[paths.link_ids]
    spines = spines[topology.node_kind[spines] == NodeKind.SPINE]
    assert spines.size > 0
    assert set(topology.node_index[spines].tolist()) == {0}


def test_example_runs_end_to_end_and_is_bad(examples_on_path, make_scenario) -> None:
    scenario = make_scenario("fabric.leaves=16", f"routing.strategy={SPEC}")
    lowest = run_scenario(scenario)
    assert lowest.strategy == "lowest-spine"
    # every leaf's ~8 inter-leaf flows squeeze through its one uplink to spine0 (1/8 each)
    assert lowest.summary.utilization < 0.2
    assert lowest.summary.utilization < run_scenario(scenario, "ecmp").summary.utilization


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nope", "unknown strategy 'nope'"),
        ("ECMP", "unknown strategy 'ECMP'"),
        ("no_such_module_xyz:Foo", "cannot import module 'no_such_module_xyz'"),
        (":Foo", "cannot import module ''"),
        (".relative:Foo", "cannot import module '.relative'"),
        ("cloudtwin.routing:Nope", "has no 'Nope'"),
        ("cloudtwin.routing:color_bipartite_edges", "is not a strategy class"),
        ("builtins:object", "is not a strategy class"),
    ],
)
def test_bad_strategy_specs(spec: str, message: str) -> None:
    with pytest.raises(RoutingError, match=message) as info:
        load_strategy(spec)
    assert str(info.value).startswith("routing.strategy: ")


def test_a_strategy_class_defined_anywhere_works(make_scenario) -> None:
    # a strategy by dotted path into cloudtwin itself: the built-in Pinning class
    run = run_scenario(make_scenario("fabric.leaves=4"), "cloudtwin.routing:Pinning")
    assert run.strategy == "pinning"
    assert np.isfinite(run.summary.utilization)


def test_example_declares_its_own_facts_from_routing_alone(examples_on_path) -> None:
    from cloudtwin.routing import PLAIN_ECMP, profile_of, reaction_of

    strategy = load_strategy(SPEC)
    assert reaction_of(strategy) == "protocol"
    profile = profile_of(strategy)
    assert profile.controller and profile.flow_rules and PLAIN_ECMP in profile.switch_features
    source = (EXAMPLES / "user_strategy.py").read_text()
    imported = {line.split()[1] for line in source.splitlines() if line.startswith(("from ", "import "))}
    assert {m for m in imported if m.startswith("cloudtwin")} <= {"cloudtwin.routing", "cloudtwin.topology"}


def test_each_builtin_declares_its_facts_in_its_own_class() -> None:
    from cloudtwin.routing import Profile, profile_of, reaction_of, strategy_names

    for name in strategy_names():
        strategy = load_strategy(name)
        assert isinstance(type(strategy).__dict__.get("profile"), Profile), name
        assert profile_of(strategy) is type(strategy).profile
        assert reaction_of(strategy) in ("local-then-protocol", "controller")
    pinning = load_strategy("pinning")
    assert profile_of(pinning, "source-port").host_steering and not profile_of(pinning).host_steering
