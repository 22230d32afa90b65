"""Running a collective on the fabric and measuring it the way nccl-tests does.

`time` is when the job's last flow finished (all flows start at 0). The fabric's
link latency is not added to collective flows: NCCL's per-hop latencies, which the
plan puts between rounds, already include the wire. `algbw = size / time`
and `busbw = algbw x factor` (AllReduce 2(n-1)/n, AllGather/ReduceScatter/AlltoAll
(n-1)/n, Broadcast/SendRecv 1). With several jobs (one per tenant, all at once) the
reported time is the mean of the jobs' times.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cloudtwin.engine.simulator import Progress, SimResult
from cloudtwin.errors import WorkloadError
from cloudtwin.flows import Paths
from cloudtwin.routing.strategy import Strategy
from cloudtwin.scenario.model import CollectiveWorkload, Scenario
from cloudtwin.topology.topology import Topology
from cloudtwin.twin import JobRequest, Workbench, build_job, prepare, run_jobs
from cloudtwin.workloads.collective import CollectivePlan, bus_factor

__all__ = [
    "CollectiveMeasurement",
    "CollectiveRun",
    "collective_workload",
    "measure",
    "plan_for",
    "simulate_collective",
]


@dataclass(frozen=True)
class CollectiveMeasurement:
    """One row of the nccl-tests table."""

    size_bytes: int
    count: int
    time_s: float
    algbw_GBps: float
    busbw_GBps: float
    job_time_s: tuple[float, ...]
    algorithms: tuple[str, ...]

    def to_json(self) -> dict[str, float | int]:
        """`{"size_bytes", "time_us", "algbw_GBps", "busbw_GBps"}`."""
        return {
            "size_bytes": self.size_bytes,
            "time_us": self.time_s * 1e6,
            "algbw_GBps": self.algbw_GBps,
            "busbw_GBps": self.busbw_GBps,
        }


@dataclass(frozen=True, eq=False)
class CollectiveRun:
    """A simulated collective: its plan, every flow's path, the engine's result, the row."""

    plan: CollectivePlan
    paths: Paths
    result: SimResult
    measurement: CollectiveMeasurement


def collective_workload(scenario: Scenario) -> CollectiveWorkload:
    """The scenario's collective workload, or WorkloadError."""
    workload = scenario.workload
    if not isinstance(workload, CollectiveWorkload):
        raise WorkloadError(
            f"workload.kind: {scenario.name} runs {workload.kind}, not a collective "
            "(set workload.kind: collective)"
        )
    return workload


def _request(scenario: Scenario, topology: Topology, size_bytes: int | None) -> JobRequest:
    """The scenario's collective as a twin job (of `size_bytes`, default its own size)."""
    workload = collective_workload(scenario)
    if size_bytes is not None:
        workload = workload.model_copy(update={"size": int(size_bytes)})
    return JobRequest(scenario, topology, workload, workload.op, (), scenario.seed)


def plan_for(scenario: Scenario, topology: Topology, size_bytes: int | None = None) -> CollectivePlan:
    """The plan of the scenario's collective (jobs from its tenants, NVLink from its hosts)."""
    plan = build_job("collective", _request(scenario, topology, size_bytes)).plan
    assert plan is not None
    return plan


def simulate_collective(
    scenario: Scenario,
    topology: Topology,
    strategy: Strategy,
    size_bytes: int | None = None,
    progress: Progress | None = None,
) -> CollectiveRun:
    """Route the collective's QPs with `strategy`, run every round on the engine, measure it."""
    part = build_job("collective", _request(scenario, topology, size_bytes))
    bench = Workbench.of([part], topology)
    jobs = run_jobs(prepare(scenario, strategy, topology=topology, bench=bench), progress=progress)
    size = collective_workload(scenario).size if size_bytes is None else size_bytes
    plan = part.plan
    assert plan is not None
    return CollectiveRun(plan, jobs.paths, jobs.result, measure(scenario, plan, jobs.result, size))


def measure(
    scenario: Scenario, plan: CollectivePlan, result: SimResult, size_bytes: int
) -> CollectiveMeasurement:
    """The nccl-tests row of a simulated collective (times averaged over the jobs)."""
    workload = collective_workload(scenario)
    jobs = len(plan.jobs)
    job_time = np.zeros(jobs)
    np.maximum.at(job_time, plan.unrolled.job, result.finish_s)
    time_s = float(job_time.mean())
    algbw = size_bytes / time_s / 1e9
    factors = [bus_factor(workload.op, job.size) for job in plan.jobs]
    per_rank = workload.op in ("allgather", "reducescatter", "alltoall")
    ranks = plan.jobs[0].size
    return CollectiveMeasurement(
        size_bytes=size_bytes,
        count=size_bytes // 4 // (ranks if per_rank else 1),
        time_s=time_s,
        algbw_GBps=algbw,
        busbw_GBps=algbw * float(np.mean(factors)),
        job_time_s=tuple(float(t) for t in job_time),
        algorithms=tuple(plan.algorithms),
    )
