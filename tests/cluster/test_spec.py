"""Cluster resolution: the node profile, VM overheads and their overrides, bare metal."""

from __future__ import annotations

import numpy as np
import pytest

from cloudtwin.cluster import BARE_METAL, NODE_PROFILES, VM_OVERHEADS, cluster_spec
from cloudtwin.errors import ScenarioError
from cloudtwin.scenario.loader import load_scenario


def test_default_is_a_vm_on_the_a100_profile() -> None:
    scenario = load_scenario("fabric: {leaves: 2, spines: 2, hosts_per_leaf: 3}\nhosts: {nics: 2}")
    spec = cluster_spec(scenario, 100e9)
    assert spec.profile is NODE_PROFILES["a100-80g-8"]
    assert spec.virtualized and spec.overheads == VM_OVERHEADS
    assert (spec.nodes, spec.gpus) == (6, 48)
    assert spec.nic_rate_cap_bps == pytest.approx(100e9 * (1 - VM_OVERHEADS.nic_bandwidth))
    assert spec.nic_of_gpu(np.arange(8)).tolist() == [0, 0, 0, 0, 1, 1, 1, 1]


def test_overrides_and_bare_metal() -> None:
    spec = cluster_spec(load_scenario("cluster: {overheads: {compute: 0.1}}"), 100e9)
    assert spec.compute_factor == pytest.approx(0.9)
    assert spec.overheads.nic_bandwidth == VM_OVERHEADS.nic_bandwidth
    bare = cluster_spec(load_scenario("cluster: {virtualization: bare-metal}"), 100e9)
    assert bare.overheads == BARE_METAL and bare.compute_factor == 1.0
    with pytest.raises(ScenarioError, match="cluster.overheads"):
        cluster_spec(
            load_scenario("cluster: {virtualization: bare-metal, overheads: {compute: 0.1}}"), 100e9
        )


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("cluster: {node: h100}", "cluster.node"),
        ("cluster: {overheads: {compute: 1.5}}", "cluster.overheads.compute"),
        ("workload: {kind: training, tensor: 3}", "workload.tensor"),
        ("workload: {kind: training, pipeline: 5}", "workload.pipeline"),
        ("workload: {kind: hpl, nb: 0}", "workload.nb"),
    ],
)
def test_bad_cluster_and_workload_keys_are_named(text: str, key: str) -> None:
    with pytest.raises(ScenarioError, match=key.replace(".", r"\.")):
        load_scenario(text)


def test_gpus_per_host_must_match_the_node() -> None:
    with pytest.raises(ScenarioError, match="hosts.gpus: 4 GPUs per host, but a a100-80g-8 node has 8"):
        cluster_spec(load_scenario("hosts: {gpus: 4}"), 100e9)


def test_a_node_profile_with_a_sourced_nic_count_must_match_hosts_nics() -> None:
    # Vela's node: 2 NICs for GPU traffic; the HGX reference node: one per GPU.
    vela = cluster_spec(load_scenario("hosts: {nics: 2}\ncluster: {node: vela-2nic}"), 100e9)
    assert vela.nics_per_node == 2 and vela.nic_of_gpu(np.arange(8)).tolist() == [0] * 4 + [1] * 4
    hgx = cluster_spec(load_scenario("hosts: {nics: 8}\ncluster: {node: hgx-8nic}"), 100e9)
    assert hgx.nic_of_gpu(np.arange(8)).tolist() == list(range(8))
    with pytest.raises(ScenarioError, match="hosts.nics: 8 NICs per host, but a vela-2nic node has 2"):
        cluster_spec(load_scenario("hosts: {nics: 8}\ncluster: {node: vela-2nic}"), 100e9)
