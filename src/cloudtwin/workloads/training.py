"""LLM training: a decoder transformer under tensor, pipeline (1F1B) and data parallelism.

Analytic parts (no fabric): parameters and FLOPs (Narayanan et al. 2021, "Efficient
large-scale language model training on GPU clusters using Megatron-LM", appendix),
memory per GPU (Megatron's mixed-precision optimizer accounting and the activation
formula of Korthikanti et al. 2022), per-microbatch compute time of every GEMM and
memory-bound kernel on the roofline of the GPU, tensor-parallel all-reduces on NVLink
and pipeline send/recv. The data-parallel gradient reduction runs on the fabric: this
module says which GPUs reduce together and how much (`data_parallel_groups`,
`data_parallel_allreduce_bytes`); `evaluation.training` runs them as NCCL ring
all-reduces (`workloads.collective`) on the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cloudtwin.errors import WorkloadError
from cloudtwin.scenario.cluster import TrainingWorkload

if TYPE_CHECKING:  # the cluster package sits above workloads; only its type is used here
    from cloudtwin.cluster.spec import ClusterSpec

__all__ = [
    "NET_STEP_LATENCY_S",
    "WORKSPACE_BYTES",
    "Layout",
    "MemoryUse",
    "StageTimes",
    "bubble_fraction",
    "data_parallel_allreduce_bytes",
    "data_parallel_bytes_per_hop",
    "data_parallel_groups",
    "hardware_flops",
    "layout",
    "memory_per_gpu",
    "model_flops",
    "parameters",
    "stage_times",
]

NET_STEP_LATENCY_S = 14e-6
"""Latency of a pipeline send across the network (NCCL's tuning model, Simple protocol)."""

WORKSPACE_BYTES = 3e9
"""GPU memory that is not the model's: CUDA context, cuBLAS workspace, NCCL buffers,
allocator fragmentation (a few GB is what PyTorch jobs on A100s commonly lose)."""

_BYTES = 2  # bf16 / fp16 activations and weights


@dataclass(frozen=True)
class Layout:
    """How many GPUs in each parallel dimension, and microbatches per pipeline per iteration."""

    tensor: int
    pipeline: int
    data: int
    micro_batches: int

    @property
    def gpus(self) -> int:
        """GPUs the job uses."""
        return self.tensor * self.pipeline * self.data


def layout(workload: TrainingWorkload, gpus: int, gpus_available: int, key: str = "workload.gpus") -> Layout:
    """The parallel layout on `gpus` GPUs; WorkloadError naming `key` if it cannot be laid out."""
    replica = workload.tensor * workload.pipeline
    if gpus % replica:
        raise WorkloadError(
            f"{key}: {gpus} GPUs is not a multiple of tensor x pipeline = {replica}"
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
    return Layout(workload.tensor, workload.pipeline, data, micro_batches)


def parameters(w: TrainingWorkload) -> float:
    """Parameter count: 12 l h^2 (1 + 13/(12h) + (V+s)/(12lh)) (Narayanan et al. 2021).

    >>> round(parameters(TrainingWorkload(layers=96, hidden=12288, heads=96, vocabulary=51200)) / 1e9, 1)
    174.6
    """
    n, h = w.layers, w.hidden
    return 12 * n * h * h * (1 + 13 / (12 * h) + (w.vocabulary + w.sequence) / (12 * n * h))


def model_flops(w: TrainingWorkload) -> float:
    """FLOPs of one iteration without recomputation: 72 B s l h^2 (1 + s/(6h) + V/(12lh)).

    (forward 24Bslh^2 + 4Bs^2lh + 2BshV, backward twice that). This is what MFU counts.
    """
    b, s, n, h = w.global_batch, w.sequence, w.layers, w.hidden
    return 72.0 * b * s * n * h * h * (1 + s / (6 * h) + w.vocabulary / (12 * n * h))


def hardware_flops(w: TrainingWorkload) -> float:
    """FLOPs the GPUs execute: with full recomputation the layers' forward runs twice,
    96 B s l h^2 (1 + s/(6h) + V/(16lh)) (Narayanan et al. 2021, eq. 3)."""
    if w.recompute == "none":
        return model_flops(w)
    b, s, n, h = w.global_batch, w.sequence, w.layers, w.hidden
    return 96.0 * b * s * n * h * h * (1 + s / (6 * h) + w.vocabulary / (16 * n * h))


def bubble_fraction(pipeline: int, micro_batches: int, virtual_stages: int = 1) -> float:
    """Idle fraction of a 1F1B pipeline: (p-1)/(m+p-1); with v model chunks per GPU
    (interleaved 1F1B) the bubble shrinks v-fold: ((p-1)/v)/(m+(p-1)/v) (Narayanan et al.
    2021, section 2.2.2).

    >>> bubble_fraction(4, 32), round(bubble_fraction(4, 32, 3), 4)
    (0.08571428571428572, 0.0303)
    """
    bubble = (pipeline - 1) / virtual_stages
    return bubble / (micro_batches + bubble)


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
    h, t, p = w.hidden, w.tensor, w.pipeline
    layers = (12 * h * h + 13 * h) * w.layers / p
    embedding = (w.vocabulary + w.sequence) * h
    return (layers + embedding) / t


def memory_per_gpu(w: TrainingWorkload, data: int) -> MemoryUse:
    """Weights, gradients, optimizer state and activations per GPU.

    Mixed precision with Adam as Megatron keeps it: bf16 weights (2 B), fp32 main
    gradients (4 B, or 2 B when reduced in bf16), fp32 master weights, momentum and
    variance (12 B); a sharded (distributed) optimizer divides the 12 B (and the main
    gradients' fp32 copy, kept as a shard) over the data-parallel ranks. Activations per
    layer and microbatch: s b h (10 + 24/t + 5 a s/(h t)) bytes (Korthikanti et al. 2022,
    tensor parallel without sequence parallelism); with full recomputation only each
    layer's input (2 s b h) is kept, plus one layer's activations while it is recomputed.
    With 1F1B the first stage holds p microbatches of its l/p layers: l layers' worth.
    """
    grad_bytes = 4 if w.grad_reduce_dtype == "fp32" else 2
    state = 12.0 / data if w.sharded_optimizer else 12.0
    params = _params_per_gpu(w)
    weights = params * (2 + grad_bytes + state)
    s, b, h, a, t = w.sequence, w.micro_batch, w.hidden, w.heads, w.tensor
    per_layer = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    full = w.recompute == "full"
    activations = 2 * s * b * h * w.layers + per_layer if full else per_layer * w.layers
    # Interleaving keeps more microbatches in flight on the first stage: L (1 + (p-1)/(p v))
    # layers' worth (Korthikanti et al. 2022, pipeline parallelism with interleaving).
    if w.virtual_stages > 1:
        p, v = w.pipeline, w.virtual_stages
        activations *= 1 + (p - 1) / (p * v)
    logits = 4.0 * s * b * w.vocabulary / t * 2 if w.pipeline == 1 else 0.0
    return MemoryUse(weights, activations + logits, WORKSPACE_BYTES)


def _gemm_s(spec: ClusterSpec, m: float, k: float, n: float, batch: float = 1.0) -> float:
    """Roofline time of a (batched) GEMM: the slower of math at the measured best
    efficiency and moving its operands through HBM, plus a kernel launch."""
    gpu = spec.profile
    flops = 2.0 * m * k * n * batch
    math_s = flops / (gpu.peak_bf16_flops * gpu.gemm_efficiency_max * spec.compute_factor)
    memory_s = _BYTES * (m * k + k * n + m * n) * batch / (gpu.hbm_bytes_per_s * gpu.hbm_efficiency)
    return max(math_s, memory_s) + gpu.kernel_launch_s


def _stream_s(spec: ClusterSpec, size_bytes: float, kernels: int) -> float:
    """Memory-bound kernels (norms, softmax, dropout, bias, GeLU, residual) moving `size_bytes`."""
    gpu = spec.profile
    rate = gpu.hbm_bytes_per_s * gpu.hbm_efficiency * spec.compute_factor
    return size_bytes / rate + kernels * gpu.kernel_launch_s


def _layer_forward_s(w: TrainingWorkload, spec: ClusterSpec) -> float:
    """Forward time of one transformer layer for one microbatch on one tensor-parallel rank."""
    b, s, h, a, t = w.micro_batch, w.sequence, w.hidden, w.heads, w.tensor
    tokens = b * s
    gemms = (
        _gemm_s(spec, tokens, h, 3 * h / t)  # QKV projection
        + _gemm_s(spec, s, h / a, s, b * a / t)  # attention scores
        + _gemm_s(spec, s, s, h / a, b * a / t)  # attention over values
        + _gemm_s(spec, tokens, h / t, h)  # output projection
        + _gemm_s(spec, tokens, h, 4 * h / t)  # MLP up
        + _gemm_s(spec, tokens, 4 * h / t, h)  # MLP down
    )
    # Two layer norms (read+write), two fused bias-dropout-residual (read 2, write 1),
    # fused bias-GeLU on the 4h/t activations, fused scale-mask-softmax + dropout on the
    # b a s^2 / t scores (2+2 bytes, dropout 2+2 and a 1-byte mask).
    elementwise = _BYTES * (4 * tokens * h + 6 * tokens * h + 8 * tokens * h / t)
    elementwise += 9.0 * b * a * s * s / t
    return gemms + _stream_s(spec, elementwise, kernels=6)


def _logits_forward_s(w: TrainingWorkload, spec: ClusterSpec) -> float:
    """The output layer (h x V/t GEMM) and cross-entropy in fp32 on the last stage."""
    tokens = w.micro_batch * w.sequence
    vocab = w.vocabulary / w.tensor
    return _gemm_s(spec, tokens, w.hidden, vocab) + _stream_s(spec, 3 * 4.0 * tokens * vocab, 3)


def _tp_allreduce_s(w: TrainingWorkload, spec: ClusterSpec) -> float:
    """One tensor-parallel all-reduce of the b s h activations over NVLink (ring)."""
    t = w.tensor
    if t == 1:
        return 0.0
    size = _BYTES * w.micro_batch * w.sequence * w.hidden
    gpu = spec.profile
    transfer = 2 * (t - 1) / t * size / gpu.nvlink_allreduce_busbw_bytes_per_s
    return transfer + 2 * (t - 1) * gpu.nvlink_latency_s


def _p2p_s(w: TrainingWorkload, spec: ClusterSpec) -> float:
    """Send one microbatch's activations to the next stage (or gradients back).

    Megatron's scatter-gather: each of the t ranks sends 1/t of the b s h tensor over
    its NIC, then the receivers all-gather it over NVLink.
    """
    if w.pipeline == 1:
        return 0.0
    size = _BYTES * w.micro_batch * w.sequence * w.hidden
    t = w.tensor
    gpus_per_nic = max(1, -(-min(t, spec.profile.gpus) // max(1, spec.nics_per_node)))
    net = size / t * gpus_per_nic / (spec.nic_rate_cap_bps / 8)
    net += NET_STEP_LATENCY_S + spec.overheads.nic_latency_s
    gather = 0.0
    if t > 1:
        gather = (t - 1) / t * size / spec.profile.nvlink_bytes_per_s + spec.profile.nvlink_latency_s
    return net + gather


def _optimizer_s(w: TrainingWorkload, spec: ClusterSpec, data: int) -> float:
    """Adam step, memory bound: read main grad, master weight, m, v (16 B), write
    master, m, v and the bf16 weight (14 B) per parameter (a shard of them if sharded)."""
    params = _params_per_gpu(w) / (data if w.sharded_optimizer else 1)
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

    Backward is twice the forward (data and weight gradients); full recomputation adds
    one more forward. Tensor-parallel all-reduces: 2 in forward, 2 in backward (2 more
    when recomputing), on the critical path as in Megatron. The overlap window is the
    backward of the last microbatch after the first layer's gradients are ready: the
    time a bucketed gradient reduction (PyTorch DDP's buckets, Li et al. VLDB 2020;
    Megatron-Core's `overlap_grad_reduce`) can hide behind; with gradient accumulation
    over microbatches nothing is reduced before the last one. With an interleaved
    schedule the window is kept at one microbatch's backward of all the GPU's layers
    (its chunks' last backwards all fall in the cool-down).
    """
    layers = w.layers // w.pipeline
    layer = _layer_forward_s(w, spec)
    logits = _logits_forward_s(w, spec)
    recompute = 1 if w.recompute == "full" else 0
    forward = layers * layer + logits
    backward = layers * layer * (2 + recompute) + 2 * logits
    tp = _tp_allreduce_s(w, spec) * layers * (4 + 2 * recompute)
    window = 0.0
    if w.overlap_grad_reduce:
        window = backward * (layers - 1) / layers
    return StageTimes(
        forward, backward, tp, _p2p_s(w, spec), _optimizer_s(w, spec, data), window, w.virtual_stages
    )


def data_parallel_allreduce_bytes(w: TrainingWorkload) -> float:
    """Size of the ring all-reduce that moves what one iteration's gradient reduction moves.

    All-reduce of the gradients (fp32 by default, as Megatron reduces bf16 training's
    main gradients). A sharded optimizer reduce-scatters the gradients and all-gathers
    the bf16 weights: (d-1)/d of each per hop in 2(d-1) steps, which is what an
    all-reduce of half their sum moves.
    """
    params = _params_per_gpu(w)
    grad = params * (4 if w.grad_reduce_dtype == "fp32" else 2)
    if w.sharded_optimizer:
        return (grad + _BYTES * params) / 2
    return grad


def data_parallel_bytes_per_hop(w: TrainingWorkload, data: int) -> float:
    """Bytes each ring hop carries per iteration: 2(d-1)/d of the all-reduce size."""
    return 2 * (data - 1) / data * data_parallel_allreduce_bytes(w)


def _ranks(lay: Layout, order: str) -> np.ndarray:
    """Global rank of every (tensor i, data j, pipeline k), shape (t, d, p)."""
    i, j, k = np.meshgrid(
        np.arange(lay.tensor), np.arange(lay.data), np.arange(lay.pipeline), indexing="ij"
    )
    if order == "tp-dp-pp":
        return i + lay.tensor * (j + lay.data * k)
    return i + lay.tensor * (k + lay.pipeline * j)


def data_parallel_groups(w: TrainingWorkload, lay: Layout) -> tuple[np.ndarray, np.ndarray]:
    """(GPUs of each data-parallel group in rank order, shape (t*p, d); each group's stage).

    The GPUs with the same tensor and pipeline rank reduce their gradients together;
    rank = global GPU id (node x GPUs per node + local GPU), laid out as `w.layout` says.
    """
    ranks = _ranks(lay, w.layout)
    groups = ranks.transpose(0, 2, 1).reshape(lay.tensor * lay.pipeline, lay.data)
    stage = np.tile(np.arange(lay.pipeline), lay.tensor)
    return groups, stage
