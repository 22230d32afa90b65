"""The analytic training model: parameters, FLOPs, memory, 1F1B bubble, layouts, ring flows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudtwin.cluster.spec import ClusterSpec
from cloudtwin.errors import WorkloadError
from cloudtwin.scenario.cluster import TrainingWorkload
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


def test_data_parallel_groups_follow_the_rank_order() -> None:
    w = TrainingWorkload(layers=8, hidden=1024, heads=16, global_batch=16, tensor=8, pipeline=2)
    lay = model.layout(w, 64, 64)
    groups, stage = model.data_parallel_groups(w, lay)
    # tp-dp-pp: rank = tp + 8 (dp + 4 pp); group (tp i, stage k) = GPU i of nodes 4k..4k+3.
    assert groups.shape == (16, 4)
    assert groups[0].tolist() == [0, 8, 16, 24] and stage[0] == 0
    assert groups[1].tolist() == [32, 40, 48, 56] and stage[1] == 1
    assert groups[3].tolist() == [33, 41, 49, 57]
    far, _ = model.data_parallel_groups(w.model_copy(update={"layout": "tp-pp-dp"}), lay)
    assert far[0].tolist() == [0, 16, 32, 48]  # rank = tp + 8 (pp + 2 dp)
    assert sorted(np.concatenate([groups.ravel(), far.ravel()]).tolist()) == sorted(list(range(64)) * 2)


def test_reduction_bytes() -> None:
    w = TrainingWorkload(layers=8, hidden=1024, heads=16, tensor=8, pipeline=2)
    params = ((12 * 1024**2 + 13 * 1024) * 4 + (50304 + 2048) * 1024) / 8
    assert model.data_parallel_allreduce_bytes(w) == pytest.approx(4 * params)
    assert model.data_parallel_bytes_per_hop(w, 4) == pytest.approx(2 * 3 / 4 * 4 * params)
    assert model.data_parallel_bytes_per_hop(w, 1) == 0.0
    sharded = w.model_copy(update={"sharded_optimizer": True})
    # reduce-scatter of fp32 gradients + all-gather of bf16 weights, (d-1)/d of each per hop
    assert model.data_parallel_bytes_per_hop(sharded, 4) == pytest.approx(3 / 4 * 6 * params)


def test_interleaved_schedule_times_by_hand() -> None:
    # v = 2 model chunks per GPU: a microbatch crosses 2 stage boundaries per GPU each
    # way, the bubble is (p-1)/v slots, and the cool-down step is one chunk's backward.
    times = model.StageTimes(forward_s=1.0, backward_s=2.0, tp_comm_s=0.4, p2p_s=0.05,
                             optimizer_s=0.0, overlap_window_s=0.0, virtual_stages=2)
    assert times.slot_s == pytest.approx(1 + 2 + 0.4 + 2 * 2 * 0.05)  # 3.6
    assert times.bubble_s(4) == pytest.approx(3 / 2 * 3.6)  # 5.4
    assert times.pipeline_s(4, 8) == pytest.approx(8 * 3.6 + 5.4)
    assert times.ring_offsets_s(4).tolist() == pytest.approx([3 * 1.15, 2 * 1.15, 1.15, 0.0])
    assert times.bubble_s(4) / times.pipeline_s(4, 8) == pytest.approx(model.bubble_fraction(4, 8, 2))


def test_interleaving_keeps_more_activations_on_the_first_stage() -> None:
    # Korthikanti et al. 2022: L (1 + (p-1)/(p v)) layers' activations; p = 4, v = 2: 11/8.
    w = TrainingWorkload(tensor=8, pipeline=4)
    plain = model.memory_per_gpu(w, 8).activations
    interleaved = model.memory_per_gpu(w.model_copy(update={"virtual_stages": 2}), 8).activations
    assert interleaved == pytest.approx(plain * 11 / 8)


def test_interleaving_needs_micro_batches_in_multiples_of_the_pipeline() -> None:
    # Megatron's interleaved schedule runs micro-batches in groups of p.
    w = TrainingWorkload(tensor=8, pipeline=4, virtual_stages=2, global_batch=96)
    with pytest.raises(WorkloadError, match=r"workload.virtual_stages: .* 6 micro-batches"):
        model.layout(w, 32 * 16, 1536)  # d = 16: 96 / 16 = 6 micro-batches
    assert model.layout(w.model_copy(update={"global_batch": 128}), 32 * 16, 1536).micro_batches == 8


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"pipeline": 1, "virtual_stages": 2}, "needs pipeline > 1"),
        ({"layers": 64, "pipeline": 8, "virtual_stages": 3}, "does not divide the 64 layers"),
    ],
)
def test_bad_virtual_stages_are_named(fields: dict[str, int], message: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=f"workload.virtual_stages: .*{message}"):
        TrainingWorkload(**fields)


LLAMA2_70B = dict(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, activation="swiglu",
                  norm="rmsnorm", position="rope", tied_embeddings=False, vocabulary=32000,
                  sequence=4096, tensor=1, pipeline=1, global_batch=64)


def test_parameters_of_llama2_70b_by_hand() -> None:
    w = TrainingWorkload(**LLAMA2_70B)
    h, kv, f, v = 8192, 1024, 28672, 32000
    # Q and O h^2 each, K and V h x (8 heads x 128), gated MLP 3 h f, two RMSNorm weights.
    layer = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h
    assert model.parameters(w) == pytest.approx(80 * layer + 2 * v * h)
    assert model.parameters(w) == pytest.approx(68.98e9, rel=1e-3)  # "70B": 68.98B


def test_swiglu_default_width_is_llama_rounding() -> None:
    assert TrainingWorkload(hidden=4096, heads=32, activation="swiglu").ffn == 11008
    assert TrainingWorkload(hidden=4096, heads=32).ffn == 4 * 4096


def test_selective_recompute_adds_only_the_attention_core() -> None:
    w = TrainingWorkload(layers=4, hidden=256, heads=4, sequence=128, vocabulary=1000, global_batch=8,
                         tensor=1, pipeline=1, recompute="selective")
    base = w.model_copy(update={"recompute": "none"})
    assert model.hardware_flops(w) - model.model_flops(base) == pytest.approx(8 * 128 * 4 * 4 * 128 * 256)


def test_wave_quantization_by_hand() -> None:
    # 108 tiles of 256 x 128 fill the A100's 108 SMs exactly; one more tile needs a second wave.
    assert model._wave_efficiency(256, 128, 108, 108) == pytest.approx(1.0)
    assert model._wave_efficiency(256, 128, 109, 108) == pytest.approx(109 / 216)
    # Half a tile: 128 x 128 uses half of a 256 x 128 tile (one wave).
    assert model._wave_efficiency(128, 128, 1, 108) == pytest.approx(0.5 / 108)


def test_memory_falls_with_each_zero_stage() -> None:
    w = TrainingWorkload(**{**LLAMA2_70B, "layers": 8, "global_batch": 64})
    use = {kind: model.memory_per_gpu(w.model_copy(update={"data_parallel": kind}), 64).weights_and_optimizer
           for kind in ("ddp", "zero1", "zero2", "fsdp")}
    assert use["ddp"] > use["zero1"] > use["zero2"] > use["fsdp"]
    params = model._params_per_gpu(w)
    assert use["ddp"] == pytest.approx(18 * params)  # bf16 weights, fp32 grads, Adam's 12 B
    assert use["zero1"] == pytest.approx((2 + 4 + 12 / 64) * params)


def test_fsdp_moves_its_gathers_every_microbatch_and_hsdp_splits_groups() -> None:
    w = TrainingWorkload(**{**LLAMA2_70B, "layers": 8, "data_parallel": "fsdp", "grad_reduce_dtype": "bf16"})
    lay = model.layout(w, 64, 64)
    (shard,) = model.fabric_collectives(w, lay)
    params = model._params_per_gpu(w)
    assert shard.per_microbatch and shard.repeat == lay.micro_batches
    assert shard.size_bytes == pytest.approx((2 * 2 * params + 2 * params) / 2)
    hsdp = w.model_copy(update={"data_parallel": "hsdp", "sharding_group": 8})
    inside, across = model.fabric_collectives(hsdp, lay)
    assert inside.groups.shape == (8, 8) and across.groups.shape == (8, 8)
    assert across.size_bytes == pytest.approx(2 * params / 8)
    # A replica group takes the same shard position from every node.
    assert list(across.groups[1]) == [1, 9, 17, 25, 33, 41, 49, 57]


@pytest.mark.parametrize(("update", "field"), [
    ({"stage_layers": (3, 4)}, "workload.stage_layers"),
    ({"kv_heads": 3}, "workload.kv_heads"),
    ({"data_parallel": "fsdp", "sharded_optimizer": True}, "workload.sharded_optimizer"),
    ({"sharding_group": 4}, "workload.sharding_group"),
    ({"context": 3}, "workload.context"),
    ({"recompute_layers": 2}, "workload.recompute_layers"),
    ({"recompute": "selective", "recompute_layers": 2}, "workload.recompute_layers"),
    ({"recompute": "full", "recompute_layers": 5}, "workload.recompute_layers"),
    ({"kernels": "jit"}, "kernels"),
])
def test_bad_new_keys_name_the_field(update: dict, field: str) -> None:
    from pydantic import ValidationError

    base = dict(layers=8, hidden=256, heads=8, sequence=128, tensor=1, pipeline=2)
    with pytest.raises(ValidationError, match=field):
        TrainingWorkload(**{**base, **update})


def test_the_slowest_uneven_stage_sets_the_pace() -> None:
    spec = _a100()
    even = TrainingWorkload(layers=8, hidden=1024, heads=8, sequence=512, tensor=1, pipeline=2)
    uneven = even.model_copy(update={"stage_layers": (5, 3)})
    a, b = model.stage_times(even, spec, 1), model.stage_times(uneven, spec, 1)
    layer = a.layer_forward_s
    logits = a.forward_s - 4 * layer  # the last stage's output layer
    assert b.forward_s == pytest.approx(max(5 * layer, 3 * layer + logits))
    assert b.forward_s != pytest.approx(a.forward_s)


@settings(max_examples=60, deadline=None)
@given(
    # From 2 layers: with one, full recomputation keeps its input beside the layer it recomputes.
    layers=st.integers(2, 16), head_size=st.sampled_from([32, 64, 128]), heads=st.sampled_from([4, 8, 16]),
    kv_div=st.sampled_from([1, 2, 4]), gated=st.booleans(),
    recompute=st.sampled_from(["none", "full", "selective"]), flash=st.booleans(),
    kind=st.sampled_from(["ddp", "zero1", "zero2", "fsdp"]), data=st.integers(1, 64),
)
def test_flops_and_memory_invariants(
    layers: int, head_size: int, heads: int, kv_div: int, gated: bool, recompute: str, flash: bool,
    kind: str, data: int,
) -> None:
    w = TrainingWorkload(
        layers=layers, hidden=head_size * heads, heads=heads, kv_heads=heads // kv_div, sequence=256,
        vocabulary=1000, global_batch=8, tensor=1, pipeline=1, recompute=recompute,
        activation="swiglu" if gated else "gelu", attention="flash" if flash else "standard",
        data_parallel=kind,
    )
    assert model.parameters(w) > 0
    assert model.hardware_flops(w) >= model.model_flops(w) > 0
    # Recomputation never keeps more activations; sharding never keeps more state.
    none = w.model_copy(update={"recompute": "none"})
    kept, plain = model.memory_per_gpu(w, data), model.memory_per_gpu(none, data)
    assert kept.activations <= plain.activations * (1 + 1e-9)
    ddp = model.memory_per_gpu(w.model_copy(update={"data_parallel": "ddp"}), data)
    buffers = 2 * model._layer_params(w) * 2  # FSDP's two unsharded layers
    assert kept.weights_and_optimizer <= ddp.weights_and_optimizer + buffers
    # One more layer is more parameters and more FLOPs.
    more = w.model_copy(update={"layers": layers + 1})
    assert model.parameters(more) > model.parameters(w) and model.model_flops(more) > model.model_flops(w)


def _a100() -> ClusterSpec:
    from cloudtwin.cluster.profiles import A100_80G_8, BARE_METAL

    return ClusterSpec(A100_80G_8, BARE_METAL, False, 4, 8, 200e9)


def test_eager_kernels_move_the_bytes_a_reference_llama_layer_moves() -> None:
    llama = dict(layers=2, hidden=1024, heads=8, sequence=256, tensor=1, pipeline=1, activation="swiglu",
                 ffn_hidden=2816, norm="rmsnorm", position="rope", kv_heads=2)
    fused, eager = TrainingWorkload(**llama), TrainingWorkload(**llama, kernels="eager")
    h, f, kv = 1024, 2816, 256
    # Per token: two norms (4 B per element fused, 36 eager), two residuals (6), SwiGLU
    # (6 B per FFN element fused, 10 eager), RoPE on Q and K (4 fused, 20 eager), and eager's
    # contiguous copy of the attention output (4).
    assert model._elementwise_bytes(fused) == (2 * 4 * h + 2 * 6 * h + 6 * f + 4 * (h + kv), 6)
    assert model._elementwise_bytes(eager) == (2 * 36 * h + 2 * 6 * h + 10 * f + 20 * (h + kv) + 4 * h, 26)
    # GeLU, LayerNorm and learned positions are one kernel each either way: only the copy differs.
    gpt = dict(layers=2, hidden=1024, heads=8, sequence=256, tensor=1, pipeline=1)
    plain, plain_eager = TrainingWorkload(**gpt), TrainingWorkload(**gpt, kernels="eager")
    assert model._elementwise_bytes(plain_eager)[0] - model._elementwise_bytes(plain)[0] == 4 * h
    spec = _a100()
    slower = model.stage_times(eager, spec, 1).forward_s - model.stage_times(fused, spec, 1).forward_s
    gpu = spec.profile
    extra = (model._elementwise_bytes(eager)[0] - model._elementwise_bytes(fused)[0]) * 256
    expected = 2 * (extra / (gpu.hbm_bytes_per_s * gpu.hbm_efficiency) + 20 * gpu.kernel_launch_s)
    assert slower == pytest.approx(expected)


def test_recomputing_some_layers_costs_their_forward_only() -> None:
    base = dict(layers=8, hidden=512, heads=8, sequence=256, vocabulary=1000, global_batch=8, tensor=1,
                pipeline=2, recompute="full")
    every, half = TrainingWorkload(**base), TrainingWorkload(**base, recompute_layers=2)
    none = every.model_copy(update={"recompute": "none"})
    spec = _a100()
    t_every, t_half, t_none = (model.stage_times(w, spec, 1) for w in (every, half, none))
    layer = t_none.layer_forward_s
    # A stage of 4 layers: full recompute runs 4 forwards again, recompute_layers 2 runs two.
    assert t_every.backward_s - t_none.backward_s == pytest.approx(4 * layer)
    assert t_half.backward_s - t_none.backward_s == pytest.approx(2 * layer)
    # FLOPs: half of the layers' forward again (2 of 4 on each of the 2 stages).
    layers_forward = model.hardware_flops(every) - model.model_flops(none)
    assert model.hardware_flops(half) - model.model_flops(none) == pytest.approx(layers_forward / 2)
    # Memory: the recomputed layers keep their input only, the others everything.
    m_every, m_half, m_none = (model.memory_per_gpu(w, 1).activations for w in (every, half, none))
    assert m_every < m_half < m_none
    stored = 2 * 256 * 1 * 512
    per_layer = model._activation_bytes(none)
    logits = 4.0 * 256 * 1000 * 2 * 0  # pipeline > 1: no logits on the first stage
    assert m_half == pytest.approx(stored * 2 * 2 + per_layer * (8 - 4) + per_layer + logits)


def test_a_gemm_pays_its_waves_fixed_cost_in_loop_steps() -> None:
    spec = _a100()
    gpu = spec.profile
    # 108 tiles of 256 x 128: one full wave; k = 139 loop steps halve the rate (k0 = 139).
    m, n, batch = 256, 128, 108
    for k in (139.0, 4096.0):
        flops = 2 * m * n * k * batch
        rate = gpu.peak_bf16_flops * gpu.gemm_efficiency_max * model.FRAMEWORK.gemm_sustained * k / (k + 139)
        math_s = flops / rate
        memory_s = 2 * (m * k + k * n + m * n) * batch / (gpu.hbm_bytes_per_s * gpu.hbm_efficiency)
        expected = max(math_s, memory_s) + gpu.kernel_launch_s
        assert model._gemm_s(spec, m, k, n, batch) == pytest.approx(expected)
    assert gpu.gemm_k_overhead == 139


def test_a_sustained_clock_slows_the_tensor_cores_only() -> None:
    from dataclasses import replace

    from cloudtwin.cluster.profiles import BARE_METAL, H100_80G_8
    from cloudtwin.cluster.spec import ClusterSpec

    full = replace(H100_80G_8, clock_sustained=1.0)
    held = replace(H100_80G_8, clock_sustained=0.5)
    a, b = (ClusterSpec(p, BARE_METAL, False, 8, 8, 400e9) for p in (full, held))
    w = TrainingWorkload(layers=2, hidden=8192, heads=64, sequence=4096, tensor=1, pipeline=1,
                         attention="flash", micro_batch=4)
    launch = H100_80G_8.kernel_launch_s
    # A compute-bound GEMM takes twice as long at half the clock, less its launch.
    gemm = (16384, 8192, 8192)
    assert model._gemm_s(b, *gemm) - launch == pytest.approx(2 * (model._gemm_s(a, *gemm) - launch))
    forward_a, _ = model._attention_s(w, a)
    forward_b, _ = model._attention_s(w, b)
    assert forward_b - launch == pytest.approx(2 * (forward_a - launch))
    # Memory-bound kernels do not depend on it.
    assert model._stream_s(a, 1e9, 3) == model._stream_s(b, 1e9, 3)
