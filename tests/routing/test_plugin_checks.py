"""User strategies that fail, return garbage, or are not strategies at all: one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudtwin.cli.app import main
from cloudtwin.errors import RoutingError
from cloudtwin.evaluation import build_flows, route_flows
from cloudtwin.routing import load_strategy
from cloudtwin.topology import build_topology

HERE = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("plugin_strategies:Raises", "route\\(\\) failed: ZeroDivisionError: oops"),
        ("plugin_strategies:ReturnsAList", "returned list, not Paths"),
        ("plugin_strategies:ShortPaths", "non-empty path"),
        ("plugin_strategies:OutOfRange", "link id the fabric lacks"),
        ("plugin_strategies:Disconnected", "does not lead from its flow's source"),
    ],
)
def test_a_misbehaving_route_is_a_routing_error(make_scenario, spec: str, reason: str) -> None:
    scenario = make_scenario("fabric.leaves=2", "fabric.spines=2", "fabric.hosts_per_leaf=2")
    topology = build_topology(scenario)
    flows = build_flows(scenario, topology)
    with pytest.raises(RoutingError, match=reason):
        route_flows(scenario, topology, flows, load_strategy(spec))


@pytest.mark.parametrize("spec", ["os:abort", "plugin_strategies:not_a_class", "builtins:object"])
def test_only_strategy_classes_are_instantiated(spec: str) -> None:
    # `--strategy os:abort` used to kill the process with exit 134 and no message
    with pytest.raises(RoutingError, match="not a strategy class"):
        load_strategy(spec)


def test_the_cli_gives_one_line_for_a_failing_plugin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\nfabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n")
    for spec in ("plugin_strategies:Raises", "os:abort"):
        code = main(["run", str(scenario), "--strategy", spec])
        out, err = capsys.readouterr()
        assert (code, out) == (2, "") and err.count("\n") == 1, err
