"""The job builder of a `flows` workload: every listed flow (each of its QPs) as an engine flow."""

from __future__ import annotations

import numpy as np

from cloudtwin.scenario.model import FlowsWorkload
from cloudtwin.twin.registry import JobInfo, JobPart, JobRequest, register_job
from cloudtwin.workloads.flowlist import flows_from_table, workload_table

__all__ = ["flows_job"]


@register_job("flows")
def flows_job(request: JobRequest) -> JobPart:
    """Rows of flows (inline or read from a file): each QP one engine flow, with its path's latency."""
    scenario, topology, workload = request.scenario, request.topology, request.workload
    assert isinstance(workload, FlowsWorkload)
    tenants = [t.name for t in scenario.tenants]
    flows = flows_from_table(workload_table(workload), topology, tenants, workload.qps, request.seed)
    used = tuple(tenants[t] for t in np.unique(flows.tenant) if t >= 0)
    info = JobInfo(request.name, "flows", used, float(flows.start_s.min()) if len(flows) else 0.0)
    return JobPart.of_connections(flows, info, topology.nic_rate_bps)
