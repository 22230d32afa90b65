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

from cloudtwin.engine.simulator import Progress, SimResult, simulate
from cloudtwin.errors import WorkloadError
from cloudtwin.routing.strategy import Strategy
from cloudtwin.scenario.model import CollectiveWorkload, Scenario
from cloudtwin.topology.nvlink import Nvlink
from cloudtwin.topology.paths import Paths
from cloudtwin.topology.topology import Topology
from cloudtwin.workloads.collective import (
    CollectivePlan,
    bus_factor,
    collective_jobs,
    plan_collective,
)

__all__ = ["CollectiveMeasurement", "CollectiveRun", "measure", "plan_for", "simulate_collective"]


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


def plan_for(scenario: Scenario, topology: Topology, size_bytes: int | None = None) -> CollectivePlan:
    """The plan of the scenario's collective (jobs from its tenants, NVLink from its hosts)."""
    from cloudtwin.evaluation.run import tenant_groups

    workload = collective_workload(scenario)
    rng = np.random.default_rng(scenario.seed)
    nvlink = Nvlink.of(topology, scenario.hosts.gpus, scenario.hosts.nvlink)
    jobs = collective_jobs(workload, tenant_groups(scenario), scenario.hosts.gpus, rng)
    return plan_collective(
        workload, topology, nvlink, jobs, rng, size_bytes, scenario.hosts.udp_sport == "per-qp"
    )


def simulate_collective(
    scenario: Scenario,
    topology: Topology,
    strategy: Strategy,
    size_bytes: int | None = None,
    progress: Progress | None = None,
) -> CollectiveRun:
    """Route the collective's QPs with `strategy`, run every round on the engine, measure it."""
    from cloudtwin.evaluation.run import route_flows

    plan = plan_for(scenario, topology, size_bytes)
    routed = route_flows(scenario, topology, plan.connections, strategy)
    paths = plan.flow_paths(routed)
    unrolled = plan.unrolled
    from cloudtwin.evaluation.run import couple_scenario_nics

    coupled = couple_scenario_nics(scenario, topology, plan.nvlink.capacity_bps(topology), paths)
    result = simulate(
        coupled.paths,
        coupled.capacity_bps,
        unrolled.size_bytes,
        unrolled.start_s,
        unrolled.rate_cap_bps,
        latency_s=coupled.extra_latency_s if coupled.changed else None,
        dependencies=unrolled.dependencies,
        progress=progress,
    )
    size = collective_workload(scenario).size if size_bytes is None else size_bytes
    return CollectiveRun(plan, paths, result, measure(scenario, plan, result, size))


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
