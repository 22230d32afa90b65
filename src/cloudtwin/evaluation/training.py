"""Predicting an LLM training iteration on a scenario's cluster and fabric, and its scaling.

The analytic stage model (`workloads.training`) gives compute, tensor-parallel and
pipeline times; the data-parallel gradient reduction runs on the fabric: each
data-parallel group is an NCCL ring all-reduce (`workloads.collective`: one QP per
channel, pipelined rounds whose dependencies make a ring move at its slowest hop's
pace), routed with the scenario's strategy and simulated by the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from cloudtwin.cluster.spec import ClusterSpec, cluster_spec
from cloudtwin.engine.simulator import Progress
from cloudtwin.errors import WorkloadError
from cloudtwin.scenario.cluster import TrainingWorkload
from cloudtwin.scenario.model import Scenario
from cloudtwin.topology.builders import build_topology
from cloudtwin.topology.topology import Topology
from cloudtwin.twin import DataParallelRings, JobRequest, Workbench, build_job, prepare, run_jobs
from cloudtwin.workloads import training as model

__all__ = ["TrainingResult", "fabric_reduction_s", "predict_training"]


@dataclass(frozen=True)
class TrainingResult:
    """One configuration's predicted iteration.

    `scaling_efficiency` is strong scaling: per-GPU throughput against the smallest
    configuration that trains the same global batch (`strong_base_gpus`).
    `weak_scaling_efficiency` holds the per-GPU batch instead: per-GPU throughput against
    `weak_base_gpus` GPUs (one node, or one model replica if that is larger) training
    their share of the batch (IBM's definition for Vela: seconds per iteration normalised
    by the batch, N nodes against one).
    """

    gpus: int
    layout: model.Layout
    iteration_s: float
    tokens_per_s: float
    tflops_per_gpu: float
    hardware_tflops_per_gpu: float
    mfu: float
    scaling_efficiency: float
    compute_s: float
    exposed_comm_s: float
    bubble_s: float
    pipeline_s: float
    dp_reduction_s: float
    memory_gb: float
    flows: int
    weak_scaling_efficiency: float = float("nan")
    strong_base_gpus: int = 0
    weak_base_gpus: int = 0
    sharded_exposed_s: float = 0.0

    def to_json(self) -> dict[str, object]:
        """The documented JSON object of `cloudtwin train --json`."""
        return {
            "gpus": self.gpus,
            "layout": {
                "tensor": self.layout.tensor,
                "pipeline": self.layout.pipeline,
                "data": self.layout.data,
                "context": self.layout.context,
                "micro_batches": self.layout.micro_batches,
            },
            "iteration_s": self.iteration_s,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_gpu_per_s": self.tokens_per_s / self.gpus,
            "tflops_per_gpu": self.tflops_per_gpu,
            "hardware_tflops_per_gpu": self.hardware_tflops_per_gpu,
            "mfu": self.mfu,
            "scaling_efficiency": self.scaling_efficiency,
            "weak_scaling_efficiency": self.weak_scaling_efficiency,
            "scaling_base_gpus": {"strong": self.strong_base_gpus, "weak": self.weak_base_gpus},
            "breakdown_s": {
                "compute": self.compute_s,
                "exposed_comm": self.exposed_comm_s,
                "bubble": self.bubble_s,
            },
            "dp_reduction_s": self.dp_reduction_s,
            "sharded_exposed_s": self.sharded_exposed_s,
            "memory_per_gpu_gb": self.memory_gb,
            "fabric_flows": self.flows,
        }


def _workload(scenario: Scenario) -> TrainingWorkload:
    workload = scenario.workload
    if not isinstance(workload, TrainingWorkload):
        raise WorkloadError(
            f"workload.kind: cloudtwin train needs kind training, got {workload.kind!r}"
        )
    return workload


def _check_memory(w: TrainingWorkload, spec: ClusterSpec, data: int) -> float:
    use = model.memory_per_gpu(w, data)
    limit = spec.profile.gpu_memory_bytes
    if use.total > limit:
        raise WorkloadError(
            f"workload: the model needs {use.total / 1e9:.1f} GB per GPU "
            f"(weights+optimizer {use.weights_and_optimizer / 1e9:.1f}, activations "
            f"{use.activations / 1e9:.1f}, workspace {use.workspace / 1e9:.1f}), more than the "
            f"{limit / 1e9:.0f} GB of a {spec.profile.name} GPU; raise tensor/pipeline, "
            f"set sharded_optimizer or recompute: full"
        )
    return use.total / 1e9


def fabric_ring_s(
    scenario: Scenario,
    topology: Topology,
    spec: ClusterSpec,
    w: TrainingWorkload,
    collective: model.FabricCollective,
    stage_start_s: np.ndarray,
    strategy: str | None = None,
) -> tuple[float, int]:
    """When the last ring of one kind of data-parallel traffic finishes (engine time), and
    its flow count.

    Every group is one NCCL ring all-reduce job (`workloads.collective`: channels as QPs,
    pipelined rounds with dependencies, NCCL's step latencies), all routed with the
    strategy and run together; stage k's rings start at `stage_start_s[k]`. NIC links
    carry what the (virtual) function moves.
    """
    rings = DataParallelRings(
        spec=spec,
        groups=collective.groups,
        stage=collective.stage,
        stage_start_s=np.asarray(stage_start_s, dtype=float),
        size_bytes=max(1, int(collective.size_bytes)),
        channels=w.channels,
    )
    request = JobRequest(scenario, topology, rings, "dp", (), scenario.seed)
    bench = Workbench.of([build_job("data-parallel-rings", request)], topology)
    result = run_jobs(prepare(scenario, strategy, topology=topology, bench=bench)).result
    return result.completion_s, len(bench.size_bytes)


def fabric_reduction_s(
    scenario: Scenario,
    topology: Topology,
    spec: ClusterSpec,
    w: TrainingWorkload,
    lay: model.Layout,
    stage_start_s: np.ndarray,
    strategy: str | None = None,
) -> tuple[float, int]:
    """When the last gradient reduction after the last backward finishes, and its flow count."""
    after = [c for c in model.fabric_collectives(w, lay) if not c.per_microbatch]
    if not after:
        return 0.0, 0
    return fabric_ring_s(scenario, topology, spec, w, after[0], stage_start_s, strategy)


def _sharded_exposed_s(
    scenario: Scenario,
    topology: Topology,
    spec: ClusterSpec,
    w: TrainingWorkload,
    lay: model.Layout,
    times: model.StageTimes,
    strategy: str | None,
) -> tuple[float, int]:
    """What FSDP's per-microbatch traffic adds to each microbatch, and its flow count.

    One layer's gathers and scatter run on the fabric as NCCL rings (so every layer's
    collective pays the ring's per-step latencies: FSDP communicates layer by layer); the
    forward's all-gathers (W of 2W + G bytes) prefetch behind the forward of the layers
    before them, the backward's all-gather and reduce-scatter behind the backward; the
    first layer's gather has nothing before it. While they overlap compute, the
    communication kernels hold one SM per channel, which the compute loses
    (`model.sm_share`).
    """
    shard = [c for c in model.fabric_collectives(w, lay) if c.per_microbatch]
    if not shard:
        return 0.0, 0
    layers = max(w.stages())
    per_layer = replace(shard[0], size_bytes=shard[0].size_bytes / layers)
    zero = np.zeros(lay.pipeline)
    done, flows = fabric_ring_s(scenario, topology, spec, w, per_layer, zero, strategy)
    done *= layers
    weights = 2.0 * 2  # bf16 bytes per parameter, gathered twice
    grad = 4.0 if w.grad_reduce_dtype == "fp32" else 2.0
    share_f = 2.0 / (weights + grad)
    hidden = (layers - 1) / layers
    lost = model.sm_share(w, spec)
    added = 0.0
    for comm, compute in ((done * share_f, times.forward_s), (done * (1 - share_f), times.backward_s)):
        slowed = compute + min(comm, compute) * lost / (1 - lost)
        added += slowed - compute + max(0.0, comm - slowed * hidden)
    return added + done * share_f / layers, flows


def _one(
    scenario: Scenario,
    topology: Topology,
    spec: ClusterSpec,
    w: TrainingWorkload,
    gpus: int,
    strategy: str | None,
    key: str,
) -> tuple[TrainingResult, float]:
    if w.tensor * w.context > spec.profile.gpus and w.tensor > spec.profile.gpus:
        raise WorkloadError(
            f"workload.tensor: {w.tensor} is more than the {spec.profile.gpus} GPUs of a "
            f"{spec.profile.name} node (tensor parallelism stays on NVLink)"
        )
    lay = model.layout(w, gpus, spec.gpus, key)
    memory_gb = _check_memory(w, spec, lay.data)
    times = model.stage_times(w, spec, lay.data)
    p, m, v = lay.pipeline, lay.micro_batches, w.virtual_stages
    sharded, sharded_flows = _sharded_exposed_s(scenario, topology, spec, w, lay, times, strategy)
    # Engine time 0: the last stage's reduction may start (its last backward ends
    # `overlap_window_s` later). Stage k ends (p-1-k) backward slots after the last
    # stage (1F1B cool-down), so its rings start that much later; stage 0 ends last.
    start = times.ring_offsets_s(p)
    stage0_end = float(start[0])
    done, flows = fabric_reduction_s(scenario, topology, spec, w, lay, start, strategy)
    dp_exposed = max(0.0, done - (stage0_end + times.overlap_window_s)) if done else 0.0
    # FSDP's exposed traffic lengthens every microbatch's slot, the bubble's too.
    pipeline = times.pipeline_s(p, m) + sharded * (m + (p - 1) / v)
    compute = m * (times.forward_s + times.backward_s) + times.optimizer_s
    bubble = times.bubble_s(p) + sharded * (p - 1) / v
    exposed = m * (times.slot_s - times.forward_s - times.backward_s + sharded) + dp_exposed
    iteration = pipeline + dp_exposed + times.optimizer_s
    tokens = w.global_batch * w.sequence / iteration
    flops = model.model_flops(w) / iteration / gpus
    result = TrainingResult(
        gpus=gpus, layout=lay, iteration_s=iteration, tokens_per_s=tokens,
        tflops_per_gpu=flops / 1e12,
        hardware_tflops_per_gpu=model.hardware_flops(w) / iteration / gpus / 1e12,
        mfu=flops / spec.profile.peak_bf16_flops,
        scaling_efficiency=float("nan"), compute_s=compute, exposed_comm_s=exposed,
        bubble_s=bubble, pipeline_s=pipeline, dp_reduction_s=done, memory_gb=memory_gb,
        flows=flows + sharded_flows, sharded_exposed_s=sharded * m,
    )
    return result, tokens / gpus


def _fits(w: TrainingWorkload, spec: ClusterSpec, data: int) -> bool:
    """Whether the batch splits over `data` replicas (and the schedule) and the model fits."""
    if w.global_batch % (data * w.micro_batch):
        return False
    micro_batches = w.global_batch // (data * w.micro_batch)
    if w.virtual_stages > 1 and micro_batches % w.pipeline:
        return False
    if w.sharding == "hsdp" and w.sharding_group is not None and data % w.sharding_group:
        return False
    return model.memory_per_gpu(w, data).total <= spec.profile.gpu_memory_bytes


def _whole_nodes(gpus: int, spec: ClusterSpec) -> bool:
    """Whether `gpus` GPUs fill whole nodes (or divide one): how ranks are placed."""
    per_node = spec.profile.gpus
    return gpus % per_node == 0 or per_node % gpus == 0


def _base_gpus(w: TrainingWorkload, spec: ClusterSpec) -> int:
    """Strong scaling's base: the smallest GPU count that trains the same global batch
    (a whole number of replicas that hold it, and fit in memory)."""
    replica = w.tensor * w.context * w.pipeline
    for data in range(1, spec.gpus // replica + 1):
        if _whole_nodes(data * replica, spec) and _fits(w, spec, data):
            return data * replica
    raise WorkloadError(
        f"workload: no data-parallel size up to {spec.gpus} GPUs fits the model in memory"
    )


def _weak_base(w: TrainingWorkload, spec: ClusterSpec, lay: model.Layout) -> tuple[TrainingWorkload, int]:
    """Weak scaling's base: one node (or one replica, if larger) training its share of the
    batch at the same per-GPU batch; more replicas if the model does not fit in fewer."""
    replica = w.tensor * w.context * w.pipeline
    per_replica = lay.micro_batches * w.micro_batch
    first = max(1, -(-spec.profile.gpus // replica))
    for data in range(min(first, lay.data), lay.data + 1):
        base = w.model_copy(update={"global_batch": per_replica * data, "gpus": None})
        if _whole_nodes(data * replica, spec) and _fits(base, spec, data):
            return base, data * replica
    return w, lay.gpus


def predict_training(
    scenario: Scenario,
    gpus: list[int] | None = None,
    strategy: str | None = None,
    progress: Progress | None = None,
) -> list[TrainingResult]:
    """Predicted iterations at each GPU count (default: `workload.gpus` or the whole cluster),
    with their strong and weak scaling efficiency (see `TrainingResult`)."""
    w = _workload(scenario)
    topology = build_topology(scenario)
    spec = cluster_spec(scenario, topology.nic_rate_bps)
    key = "gpus" if gpus else "workload.gpus"
    sizes = gpus or [w.gpus or spec.gpus]
    runs = []
    for done, n in enumerate(sizes):
        if progress is not None:
            progress(done, len(sizes))
        runs.append(_one(scenario, topology, spec, w, n, strategy, key))
    strong_gpus = _base_gpus(w, spec)
    _, strong_rate = _one(scenario, topology, spec, w, strong_gpus, strategy, key)
    weak_rates: dict[tuple[int, int], float] = {}
    results = []
    for result, rate in runs:
        base, weak_gpus = _weak_base(w, spec, result.layout)
        known = (weak_gpus, base.global_batch)
        if known not in weak_rates:
            weak_rates[known] = _one(scenario, topology, spec, base, weak_gpus, strategy, key)[1]
        base_rate = weak_rates[known]
        results.append(replace(
            result, scaling_efficiency=rate / strong_rate, weak_scaling_efficiency=rate / base_rate,
            strong_base_gpus=strong_gpus, weak_base_gpus=weak_gpus,
        ))
    return results
