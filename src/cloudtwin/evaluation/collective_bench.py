"""A collective workload (issue 3's NCCL model) as a Workbench, and its busbw from a run."""

from __future__ import annotations

from typing import Any

from cloudtwin.engine.simulator import SimResult
from cloudtwin.evaluation.jobs import JobInfo, Workbench, tenant_name
from cloudtwin.scenario.model import Scenario
from cloudtwin.topology.topology import Topology

__all__ = ["collective_busbw", "collective_workbench"]


def collective_workbench(scenario: Scenario, topology: Topology) -> Workbench:
    """The collective's QPs (routed), its unrolled rounds and NVLink segments (simulated)."""
    from cloudtwin.evaluation.collective import plan_for

    plan = plan_for(scenario, topology)
    unrolled = plan.unrolled
    op = getattr(scenario.workload, "op", "collective")
    names = [tenant_name(scenario, job.tenant) for job in plan.jobs]
    jobs = [JobInfo(f"{op}-{name}", "collective", (name,), 0.0) for name in names]
    return Workbench(
        connections=plan.connections,
        jobs=jobs,
        capacity_bps=plan.nvlink.capacity_bps(topology),
        route=unrolled.route,
        size_bytes=unrolled.size_bytes,
        start_s=unrolled.start_s,
        rate_cap_bps=unrolled.rate_cap_bps,
        with_latency=False,
        dependencies=unrolled.dependencies,
        segments=plan.segments,
        collective=plan,
    )


def collective_busbw(scenario: Scenario, bench: Workbench, result: SimResult) -> dict[str, Any] | None:
    """nccl-tests algbw and busbw (GB/s) of a run, or None when the workload is no collective."""
    if bench.collective is None:
        return None
    from cloudtwin.evaluation.collective import measure

    size = int(scenario.workload.size)  # type: ignore[union-attr]
    row = measure(scenario, bench.collective, result, size)  # type: ignore[arg-type]
    return {
        "op": getattr(scenario.workload, "op", "?"),
        "size_bytes": size,
        "time_s": row.time_s,
        "algbw_GBps": row.algbw_GBps,
        "busbw_GBps": row.busbw_GBps,
    }
