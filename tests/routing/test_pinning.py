"""Pinning: conflict-free paths for permutations on non-blocking Clos fabrics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudtwin.evaluation import run_scenario
from cloudtwin.scenario import Scenario, load_scenario
from cloudtwin.topology import NodeKind


def flows_per_switch_link(run) -> np.ndarray:
    """How many flows cross each switch-to-switch link."""
    topology, paths = run.topology, run.paths
    kind = topology.node_kind
    switch = (kind[topology.link_src] != NodeKind.NIC) & (kind[topology.link_dst] != NodeKind.NIC)
    return np.bincount(paths.link_ids, minlength=topology.link_count)[switch]


def scenario(*overrides: str) -> Scenario:
    return load_scenario("fabric: {kind: leaf-spine}\n", "<test>", overrides)


@settings(max_examples=25, deadline=None)
@given(
    leaves=st.integers(2, 6),
    spines=st.integers(1, 6),
    parallel=st.integers(1, 2),
    data=st.data(),
    seed=st.integers(0, 10_000),
)
def test_permutation_on_non_blocking_leaf_spine_is_conflict_free(
    leaves, spines, parallel, data, seed
) -> None:
    hosts_per_leaf = data.draw(st.integers(1, spines * parallel), label="hosts_per_leaf")
    run = run_scenario(
        scenario(
            f"fabric.leaves={leaves}",
            f"fabric.spines={spines}",
            f"fabric.uplinks_per_spine={parallel}",
            f"fabric.hosts_per_leaf={hosts_per_leaf}",
            f"seed={seed}",
            "routing.strategy=pinning",
        )
    )
    assert flows_per_switch_link(run).max(initial=0) <= 1
    assert run.summary.utilization >= 0.98


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_qps_share_links_up_to_their_count(make_scenario, seed: int) -> None:
    # 4 QPs per connection each want 25G; a 100G link takes 4 of them
    run = run_scenario(
        make_scenario(
            "fabric.leaves=8",
            "fabric.spines=4",
            "fabric.hosts_per_leaf=4",
            "workload.qps=4",
            f"seed={seed}",
            "routing.strategy=pinning",
        )
    )
    per_link = flows_per_switch_link(run)
    assert per_link.max() <= 4
    assert per_link.max() == 4  # and the colouring does use the slots
    assert run.summary.utilization >= 0.98


@pytest.mark.parametrize("k", [4, 8])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fat_tree_permutation_is_conflict_free(make_scenario, k: int, seed: int) -> None:
    run = run_scenario(
        make_scenario(
            "fabric.kind=fat-tree", f"fabric.k={k}", f"seed={seed}", "routing.strategy=pinning"
        )
    )
    assert flows_per_switch_link(run).max() <= 1
    assert run.summary.utilization >= 0.98


def test_rail_optimized_permutation_is_conflict_free(make_scenario) -> None:
    run = run_scenario(
        make_scenario(
            "fabric.kind=rail-optimized",
            "fabric.leaves=8",
            "hosts.nics=4",
            "fabric.hosts_per_leaf=4",
            "fabric.spines=4",
            "routing.strategy=pinning",
        )
    )
    assert flows_per_switch_link(run).max() <= 1
    assert run.summary.utilization >= 0.98
