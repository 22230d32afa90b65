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
from cloudtwin.routing.strategy import load_strategy
from cloudtwin.scenario.cluster import TrainingWorkload
from cloudtwin.scenario.model import Scenario
from cloudtwin.topology.builders import build_topology
from cloudtwin.topology.topology import Topology
from cloudtwin.twin import DataParallelRings, JobRequest, Workbench, build_job, run_jobs
from cloudtwin.workloads import training as model

__all__ = ["TrainingResult", "fabric_reduction_s", "predict_training"]


@dataclass(frozen=True)
class TrainingResult:
    """One configuration's predicted iteration."""

    gpus: int
    layout: model.Layout
    iteration_s: float
    tokens_per_s: float
    tflops_per_gpu: float
    mfu: float
    scaling_efficiency: float
    compute_s: float
    exposed_comm_s: float
    bubble_s: float
    pipeline_s: float
    dp_reduction_s: float
    memory_gb: float
    flows: int

    def to_json(self) -> dict[str, object]:
        """The documented JSON object of `cloudtwin train --json`."""
        return {
            "gpus": self.gpus,
            "layout": {
                "tensor": self.layout.tensor,
                "pipeline": self.layout.pipeline,
                "data": self.layout.data,
                "micro_batches": self.layout.micro_batches,
            },
            "iteration_s": self.iteration_s,
            "tokens_per_s": self.tokens_per_s,
            "tflops_per_gpu": self.tflops_per_gpu,
            "mfu": self.mfu,
            "scaling_efficiency": self.scaling_efficiency,
            "breakdown_s": {
                "compute": self.compute_s,
                "exposed_comm": self.exposed_comm_s,
                "bubble": self.bubble_s,
            },
            "dp_reduction_s": self.dp_reduction_s,
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


def fabric_reduction_s(
    scenario: Scenario,
    topology: Topology,
    spec: ClusterSpec,
    w: TrainingWorkload,
    lay: model.Layout,
    stage_start_s: np.ndarray,
    strategy: str | None = None,
) -> tuple[float, int]:
    """When the last data-parallel ring all-reduce finishes (engine time), and its flow count.

    Every data-parallel group is one NCCL ring all-reduce job (`workloads.collective`:
    channels as QPs, pipelined rounds with dependencies, NCCL's step latencies), all
    routed with the strategy and run together; stage k's rings start at
    `stage_start_s[k]`. NIC links carry what the (virtual) function moves.
    """
    if lay.data == 1:
        return 0.0, 0
    groups, stage = model.data_parallel_groups(w, lay)
    rings = DataParallelRings(
        spec=spec,
        groups=groups,
        stage=stage,
        stage_start_s=np.asarray(stage_start_s, dtype=float),
        size_bytes=int(model.data_parallel_allreduce_bytes(w)),
        channels=w.channels,
    )
    request = JobRequest(scenario, topology, rings, "dp", (), scenario.seed)
    bench = Workbench.of([build_job("data-parallel-rings", request)], topology)
    chosen = load_strategy(strategy or scenario.routing.strategy)
    result = run_jobs(scenario, topology, bench, chosen).result
    return result.completion_s, len(bench.size_bytes)


def _one(
    scenario: Scenario,
    topology: Topology,
    spec: ClusterSpec,
    w: TrainingWorkload,
    gpus: int,
    strategy: str | None,
    key: str,
) -> tuple[TrainingResult, float]:
    if w.tensor > spec.profile.gpus:
        raise WorkloadError(
            f"workload.tensor: {w.tensor} is more than the {spec.profile.gpus} GPUs of a "
            f"{spec.profile.name} node (tensor parallelism stays on NVLink)"
        )
    lay = model.layout(w, gpus, spec.gpus, key)
    memory_gb = _check_memory(w, spec, lay.data)
    times = model.stage_times(w, spec, lay.data)
    p, m = lay.pipeline, lay.micro_batches
    # Engine time 0: the last stage's reduction may start (its last backward ends
    # `overlap_window_s` later). Stage k ends (p-1-k) backward slots after the last
    # stage (1F1B cool-down), so its rings start that much later; stage 0 ends last.
    start = times.ring_offsets_s(p)
    stage0_end = float(start[0])
    done, flows = fabric_reduction_s(scenario, topology, spec, w, lay, start, strategy)
    dp_exposed = max(0.0, done - (stage0_end + times.overlap_window_s)) if done else 0.0
    pipeline = times.pipeline_s(p, m)
    compute = m * (times.forward_s + times.backward_s) + times.optimizer_s
    exposed = m * (times.slot_s - times.forward_s - times.backward_s) + dp_exposed
    bubble = times.bubble_s(p)
    iteration = pipeline + dp_exposed + times.optimizer_s
    tokens = w.global_batch * w.sequence / iteration
    flops = model.model_flops(w) / iteration / gpus
    result = TrainingResult(
        gpus=gpus, layout=lay, iteration_s=iteration, tokens_per_s=tokens,
        tflops_per_gpu=flops / 1e12, mfu=flops / spec.profile.peak_bf16_flops,
        scaling_efficiency=float("nan"), compute_s=compute, exposed_comm_s=exposed,
        bubble_s=bubble, pipeline_s=pipeline, dp_reduction_s=done, memory_gb=memory_gb,
        flows=flows,
    )
    return result, tokens / gpus


def _base_gpus(w: TrainingWorkload, spec: ClusterSpec) -> int:
    """The smallest GPU count that holds one model replica (and the batch, and memory)."""
    replica = w.tensor * w.pipeline
    for data in range(1, spec.gpus // replica + 1):
        if w.global_batch % (data * w.micro_batch):
            continue
        micro_batches = w.global_batch // (data * w.micro_batch)
        if w.virtual_stages > 1 and micro_batches % w.pipeline:
            continue
        if model.memory_per_gpu(w, data).total <= spec.profile.gpu_memory_bytes:
            return data * replica
    raise WorkloadError(
        f"workload: no data-parallel size up to {spec.gpus} GPUs fits the model in memory"
    )


def predict_training(
    scenario: Scenario,
    gpus: list[int] | None = None,
    strategy: str | None = None,
    progress: Progress | None = None,
) -> list[TrainingResult]:
    """Predicted iterations at each GPU count (default: `workload.gpus` or the whole cluster).

    Scaling efficiency is per-GPU throughput relative to the smallest configuration that
    holds one model replica (ideal linear scaling from there gives 1).
    """
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
    base_gpus = _base_gpus(w, spec)
    _, base_rate = _one(scenario, topology, spec, w, base_gpus, strategy, key)
    return [replace(result, scaling_efficiency=rate / base_rate) for result, rate in runs]

