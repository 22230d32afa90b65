"""Predicting HPL on a scenario's cluster: ring bandwidths from the fabric, then the LU steps.

The panel broadcasts (along process rows) and the row swaps (along process columns)
are rings; every row (or column) communicates at once, so their inter-node hops are
routed with the scenario's strategy and simulated together by the engine; a ring runs
at the pace of its slowest hop, and MPI reaches `MPI_BANDWIDTH_EFFICIENCY` of that
pace. Rings entirely inside a VM ride NVLink. The same
model on one VM (its GPUs in a near-square grid, the same memory per GPU) is the
reference for per-GPU efficiency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cloudtwin.cluster.spec import ClusterSpec, cluster_spec
from cloudtwin.errors import WorkloadError
from cloudtwin.scenario.cluster import HplWorkload
from cloudtwin.scenario.model import Scenario
from cloudtwin.topology.builders import build_topology
from cloudtwin.topology.topology import Topology
from cloudtwin.twin import HplRings, JobRequest, Workbench, build_job, prepare, run_jobs
from cloudtwin.workloads import hpl as model

__all__ = ["HplResult", "predict_hpl", "single_vm_grid"]

_PROBE_BYTES = model.PROBE_BYTES


@dataclass(frozen=True)
class HplResult:
    """One HPL run's prediction."""

    n: int
    nb: int
    p: int
    q: int
    time_s: float
    tflops: float
    tflops_per_gpu: float
    single_vm_tflops_per_gpu: float
    relative_to_single_vm: float
    row_gbps: float
    column_gbps: float
    update_s: float
    exposed_panel_s: float
    swap_s: float

    def to_json(self) -> dict[str, object]:
        """The documented JSON object of `cloudtwin hpl --json`."""
        return {
            "n": self.n, "nb": self.nb, "p": self.p, "q": self.q, "gpus": self.p * self.q,
            "time_s": self.time_s, "tflops": self.tflops, "tflops_per_gpu": self.tflops_per_gpu,
            "single_vm_tflops_per_gpu": self.single_vm_tflops_per_gpu,
            "relative_to_single_vm": self.relative_to_single_vm,
            "ring_gbps": {"row": self.row_gbps, "column": self.column_gbps},
            "breakdown_s": {
                "update": self.update_s, "exposed_panel": self.exposed_panel_s, "swap": self.swap_s,
            },
        }


def single_vm_grid(gpus: int) -> tuple[int, int]:
    """The most square P x Q (P <= Q) of one VM's GPUs: 8 -> (2, 4)."""
    p = max(d for d in range(1, math.isqrt(gpus) + 1) if gpus % d == 0)
    return p, gpus // p


def _ring(
    scenario: Scenario, topology: Topology, spec: ClusterSpec, w: HplWorkload, along: str,
    strategy: str | None,
) -> tuple[float, float]:
    """(bytes/s, per-message latency) of the rings along rows or columns."""
    rings = HplRings(spec, w, along, _PROBE_BYTES)
    part = build_job("hpl-rings", JobRequest(scenario, topology, rings, f"hpl-{along}", (), scenario.seed))
    if len(part.connections) == 0:
        return spec.profile.nvlink_bytes_per_s, spec.profile.nvlink_latency_s
    bench = Workbench.of([part], topology)
    result = run_jobs(prepare(scenario, strategy, topology=topology, bench=bench)).result
    latency = model.MPI_LATENCY_S + spec.overheads.nic_latency_s
    return model.MPI_BANDWIDTH_EFFICIENCY * _PROBE_BYTES / result.completion_s, latency


def _run(
    scenario: Scenario, topology: Topology, spec: ClusterSpec, w: HplWorkload, strategy: str | None,
) -> tuple[model.HplTimes, float, float]:
    model.check_fits(w, spec)
    row_bw, row_lat = _ring(scenario, topology, spec, w, "row", strategy)
    col_bw, col_lat = _ring(scenario, topology, spec, w, "column", strategy)
    return model.hpl_times(w, spec, row_bw, col_bw, row_lat, col_lat), row_bw, col_bw


def predict_hpl(scenario: Scenario, strategy: str | None = None) -> HplResult:
    """HPL time and TFLOPS on the scenario's grid, and per-GPU FLOPS relative to one VM."""
    w = scenario.workload
    if not isinstance(w, HplWorkload):
        raise WorkloadError(f"workload.kind: cloudtwin hpl needs kind hpl, got {w.kind!r}")
    topology = build_topology(scenario)
    spec = cluster_spec(scenario, topology.nic_rate_bps)
    times, row_bw, col_bw = _run(scenario, topology, spec, w, strategy)
    gpus = w.p * w.q
    per_gpu = model.hpl_flops(w.n) / times.total_s / gpus
    vm_p, vm_q = single_vm_grid(spec.profile.gpus)
    n_ref = int(w.n * math.sqrt(vm_p * vm_q / gpus)) // w.nb * w.nb or w.nb
    reference = w.model_copy(update={"n": n_ref, "p": vm_p, "q": vm_q})
    ref_times, _, _ = _run(scenario, topology, spec, reference, strategy)
    ref_per_gpu = model.hpl_flops(n_ref) / ref_times.total_s / (vm_p * vm_q)
    return HplResult(
        n=w.n, nb=w.nb, p=w.p, q=w.q, time_s=times.total_s, tflops=per_gpu * gpus / 1e12,
        tflops_per_gpu=per_gpu / 1e12, single_vm_tflops_per_gpu=ref_per_gpu / 1e12,
        relative_to_single_vm=per_gpu / ref_per_gpu, row_gbps=row_bw * 8 / 1e9,
        column_gbps=col_bw * 8 / 1e9, update_s=times.update_s,
        exposed_panel_s=times.exposed_panel_s, swap_s=times.swap_s,
    )
