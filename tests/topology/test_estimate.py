"""Memory estimates of a scenario, checked against the arrays the builders make."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudtwin.cli.app import main
from cloudtwin.errors import LimitError, ScenarioError
from cloudtwin.scenario import load_scenario
from cloudtwin.topology.builders import build_topology
from cloudtwin.topology.estimate import estimate_memory

SMALL = "name: t\nfabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"


def test_a_small_fabric_estimate_matches_its_arrays() -> None:
    scenario = load_scenario(SMALL, "s.yaml")
    parts = estimate_memory(scenario).parts
    topology = build_topology(scenario)
    # 4 NICs + 2 leaves + 2 spines; 4 NIC cables + 4 uplinks, two directions each
    assert (topology.node_count, topology.link_count) == (8, 16)
    assert parts["out-link table"] == topology.out_links.nbytes
    assert parts["hop table"] == topology.hops_to_edge.size * (8 + 2 + 2)
    assert parts["flows"] == 4 * 8 * 12  # a permutation of 4 hosts, one QP each


@pytest.mark.parametrize(
    "overrides",
    [
        ["fabric.leaves=16", "fabric.hosts_per_leaf=62500"],  # a million hosts: 9 GiB before
        ["fabric.kind=fat-tree", "fabric.k=180"],  # asked for 181 GiB before
        ["fabric.uplinks_per_spine=100000"],  # 7.4 GiB in 3 s before
    ],
)
def test_a_fabric_too_large_for_memory_is_refused_before_it_is_built(
    overrides: list[str],
) -> None:
    text = "name: t\nfabric: {kind: leaf-spine}\n"
    if "fabric.kind=fat-tree" in overrides:
        text = "name: t\nfabric: {kind: fat-tree}\n"
        overrides = overrides[1:]
    scenario = load_scenario(text, "s.yaml", overrides)
    with pytest.raises(LimitError, match=r"needs about .* above limits.memory = 4.0GiB") as err:
        build_topology(scenario)
    assert err.value.limit == "limits.memory"


def test_the_limit_can_be_raised_and_the_cli_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = load_scenario(SMALL, "s.yaml", ["limits.memory=1KiB"])
    with pytest.raises(LimitError):
        build_topology(scenario)
    assert build_topology(load_scenario(SMALL, "s.yaml", ["limits.memory=1GiB"])).link_count == 16
    path = tmp_path / "ft.yaml"
    path.write_text("name: ft\nfabric: {kind: fat-tree, k: 180}\n")
    code = main(["run", str(path)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "") and err.count("\n") == 1 and "limits.memory" in err


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ("fabric.host_link=1e-300Gbps", "at least 1bps"),
        ("fabric.uplink=1e400Gbps", "finite"),
        ("workload.size=1e400GiB", "more than 1EiB"),
        ("fabric.latency=1e400s", "finite"),
    ],
)
def test_absurd_quantities_are_scenario_errors(override: str, reason: str) -> None:
    with pytest.raises(ScenarioError, match=reason):
        load_scenario(SMALL, "s.yaml", [override])
