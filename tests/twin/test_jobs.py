"""The job registry: built-in kinds, a job kind registered from outside, and laying jobs out."""

from __future__ import annotations

import numpy as np
import pytest

from cloudtwin.errors import WorkloadError
from cloudtwin.routing import load_strategy
from cloudtwin.scenario.loader import load_scenario
from cloudtwin.topology import build_topology
from cloudtwin.twin import (
    JobInfo,
    JobPart,
    JobRequest,
    Workbench,
    build_job,
    build_workbench,
    job_kinds,
    prepare,
    register_job,
    run_jobs,
)
from cloudtwin.workloads.perftest import qp_flows

SMALL = """
name: small
fabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2, host_link: 100Gbps, uplink: 100Gbps}
workload: {kind: perftest, pattern: permutation, size: 125MB, qps: 1}
"""


def test_builtin_kinds_are_registered() -> None:
    assert {"perftest", "collective", "data-parallel-rings", "hpl-rings"} <= set(job_kinds())


def test_an_unknown_kind_is_named() -> None:
    scenario = load_scenario(SMALL)
    request = JobRequest(scenario, build_topology(scenario), None, "x")
    with pytest.raises(WorkloadError, match="workloads.0.kind: no job of kind 'teleport'"):
        build_job("teleport", request, "workloads.0.kind")


def test_a_registered_job_runs_beside_the_scenarios() -> None:
    """One 125 MB transfer between two hosts under the same leaf, alone on its NIC: 10 ms
    at 100 Gbps, plus two 1 us hops of latency."""

    @register_job("test-one-transfer")
    def one_transfer(request: JobRequest) -> JobPart:
        topology = request.topology
        src, dst = topology.host_nics[0, :1], topology.host_nics[1, :1]
        flows = qp_flows(topology, src, dst, np.array([125e6]), 1, np.random.default_rng(0), 0.0, -1)
        return JobPart(
            connections=flows,
            infos=[JobInfo(request.name, "test-one-transfer", (), 0.0)],
            route=np.arange(1),
            size_bytes=flows.size_bytes,
            start_s=flows.start_s,
            rate_cap_bps=np.full(1, topology.nic_rate_bps),
            flow_job=np.zeros(1, dtype=np.int64),
            with_latency=True,
        )

    scenario = load_scenario(SMALL)
    topology = build_topology(scenario)
    solo = JobRequest(scenario, topology, None, "solo")
    bench = Workbench.of([build_job("test-one-transfer", solo)], topology)
    run = run_jobs(prepare(scenario, load_strategy("ecmp"), topology=topology, bench=bench))
    latency = 2 * float(topology.latency_s[0])
    assert run.result.finish_s.tolist() == pytest.approx([0.01 + latency])
    both = Workbench.of([*_parts(scenario, topology), build_job("test-one-transfer", solo)], topology)
    assert [j.name for j in both.jobs] == ["perftest", "solo"]
    assert both.connections.job.tolist()[-1] == 1 and len(both.connections) == len(bench.connections) + 4


def _parts(scenario, topology) -> list[JobPart]:
    request = JobRequest(scenario, topology, scenario.workload, "perftest", (), scenario.seed)
    return [build_job("perftest", request)]


def test_the_scenarios_jobs_are_one_workbench() -> None:
    scenario = load_scenario(SMALL)
    topology = build_topology(scenario)
    bench = build_workbench(scenario, topology)
    assert bench.one_to_one and len(bench.connections) == 4 and bench.latency_mask.all()
    assert [j.kind for j in bench.jobs] == ["perftest"]
