"""LLM training: a decoder transformer under tensor, pipeline, context and data parallelism.

Analytic parts (no fabric): parameters and FLOPs (Narayanan et al. 2021, appendix,
generalised to grouped-query attention, gated MLPs and untied embeddings), memory per
GPU (mixed-precision Adam as Megatron and PyTorch FSDP keep it, activations after
Korthikanti et al. 2022), per-microbatch compute time of every GEMM (roofline at the
GPU's measured best GEMM efficiency, with NVIDIA's tile and wave quantization), of
attention (FlashAttention at its published efficiency, or the unfused kernels) and of
memory-bound kernels, a framework overhead per layer (fitted, see `FRAMEWORK`),
tensor-parallel collectives on NVLink and pipeline send/recv. The data-parallel traffic
runs on the fabric: this module says which GPUs communicate together and how much
(`fabric_collectives`); `evaluation.training` runs them as NCCL rings on the engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cloudtwin.errors import WorkloadError
from cloudtwin.scenario.cluster import TrainingWorkload

if TYPE_CHECKING:  # the cluster package sits above workloads; only its type is used here
    from cloudtwin.cluster.spec import ClusterSpec

__all__ = [
    "FRAMEWORK",
    "NET_STEP_LATENCY_S",
    "WORKSPACE_BYTES",
    "FabricCollective",
    "Framework",
    "Layout",
    "MemoryUse",
    "StageTimes",
    "bubble_fraction",
    "data_parallel_allreduce_bytes",
    "data_parallel_bytes_per_hop",
    "data_parallel_groups",
    "fabric_collectives",
    "hardware_flops",
    "layout",
    "memory_per_gpu",
    "model_flops",
    "parameters",
    "sm_share",
    "stage_times",
]

NET_STEP_LATENCY_S = 14e-6
"""Latency of a pipeline send across the network (NCCL's tuning model, Simple protocol)."""

WORKSPACE_BYTES = 3e9
"""GPU memory that is not the model's: CUDA context, cuBLAS workspace, NCCL buffers,
allocator fragmentation (a few GB is what PyTorch jobs on A100s commonly lose)."""

_BYTES = 2  # bf16 / fp16 activations and weights
_TILE = (256, 128)  # the largest cuBLAS tensor-core tile (NVIDIA, "Matrix Multiplication Background")


@dataclass(frozen=True)
class Framework:
    """What a training framework costs beyond its kernels' roofline times.

    `gemm_sustained`: fraction of the GPU's best measured GEMM throughput that the GEMMs
    of a training step sustain (clocks under a full board's power, L2 and SMs shared with
    the communication kernels that run beside them). `layer_overhead_s`: host-side time
    per layer, per microbatch and per pass (forward, backward) that no kernel hides
    (Python, autograd bookkeeping, launch gaps, synchronisations). Both are fitted, once,
    on the runs `benchmarks/training_published.py` names as its fit set; every other
    published run is validation.
    """

    gemm_sustained: float
    layer_overhead_s: float


FRAMEWORK = Framework(gemm_sustained=0.86, layer_overhead_s=550e-6)
"""The one set of constants every prediction uses (fit: see docs/reproducing-vela.md)."""


@dataclass(frozen=True)
class Layout:
    """How many GPUs in each parallel dimension, and microbatches per pipeline per iteration."""

    tensor: int
    pipeline: int
    data: int
    micro_batches: int
    context: int = 1

    @property
    def gpus(self) -> int:
        """GPUs the job uses."""
        return self.tensor * self.context * self.pipeline * self.data


def layout(workload: TrainingWorkload, gpus: int, gpus_available: int, key: str = "workload.gpus") -> Layout:
    """The parallel layout on `gpus` GPUs; WorkloadError naming `key` if it cannot be laid out."""
    replica = workload.tensor * workload.context * workload.pipeline
    if gpus % replica:
        raise WorkloadError(
            f"{key}: {gpus} GPUs is not a multiple of tensor x context x pipeline = {replica}"
            if workload.context > 1
            else f"{key}: {gpus} GPUs is not a multiple of tensor x pipeline = {replica}"
        )
    if gpus > gpus_available:
        raise WorkloadError(f"{key}: {gpus} GPUs is more than the cluster's {gpus_available}")
    data = gpus // replica
    per_step = data * workload.micro_batch
    if workload.global_batch % per_step:
        raise WorkloadError(
            f"workload.global_batch: {workload.global_batch} is not a multiple of "
            f"data parallel {data} x micro_batch {workload.micro_batch}"
        )
    micro_batches = workload.global_batch // per_step
    if workload.virtual_stages > 1 and micro_batches % workload.pipeline:
        raise WorkloadError(
            f"workload.virtual_stages: the interleaved schedule needs the {micro_batches} "
            f"micro-batches per pipeline at {gpus} GPUs to be a multiple of pipeline "
            f"{workload.pipeline}"
        )
    group = workload.sharding_group
    if workload.sharding == "hsdp" and group is not None and (data % group or group < 1):
        raise WorkloadError(
            f"workload.sharding_group: {group} does not divide the {data} data-parallel ranks at {gpus} GPUs"
        )
    return Layout(workload.tensor, workload.pipeline, data, micro_batches, workload.context)


# -- parameters and FLOPs -----------------------------------------------------------


def _kv_dim(w: TrainingWorkload) -> float:
    """Width of the keys (and of the values): kv heads x head size."""
    return w.kv * w.hidden / w.heads


def _layer_matmul_params(w: TrainingWorkload) -> float:
    """Weights of one layer's matrix multiplies: Q and output projection h^2 each, K and V
    h x kv_dim each, the MLP 2 h f (3 h f gated)."""
    h = w.hidden
    mlp = (3 if w.activation == "swiglu" else 2) * h * w.ffn
    return 2 * h * h + 2 * h * _kv_dim(w) + mlp


def _layer_params(w: TrainingWorkload) -> float:
    """All of one layer's parameters: matrices, biases (GPT's, not with RMSNorm/SwiGLU) and norms."""
    h = w.hidden
    if w.norm == "layernorm":
        biases = h + 2 * _kv_dim(w) + h + (w.ffn if w.activation == "gelu" else 0) + h
        norms = 4 * h
    else:
        biases, norms = 0.0, 2 * h
    return _layer_matmul_params(w) + biases + norms


def _embedding_params(w: TrainingWorkload) -> float:
    """Token embedding (and the output layer when untied) and learned positions."""
    h = w.hidden
    positions = w.sequence * h if w.position == "learned" else 0
    return w.vocabulary * h * (1 if w.tied_embeddings else 2) + positions


def parameters(w: TrainingWorkload) -> float:
    """Parameter count; for GPT layers 12 l h^2 (1 + 13/(12h) + (V+s)/(12lh)) (Narayanan et al. 2021).

    >>> round(parameters(TrainingWorkload(layers=96, hidden=12288, heads=96, vocabulary=51200)) / 1e9, 1)
    174.6
    """
    return w.layers * _layer_params(w) + _embedding_params(w)


def _layer_forward_flops(w: TrainingWorkload) -> float:
    """Forward FLOPs of one layer per token: 2 x matrix weights + 4 s h of attention
    (scores and values, counted whole as Megatron counts them)."""
    return 2 * _layer_matmul_params(w) + 4 * w.sequence * w.hidden


def model_flops(w: TrainingWorkload) -> float:
    """FLOPs of one iteration without recomputation; for GPT 72 B s l h^2 (1 + s/(6h) + V/(12lh)).

    (forward: the layers and the logits 2 h V per token; backward twice that). What MFU counts.
    """
    tokens = w.global_batch * w.sequence
    return 3.0 * tokens * (w.layers * _layer_forward_flops(w) + 2 * w.hidden * w.vocabulary)


def hardware_flops(w: TrainingWorkload) -> float:
    """FLOPs the GPUs execute: full recomputation runs the layers' forward twice, 96 B s l h^2
    (1 + s/(6h) + V/(16lh)) for GPT (Narayanan et al. 2021, eq. 3); selective recomputation
    runs the attention core (4 s h per token and layer) again."""
    tokens = w.global_batch * w.sequence
    layers = sum(w.recomputed(n) for n in w.stages())
    if w.recompute == "full":
        return model_flops(w) + tokens * layers * _layer_forward_flops(w)
    if w.recompute == "selective":
        return model_flops(w) + tokens * layers * 4 * w.sequence * w.hidden
    return model_flops(w)


def bubble_fraction(pipeline: int, micro_batches: int, virtual_stages: int = 1) -> float:
    """Idle fraction of a 1F1B pipeline: (p-1)/(m+p-1); with v model chunks per GPU
    (interleaved 1F1B) the bubble shrinks v-fold: ((p-1)/v)/(m+(p-1)/v) (Narayanan et al.
    2021, section 2.2.2).

    >>> bubble_fraction(4, 32), round(bubble_fraction(4, 32, 3), 4)
    (0.08571428571428572, 0.0303)
    """
    bubble = (pipeline - 1) / virtual_stages
    return bubble / (micro_batches + bubble)


# -- memory ----------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryUse:
    """Bytes per GPU on the busiest pipeline stage (the first: it holds p microbatches)."""

    weights_and_optimizer: float
    activations: float
    workspace: float

    @property
    def total(self) -> float:
        """All of it."""
        return self.weights_and_optimizer + self.activations + self.workspace


def _params_per_gpu(w: TrainingWorkload) -> float:
    """Parameters a GPU of the first stage holds before data-parallel sharding."""
    first = w.stages()[0]
    embedding = w.vocabulary * w.hidden + (w.sequence * w.hidden if w.position == "learned" else 0)
    if not w.tied_embeddings and w.pipeline == 1:
        embedding += w.vocabulary * w.hidden
    return (_layer_params(w) * first + embedding) / w.tensor


def _shards(w: TrainingWorkload, data: int) -> int:
    """Over how many ranks FSDP/HSDP shard the weights (the whole data group for FSDP)."""
    ranks = data * w.context
    if w.sharding == "hsdp":
        return min(ranks, w.sharding_group or _node_group(w, ranks))
    return ranks


def _node_group(w: TrainingWorkload, ranks: int) -> int:
    """HSDP's default shard group: the data ranks of one 8-GPU node."""
    per_node = max(1, 8 // (w.tensor * w.context))
    return math.gcd(ranks, per_node)


def _state_bytes_per_param(w: TrainingWorkload, data: int) -> float:
    """Weights (2 B), gradients (4 B fp32 main gradients, 2 B if reduced in bf16) and Adam's
    fp32 master weights and moments (12 B), each divided over the ranks that shard it."""
    grad = 4.0 if w.grad_reduce_dtype == "fp32" else 2.0
    ranks = data * w.context
    kind = w.sharding
    if kind in ("fsdp", "hsdp"):
        return (2 + grad + 12) / _shards(w, data)
    if kind == "zero2":
        return 2 + (grad + 12) / ranks
    if kind == "zero1":
        return 2 + grad + 12 / ranks
    return 2 + grad + 12


def _activation_bytes(w: TrainingWorkload) -> float:
    """Activations one layer keeps for one microbatch on one GPU (Korthikanti et al. 2022,
    broken down by tensor so that GQA, gated MLPs, sequence parallelism and FlashAttention
    each change their own part)."""
    s, b, h, a, t = w.sequence / w.context, w.micro_batch, w.hidden, w.heads, w.tensor
    kv, f = _kv_dim(w), w.ffn
    sp = t if w.sequence_parallel else 1
    # Replicated across the tensor group unless sequence parallel: the two norms' inputs
    # (4sbh), the inputs of QKV and of the MLP (2sbh each), two dropout masks (sbh each).
    replicated = s * b * h * 10 / sp
    attention = s * b * (2 * h + 4 * kv + 2 * h) / t  # Q, K, V, the output projection's input
    mlp = s * b * f * (6 if w.activation == "swiglu" else 4) / t  # activation's inputs, output
    scores = 0.0
    if w.attention == "standard" and w.recompute != "selective":
        scores = 5 * a * s * s * b * w.context / t  # softmax out (2), dropout mask (1), out (2)
    if w.attention == "flash":
        scores = 4 * a * s * b / t  # the softmax statistics, fp32
    return replicated + attention + mlp + scores


def memory_per_gpu(w: TrainingWorkload, data: int) -> MemoryUse:
    """Weights, gradients, optimizer state and activations per GPU.

    Mixed precision with Adam: bf16 weights (2 B), fp32 main gradients (4 B, or 2 B when
    reduced in bf16), fp32 master weights, momentum and variance (12 B); ZeRO-1 shards the
    12 B over the data-parallel ranks, ZeRO-2 the gradients too, FSDP everything (HSDP
    over its shard group), and FSDP holds two layers' bf16 weights unsharded (the one
    computing and the one prefetched; an unsharded gradient is reduce-scattered and freed
    as soon as its layer's backward ends). Activations per layer and microbatch as `_activation_bytes`; with
    full recomputation only each recomputed layer's input (2 s b h) is kept, plus one
    layer's activations while it is recomputed. With 1F1B the first stage holds p microbatches of
    its l/p layers: l layers' worth.
    """
    params = _params_per_gpu(w)
    weights = params * _state_bytes_per_param(w, data)
    if w.sharding in ("fsdp", "hsdp"):
        weights += 2 * _layer_params(w) / w.tensor * _BYTES
    per_layer = _activation_bytes(w)
    layers_held = w.stages()[0] * w.pipeline
    if w.recompute == "full":
        sp = w.tensor if w.sequence_parallel else 1
        stored = 2 * w.sequence / w.context * w.micro_batch * w.hidden / sp
        first = w.stages()[0]
        recomputed = w.recomputed(first) * w.pipeline
        activations = stored * recomputed + per_layer * (layers_held - recomputed) + per_layer
    else:
        activations = per_layer * layers_held
    # Interleaving keeps more microbatches in flight on the first stage: L (1 + (p-1)/(p v))
    # layers' worth (Korthikanti et al. 2022, pipeline parallelism with interleaving).
    if w.virtual_stages > 1:
        p, v = w.pipeline, w.virtual_stages
        activations *= 1 + (p - 1) / (p * v)
    logits = 0.0
    if w.pipeline == 1:
        logits = 4.0 * w.sequence / w.context * w.micro_batch * w.vocabulary / w.tensor * 2
    return MemoryUse(weights, activations + logits, WORKSPACE_BYTES)


# -- compute ---------------------------------------------------------------------


def _wave_efficiency(m: float, n: float, batch: float, sms: int) -> float:
    """Fraction of the tensor cores a GEMM's tiles keep busy: tile quantization (partial
    tiles at the edges) times wave quantization (the last wave of tiles over the SMs)
    (NVIDIA Deep Learning Performance Guide, "Matrix Multiplication Background"); the
    better of the two orientations of the 256 x 128 tile."""
    best = 0.0
    for tm, tn in (_TILE, _TILE[::-1]):
        tiles = math.ceil(m / tm) * math.ceil(n / tn) * batch
        used = m * n * batch / (tiles * tm * tn)
        waves = tiles / sms
        best = max(best, used * waves / math.ceil(waves))
    return best


def _gemm_s(spec: ClusterSpec, m: float, k: float, n: float, batch: float = 1.0) -> float:
    """Roofline time of a (batched) GEMM: the slower of math at the sustained GEMM
    efficiency (quantized to whole tiles and waves, each wave paying its tiles' fixed
    cost: `gemm_k_overhead`) and moving its operands through HBM, plus a kernel launch."""
    gpu = spec.profile
    flops = 2.0 * m * k * n * batch
    efficiency = gpu.gemm_efficiency_max * FRAMEWORK.gemm_sustained * gpu.clock_sustained
    efficiency *= _wave_efficiency(m, n, batch, gpu.sms) * k / (k + gpu.gemm_k_overhead)
    math_s = flops / (gpu.peak_bf16_flops * efficiency * spec.compute_factor)
    memory_s = _BYTES * (m * k + k * n + m * n) * batch / (gpu.hbm_bytes_per_s * gpu.hbm_efficiency)
    return max(math_s, memory_s) + gpu.kernel_launch_s


def _stream_s(spec: ClusterSpec, size_bytes: float, kernels: int) -> float:
    """Memory-bound kernels (norms, softmax, dropout, bias, activation, residual) moving `size_bytes`."""
    gpu = spec.profile
    rate = gpu.hbm_bytes_per_s * gpu.hbm_efficiency * spec.compute_factor
    return size_bytes / rate + kernels * gpu.kernel_launch_s


def _attention_s(w: TrainingWorkload, spec: ClusterSpec) -> tuple[float, float]:
    """(forward, backward) of the attention core for one microbatch on one GPU.

    FlashAttention: causal attention computes half of the 4 b s^2 h FLOPs, at the
    kernel's published efficiency; its backward does 2.5 times the forward's matmuls (it
    recomputes the scores). Unfused: two batched GEMMs of head size, a fused
    scale-mask-softmax and dropout over the b a s^2 scores; backward twice the forward.
    """
    b, s, h, a, t, c = w.micro_batch, w.sequence, w.hidden, w.heads, w.tensor, w.context
    heads = b * a / t
    if w.attention == "flash":
        flops = 2.0 * b * (s / c) * s * h / t
        gpu = spec.profile
        efficiency = gpu.flash_attention_efficiency * gpu.clock_sustained
        rate = gpu.peak_bf16_flops * efficiency * spec.compute_factor
        forward = flops / rate + spec.profile.kernel_launch_s
        return forward, 2.5 * forward
    rows = s / c
    gemms = _gemm_s(spec, rows, h / a, s, heads) + _gemm_s(spec, rows, s, h / a, heads)
    softmax = _stream_s(spec, 9.0 * heads * rows * s, kernels=1)
    forward = gemms + softmax
    return forward, 2 * forward


def _elementwise_bytes(w: TrainingWorkload) -> tuple[float, int]:
    """(bytes per token, kernels) of one layer's forward outside its GEMMs and attention.

    Fused (Megatron's fused kernels, torch.compile, Triton): each norm reads and writes
    b s h once, each bias-dropout-residual reads 2 and writes 1, the activation reads the
    MLP's width and writes its output (SwiGLU reads two halves), RoPE reads and writes Q
    and K: six kernels. Eager PyTorch (`kernels: eager`) runs one kernel per operator, as
    the reference Llama layers write them: RMSNorm upcasts to fp32, squares, averages,
    scales, casts back and multiplies by its weight (36 bytes per element against 4);
    SwiGLU is silu then a product (10 against 6 bytes per element of the FFN width); RoPE
    multiplies by cos and sin, rotates halves and adds (20 against 4 bytes per element of
    Q and K); the attention output is made contiguous again (4 bytes per element).
    LayerNorm and GeLU are single kernels either way. Split over the tensor group (the
    norms and residuals too with sequence parallelism).
    """
    h, t, kv, f = w.hidden, w.tensor, _kv_dim(w), w.ffn
    sp = t if w.sequence_parallel else 1
    eager = w.kernels == "eager"
    rms_eager = eager and w.norm == "rmsnorm"
    norm = 36.0 if rms_eager else 4.0
    per_token = (2 * norm * h + 2 * 6.0 * h) / sp
    if w.activation == "swiglu":
        per_token += (10.0 if eager else 6.0) * f / t
    else:
        per_token += 4.0 * f / t
    kernels = 6
    if w.position == "rope":
        per_token += (20.0 if eager else 4.0) * (h + kv) / t
    if eager:
        per_token += 4.0 * h / t
        kernels += 1 + (10 if rms_eager else 0) + (1 if w.activation == "swiglu" else 0)
        kernels += 8 if w.position == "rope" else 0
    return per_token, kernels


def _layer_forward_s(w: TrainingWorkload, spec: ClusterSpec) -> tuple[float, float]:
    """(forward, backward) of one transformer layer for one microbatch on one GPU,
    framework overhead included."""
    b, s, h, t = w.micro_batch, w.sequence / w.context, w.hidden, w.tensor
    tokens = b * s
    kv, f = _kv_dim(w), w.ffn
    up = 2 * f if w.activation == "swiglu" else f
    gemms = (
        _gemm_s(spec, tokens, h, (h + 2 * kv) / t)  # QKV projection
        + _gemm_s(spec, tokens, h / t, h)  # output projection
        + _gemm_s(spec, tokens, h, up / t)  # MLP up (and gate)
        + _gemm_s(spec, tokens, f / t, h)  # MLP down
    )
    attention_fwd, attention_bwd = _attention_s(w, spec)
    elementwise, kernels = _elementwise_bytes(w)
    stream = _stream_s(spec, elementwise * tokens, kernels=kernels)
    overhead = FRAMEWORK.layer_overhead_s
    forward = gemms + attention_fwd + stream + overhead
    backward = 2 * gemms + attention_bwd + 2 * stream + overhead
    return forward, backward


def _logits_forward_s(w: TrainingWorkload, spec: ClusterSpec) -> float:
    """The output layer (h x V/t GEMM) and cross-entropy in fp32 on the last stage."""
    tokens = w.micro_batch * w.sequence / w.context
    vocab = w.vocabulary / w.tensor
    return _gemm_s(spec, tokens, w.hidden, vocab) + _stream_s(spec, 3 * 4.0 * tokens * vocab, 3)


def _tp_allreduce_s(w: TrainingWorkload, spec: ClusterSpec) -> float:
    """One tensor-parallel all-reduce (or reduce-scatter + all-gather with sequence
    parallelism: the same bytes) of the b s h activations over NVLink (ring)."""
    t = w.tensor
    if t == 1:
        return 0.0
    size = _BYTES * w.micro_batch * w.sequence / w.context * w.hidden
    gpu = spec.profile
    transfer = 2 * (t - 1) / t * size / gpu.nvlink_allreduce_busbw_bytes_per_s
    return transfer + 2 * (t - 1) * gpu.nvlink_latency_s


def _context_exchange_s(w: TrainingWorkload, spec: ClusterSpec, attention_s: float) -> float:
    """What context parallelism's ring exchange of keys and values adds to one layer's
    forward: c-1 steps each passing a chunk's K and V, overlapped with the attention
    that uses the previous chunk (Megatron-Core's ring attention); over NVLink while the
    context group fits in a node, else over the GPU's NIC."""
    c = w.context
    if c == 1:
        return 0.0
    chunk = 2 * _BYTES * w.micro_batch * w.sequence / c * _kv_dim(w) / w.tensor
    gpu = spec.profile
    if w.tensor * c <= gpu.gpus:
        step = chunk / gpu.nvlink_bytes_per_s + gpu.nvlink_latency_s
    else:
        gpus_per_nic = max(1, gpu.gpus // max(1, spec.nics_per_node))
        step = chunk * gpus_per_nic / (spec.nic_rate_cap_bps / 8) + NET_STEP_LATENCY_S
    return max(0.0, (c - 1) * step - attention_s * (c - 1) / c)


def _p2p_s(w: TrainingWorkload, spec: ClusterSpec) -> float:
    """Send one microbatch's activations to the next stage (or gradients back).

    Megatron's scatter-gather: each of the t ranks sends 1/t of the b s h tensor over
    its NIC, then the receivers all-gather it over NVLink.
    """
    if w.pipeline == 1:
        return 0.0
    size = _BYTES * w.micro_batch * w.sequence / w.context * w.hidden
    t = w.tensor
    gpus_per_nic = max(1, -(-min(t, spec.profile.gpus) // max(1, spec.nics_per_node)))
    net = size / t * gpus_per_nic / (spec.nic_rate_cap_bps / 8)
    net += NET_STEP_LATENCY_S + spec.overheads.nic_latency_s
    gather = 0.0
    if t > 1 and not w.sequence_parallel:
        gather = (t - 1) / t * size / spec.profile.nvlink_bytes_per_s + spec.profile.nvlink_latency_s
    return net + gather


def _optimizer_s(w: TrainingWorkload, spec: ClusterSpec, data: int) -> float:
    """Adam step, memory bound: read main grad, master weight, m, v (16 B), write
    master, m, v and the bf16 weight (14 B) per parameter (a shard of them if sharded)."""
    ranks = data * w.context
    shards = {"ddp": 1, "zero1": ranks, "zero2": ranks, "fsdp": ranks}.get(w.sharding)
    params = _params_per_gpu(w) / (shards or _shards(w, data))
    return _stream_s(spec, 30.0 * params, kernels=4)


@dataclass(frozen=True)
class StageTimes:
    """Per-microbatch times on the slowest stage and per-iteration fixed costs (seconds)."""

    forward_s: float
    backward_s: float
    tp_comm_s: float
    p2p_s: float
    optimizer_s: float
    overlap_window_s: float
    virtual_stages: int = 1
    layer_forward_s: float = 0.0
    layer_backward_s: float = 0.0

    @property
    def slot_s(self) -> float:
        """One forward and one backward of a microbatch, with their communication (with v
        model chunks per GPU a microbatch crosses v stage boundaries per GPU each way)."""
        return self.forward_s + self.backward_s + self.tp_comm_s + 2 * self.virtual_stages * self.p2p_s

    @property
    def backward_slot_s(self) -> float:
        """What separates the end of one stage's last backward from the stage before's
        (one model chunk's backward: 1/v of the GPU's layers)."""
        v = self.virtual_stages
        return (self.backward_s + self.tp_comm_s / 2) / v + self.p2p_s

    def bubble_s(self, pipeline: int) -> float:
        """Idle time of the pipeline per iteration: (p-1)/v slots."""
        return (pipeline - 1) / self.virtual_stages * self.slot_s

    def pipeline_s(self, pipeline: int, micro_batches: int) -> float:
        """Compute, in-stage communication and bubble of one iteration: m slots + bubble."""
        return micro_batches * self.slot_s + self.bubble_s(pipeline)

    def ring_offsets_s(self, pipeline: int) -> np.ndarray:
        """When each stage's gradient reduction may start, after the last stage's: stage k
        ends its last backward p-1-k chunk backwards later (1F1B cool-down)."""
        return (pipeline - 1 - np.arange(pipeline)) * self.backward_slot_s


def stage_times(w: TrainingWorkload, spec: ClusterSpec, data: int) -> StageTimes:
    """Compute and in-stage communication of one microbatch on the slowest pipeline stage.

    Backward is twice the forward's GEMMs (data and weight gradients); full
    recomputation adds one more forward, selective recomputation the attention core's.
    Tensor-parallel collectives: 2 in forward, 2 in backward (2 more when recomputing
    fully), on the critical path as in Megatron. The slowest stage is the one with the
    most layers, the last stage's logits counted. The overlap window is the backward of
    the last microbatch after the first layer's gradients are ready: the time a bucketed
    gradient reduction (PyTorch DDP's buckets, Li et al. VLDB 2020; Megatron-Core's
    `overlap_grad_reduce`) can hide behind; with gradient accumulation over microbatches
    nothing is reduced before the last one. With an interleaved schedule the window is
    kept at one microbatch's backward of all the GPU's layers.
    """
    layer_f, layer_b = _layer_forward_s(w, spec)
    attention_f, attention_b = _attention_s(w, spec)
    exchange = _context_exchange_s(w, spec, attention_f)
    layer_f += exchange
    layer_b += 2 * exchange
    again = layer_f if w.recompute == "full" else attention_f if w.recompute == "selective" else 0.0
    logits = _logits_forward_s(w, spec)
    stages = w.stages()
    times = [(n * layer_f, n * layer_b + w.recomputed(n) * again) for n in stages]
    times[-1] = (times[-1][0] + logits, times[-1][1] + 2 * logits)
    slowest = max(range(len(stages)), key=lambda k: times[k][0] + times[k][1])
    forward, backward = times[slowest]
    layers = stages[slowest]
    extra = 2 * w.recomputed(layers) if w.recompute == "full" else 0
    tp = _tp_allreduce_s(w, spec) * (4 * layers + extra)
    window = 0.0
    if w.overlap_grad_reduce:
        window = backward * (layers - 1) / layers
    return StageTimes(
        forward, backward, tp, _p2p_s(w, spec), _optimizer_s(w, spec, data), window,
        w.virtual_stages, layer_f, layer_b,
    )


# -- data-parallel traffic ----------------------------------------------------------


def sm_share(w: TrainingWorkload, spec: ClusterSpec) -> float:
    """Fraction of a GPU's SMs that NCCL's kernels hold while a collective runs beside the
    compute: one SM per channel (NCCL runs each channel as one thread block), with the
    channels a data-parallel ring uses (`channels` per GPU of the group on a node)."""
    gpu = spec.profile
    channels = min(64, w.channels * max(1, gpu.gpus // (w.tensor * w.context)))
    return min(0.5, channels / gpu.sms)


def data_parallel_allreduce_bytes(w: TrainingWorkload) -> float:
    """Size of the ring all-reduce that moves what one iteration's gradient reduction moves
    (per GPU of the first stage).

    DDP: all-reduce of the gradients (fp32 by default, as Megatron reduces bf16 training's
    main gradients). ZeRO-1/2 reduce-scatter the gradients and all-gather the bf16
    weights: (d-1)/d of each per hop in 2(d-1) steps, which is what an all-reduce of half
    their sum moves. FSDP and HSDP: see `fabric_collectives`.
    """
    params = _params_per_gpu(w)
    grad = params * (4 if w.grad_reduce_dtype == "fp32" else 2)
    if w.sharding in ("zero1", "zero2"):
        return (grad + _BYTES * params) / 2
    return grad


def data_parallel_bytes_per_hop(w: TrainingWorkload, data: int) -> float:
    """Bytes each ring hop carries per iteration: 2(d-1)/d of the all-reduce size."""
    return 2 * (data - 1) / data * data_parallel_allreduce_bytes(w)


def _ranks(lay: Layout, order: str) -> np.ndarray:
    """Global rank of every (tensor i, context c, data j, pipeline k), shape (t, c, d, p)."""
    i, c, j, k = np.meshgrid(
        np.arange(lay.tensor), np.arange(lay.context), np.arange(lay.data), np.arange(lay.pipeline),
        indexing="ij",
    )
    inner = i + lay.tensor * c
    width = lay.tensor * lay.context
    if order == "tp-dp-pp":
        return inner + width * (j + lay.data * k)
    return inner + width * (k + lay.pipeline * j)


def data_parallel_groups(w: TrainingWorkload, lay: Layout) -> tuple[np.ndarray, np.ndarray]:
    """(GPUs of each gradient-reduction group in rank order, shape (t*p, c*d); each group's stage).

    The GPUs with the same tensor and pipeline rank reduce their gradients together (over
    the data and context ranks); rank = global GPU id (node x GPUs per node + local GPU),
    laid out as `w.layout` says.
    """
    ranks = _ranks(lay, w.layout)  # (t, c, d, p)
    groups = ranks.transpose(0, 3, 2, 1).reshape(lay.tensor * lay.pipeline, lay.data * lay.context)
    stage = np.tile(np.arange(lay.pipeline), lay.tensor)
    return groups, stage


@dataclass(frozen=True)
class FabricCollective:
    """One kind of data-parallel traffic: ring all-reduces over `groups` (rows, rank order)
    moving `size_bytes` each, `repeat` times per iteration; `per_microbatch` traffic
    (FSDP's gathers and scatters) runs beside the compute of every microbatch, the rest
    (a gradient reduction) after the last backward."""

    name: str
    groups: np.ndarray
    stage: np.ndarray
    size_bytes: float
    repeat: int
    per_microbatch: bool


def _split_groups(groups: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """HSDP: each gradient group split into shard groups of `width` consecutive ranks, and
    the replica groups (the same shard position in every shard group)."""
    n, d = groups.shape
    blocks = groups.reshape(n, d // width, width)
    shard = blocks.reshape(n * (d // width), width)
    replica = blocks.transpose(0, 2, 1).reshape(n * width, d // width)
    return shard, replica


def fabric_collectives(w: TrainingWorkload, lay: Layout) -> list[FabricCollective]:
    """The data-parallel traffic of one iteration, as ring all-reduces of equal bytes.

    DDP and ZeRO-1/2: one reduction after the last backward (`data_parallel_allreduce_bytes`).
    FSDP (ZeRO-3): every microbatch all-gathers the bf16 weights in forward and again in
    backward and reduce-scatters the gradients: (d-1)/d of 2 W + G per hop, what a ring
    all-reduce of (2 W + G) / 2 moves. HSDP: that inside each shard group, and an
    all-reduce of the gradient shard (G / g) across the replicas after the last backward.
    """
    groups, stage = data_parallel_groups(w, lay)
    if groups.shape[1] == 1:
        return []
    params = _params_per_gpu(w)
    grad = params * (4 if w.grad_reduce_dtype == "fp32" else 2)
    kind = w.sharding
    if kind in ("ddp", "zero1", "zero2"):
        return [FabricCollective("reduce", groups, stage, data_parallel_allreduce_bytes(w), 1, False)]
    gathers = (2 * _BYTES * params + grad) / 2
    if kind == "fsdp":
        return [FabricCollective("shard", groups, stage, gathers, lay.micro_batches, True)]
    width = _shards(w, lay.data)
    shard, replica = _split_groups(groups, width)
    parts = []
    if width > 1:
        shard_stage = np.repeat(stage, groups.shape[1] // width)
        parts.append(FabricCollective("shard", shard, shard_stage, gathers, lay.micro_batches, True))
    if groups.shape[1] // width > 1:
        parts.append(FabricCollective("replica", replica, np.repeat(stage, width), grad / width, 1, False))
    return parts
