"""The job builders of scenario workloads: perftest traffic and NCCL collectives."""

from __future__ import annotations

import numpy as np

from cloudtwin.scenario.model import CollectiveWorkload, PerftestWorkload
from cloudtwin.topology.nvlink import Nvlink
from cloudtwin.twin.registry import JobInfo, JobPart, JobRequest, register_job
from cloudtwin.twin.routing import tenant_groups, tenant_name
from cloudtwin.workloads.collective import CollectivePlan, collective_jobs, plan_collective
from cloudtwin.workloads.perftest import TenantHosts, perftest_flows

__all__ = ["collective_job", "collective_part", "perftest_job"]


def _groups(request: JobRequest) -> list[TenantHosts]:
    """The tenants' host groups the job runs on (all of them when it names none)."""
    scenario = request.scenario
    groups = tenant_groups(scenario)
    if not request.tenants:
        return groups
    wanted = {i for i, t in enumerate(scenario.tenants) if t.name in request.tenants}
    return [g for g in groups if g[0] in wanted]


@register_job("perftest")
def perftest_job(request: JobRequest) -> JobPart:
    """RoCE test traffic: every QP is one engine flow, with its path's latency."""
    scenario, topology, workload = request.scenario, request.topology, request.workload
    assert isinstance(workload, PerftestWorkload)
    groups = _groups(request)
    sport_per_qp = scenario.hosts.udp_sport == "per-qp"
    flows = perftest_flows(workload, topology, groups, request.seed, sport_per_qp, job=0)
    names = request.tenants or tuple(tenant_name(scenario, g[0]) for g in groups)
    info = JobInfo(request.name, "perftest", names, float(workload.start))
    return JobPart.of_connections(flows, info, topology.nic_rate_bps)


@register_job("collective")
def collective_job(request: JobRequest) -> JobPart:
    """An NCCL collective, one job per tenant: QPs as connections, pipelined rounds as
    dependent flows, NVLink segments inside hosts (NCCL's latencies include the wire)."""
    scenario, topology, workload = request.scenario, request.topology, request.workload
    assert isinstance(workload, CollectiveWorkload)
    rng = np.random.default_rng(request.seed)
    nvlink = Nvlink.of(topology, scenario.hosts.gpus, scenario.hosts.nvlink)
    ranks = collective_jobs(workload, _groups(request), scenario.hosts.gpus, rng)
    plan = plan_collective(
        workload, topology, nvlink, ranks, rng, None, scenario.hosts.udp_sport == "per-qp"
    )
    start = float(getattr(workload, "start", 0.0))
    name = request.name
    infos = [
        JobInfo(
            name if len(ranks) == 1 and name != workload.op else f"{name}-{tenant_name(scenario, r.tenant)}",
            "collective",
            (tenant_name(scenario, r.tenant),),
            start,
        )
        for r in ranks
    ]
    return collective_part(plan, infos, start, nvlink.capacity_bps(topology), workload)


def collective_part(
    plan: CollectivePlan, infos: list[JobInfo], start: float | np.ndarray, capacity_bps: np.ndarray,
    workload: CollectiveWorkload,
) -> JobPart:
    """A planned collective as a job part starting at `start` (one value, or one per flow)."""
    unrolled = plan.unrolled
    return JobPart(
        connections=plan.connections,
        infos=infos,
        route=unrolled.route,
        size_bytes=unrolled.size_bytes,
        start_s=unrolled.start_s + start,
        rate_cap_bps=unrolled.rate_cap_bps,
        flow_job=np.asarray(unrolled.job, dtype=np.int64),
        with_latency=False,
        dependencies=unrolled.dependencies,
        segments=plan.segments,
        capacity_bps=capacity_bps,
        collective=workload,
        plan=plan,
    )
