"""The analytic training model: parameters, FLOPs, memory, 1F1B bubble, layouts, ring flows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cloudtwin.cluster.spec import cluster_spec
from cloudtwin.errors import WorkloadError
from cloudtwin.scenario.cluster import TrainingWorkload
from cloudtwin.scenario.loader import load_scenario
from cloudtwin.topology.builders import build_topology
from cloudtwin.workloads import training as model


def test_model_flops_match_a_hand_count() -> None:
    w = TrainingWorkload(layers=2, hidden=64, heads=4, sequence=32, vocabulary=100, global_batch=3,
                         tensor=1, pipeline=1)
    b, s, h, v, n = 3, 32, 64, 100, 2
    # Per layer forward: QKV 2*b*s*h*3h, scores 2*b*s*s*h, values 2*b*s*s*h, projection
    # 2*b*s*h*h, MLP 2 * 2*b*s*h*4h; logits 2*b*s*h*v. Backward is twice the forward.
    layer = 2 * b * s * h * 3 * h + 2 * (2 * b * s * s * h) + 2 * b * s * h * h + 2 * (2 * b * s * h * 4 * h)
    forward = n * layer + 2 * b * s * h * v
    assert model.model_flops(w) == pytest.approx(3 * forward)


def test_recomputation_adds_one_forward_of_the_layers() -> None:
    w = TrainingWorkload(layers=4, hidden=256, heads=4, sequence=128, vocabulary=1000, global_batch=8,
                         tensor=1, pipeline=1, recompute="full")
    base = w.model_copy(update={"recompute": "none"})
    layers_forward = model.model_flops(base) / 3 - 2 * 8 * 128 * 256 * 1000
    assert model.hardware_flops(w) == pytest.approx(model.model_flops(base) + layers_forward)


def test_parameters_of_gpt3_175b() -> None:
    w = TrainingWorkload(layers=96, hidden=12288, heads=96, vocabulary=51200, tensor=8, pipeline=8)
    assert model.parameters(w) == pytest.approx(174.6e9, rel=1e-3)


@pytest.mark.parametrize(("p", "m"), [(1, 8), (4, 32), (8, 8), (2, 1)])
def test_bubble_fraction_formula(p: int, m: int) -> None:
    assert model.bubble_fraction(p, m) == pytest.approx((p - 1) / (m + p - 1))


def test_memory_grows_with_the_model_and_shrinks_with_sharding_and_recompute() -> None:
    w = TrainingWorkload(tensor=8, pipeline=4)
    plain = model.memory_per_gpu(w, 48)
    sharded = model.memory_per_gpu(w.model_copy(update={"sharded_optimizer": True}), 48)
    recompute = model.memory_per_gpu(w.model_copy(update={"recompute": "full"}), 48)
    assert sharded.weights_and_optimizer < plain.weights_and_optimizer
    assert recompute.activations < plain.activations
    # 18 bytes per parameter on this GPU (bf16 weights, fp32 grads, fp32 Adam states).
    params = ((12 * 8192**2 + 13 * 8192) * 16 + (50304 + 2048) * 8192) / 8
    assert plain.weights_and_optimizer == pytest.approx(18 * params)


def test_layout_errors_name_the_key() -> None:
    w = TrainingWorkload(tensor=8, pipeline=4, global_batch=1536)
    with pytest.raises(WorkloadError, match="--gpus: 40 GPUs is not a multiple"):
        model.layout(w, 40, 1536, "--gpus")
    with pytest.raises(WorkloadError, match="more than the cluster's 1536"):
        model.layout(w, 3072, 1536, "--gpus")
    with pytest.raises(WorkloadError, match="workload.global_batch"):
        model.layout(w.model_copy(update={"global_batch": 100}), 1536, 1536)
    assert model.layout(w, 1536, 1536) == model.Layout(8, 4, 48, 32)


SMALL = """
fabric: {kind: leaf-spine, leaves: 4, spines: 16, hosts_per_leaf: 2}
hosts: {nics: 8}
workload: {kind: training, layers: 8, hidden: 1024, heads: 16, sequence: 512, vocabulary: 1000,
           global_batch: 16, tensor: 8, pipeline: 2, channels: 2}
"""


def test_data_parallel_rings_follow_the_rank_order() -> None:
    scenario = load_scenario(SMALL)
    topology = build_topology(scenario)
    spec = cluster_spec(scenario, topology.nic_rate_bps)
    w = scenario.workload
    assert isinstance(w, TrainingWorkload)
    lay = model.layout(w, 64, spec.gpus)
    flows = model.data_parallel_flows(w, lay, spec, topology, 1e6, np.zeros(2), 1)
    # 2 stages x 8 rails x 4 hops x 2 channels; GPU i of a node talks over NIC i.
    assert len(flows) == 2 * 8 * 4 * 2
    host_of = topology.node_index[flows.src] // 8
    rail = topology.node_index[flows.src] % 8
    peer = topology.node_index[flows.dst] // 8
    assert np.array_equal(rail, topology.node_index[flows.dst] % 8)
    # tp-dp-pp: stage 0 is nodes 0-3, stage 1 nodes 4-7, each ring in node order.
    assert set(zip(host_of.tolist(), peer.tolist(), strict=True)) == {
        (0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4)
    }
    assert flows.size_bytes.sum() == pytest.approx(2 * 8 * 4 * 1e6)
    assert math.isclose(model.data_parallel_bytes_per_hop(w, 1), 0.0)
