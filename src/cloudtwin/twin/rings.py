"""Rings that predictors run on the fabric, as registered jobs: the data-parallel gradient
all-reduces of LLM training, and HPL's panel-broadcast and row-swap rings.

Both run in (virtual) machines whose NICs move less than line rate: NIC links carry
what the (virtual) function moves (`nic_limited_capacity`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from cloudtwin.cluster.spec import ClusterSpec
from cloudtwin.errors import WorkloadError
from cloudtwin.flows import Flows
from cloudtwin.scenario.cluster import HplWorkload
from cloudtwin.scenario.model import CollectiveWorkload
from cloudtwin.topology.nvlink import Nvlink
from cloudtwin.topology.topology import NodeKind, Topology
from cloudtwin.twin.builders import collective_part
from cloudtwin.twin.registry import JobInfo, JobPart, JobRequest, register_job
from cloudtwin.twin.routing import tenant_of_host
from cloudtwin.workloads import hpl as hpl_model
from cloudtwin.workloads.collective import JobRanks, plan_collective

__all__ = [
    "DataParallelRings",
    "HplRings",
    "TrainingStep",
    "data_parallel_rings",
    "hpl_job",
    "hpl_rings",
    "nic_limited_capacity",
    "training_job",
    "training_step",
]


def nic_limited_capacity(topology: Topology, spec: ClusterSpec) -> np.ndarray:
    """Link capacities with every NIC's links cut to what its (virtual) function moves."""
    capacity = topology.capacity_bps.copy()
    kind = topology.node_kind
    at_nic = (kind[topology.link_src] == NodeKind.NIC) | (kind[topology.link_dst] == NodeKind.NIC)
    capacity[at_nic] *= 1.0 - spec.overheads.nic_bandwidth
    return capacity


@dataclass(frozen=True, eq=False)
class DataParallelRings:
    """Every data-parallel group's gradient all-reduce, as one NCCL ring job each.

    `groups[g]` are group g's GPUs in rank order, `stage[g]` its pipeline stage, whose
    rings start at `stage_start_s[stage]`; `channels` per GPU of the group on a node.
    """

    spec: ClusterSpec
    groups: np.ndarray
    stage: np.ndarray
    stage_start_s: np.ndarray
    size_bytes: int
    channels: int


@dataclass(frozen=True, eq=False)
class HplRings:
    """The inter-node hops of HPL's rings along every process row (or column), all at once,
    each hop carrying `size_bytes`."""

    spec: ClusterSpec
    workload: HplWorkload
    along: str
    size_bytes: float


def _ring_job(gpus: np.ndarray, gpus_per_node: int, owner: np.ndarray) -> JobRanks:
    """A data-parallel group as an NCCL job: its nodes in ring order, each node's GPUs in a row
    (NCCL visits a node's ranks over NVLink, then leaves it over a NIC)."""
    node = gpus // gpus_per_node
    starts = np.flatnonzero(np.concatenate(([True], node[1:] != node[:-1])))
    counts = np.diff(np.concatenate((starts, [node.size])))
    if np.unique(node).size != starts.size or np.any(counts != counts[0]):
        raise WorkloadError(
            "workload.layout: a data-parallel group must hold the same number of GPUs on "
            "each of its nodes, one node after another"
        )
    hosts = node[starts]
    return JobRanks(int(owner[hosts[0]]), hosts, gpus.reshape(hosts.size, int(counts[0])))


@register_job("data-parallel-rings")
def data_parallel_rings(request: JobRequest) -> JobPart:
    """Ring all-reduces of the data-parallel groups (channels as QPs, pipelined rounds with
    dependencies, NCCL's step latencies), each starting when its stage's backward ends."""
    rings = request.workload
    assert isinstance(rings, DataParallelRings)
    scenario, topology, spec = request.scenario, request.topology, rings.spec
    gpus_per_node = spec.profile.gpus
    owner = tenant_of_host(scenario)
    jobs = [_ring_job(g, gpus_per_node, owner) for g in rings.groups]
    # `channels` per GPU of the group on a node: NCCL deals a node's channels over the
    # NICs of the GPUs it holds, so a group with m GPUs per node uses m rails.
    channels = min(64, rings.channels * int(jobs[0].local.shape[1]))
    collective = CollectiveWorkload(
        op="allreduce", algorithm="ring", size=rings.size_bytes, channels=channels, qps_per_connection=1
    )
    nvlink = Nvlink.of(topology, gpus_per_node, spec.profile.nvlink_bytes_per_s * 8)
    rng = np.random.default_rng(request.seed)
    sport_per_qp = scenario.hosts.udp_sport == "per-qp"
    plan = plan_collective(collective, topology, nvlink, jobs, rng, rings.size_bytes, sport_per_qp)
    capacity = nvlink.capacity_bps(topology)
    capacity[: topology.link_count] = nic_limited_capacity(topology, spec)
    start = np.asarray(rings.stage_start_s, dtype=float)[rings.stage[plan.unrolled.job]]
    infos = [JobInfo(f"{request.name}{g}", "collective", (), 0.0) for g in range(len(jobs))]
    return collective_part(plan, infos, start, capacity, collective)


@register_job("hpl-rings")
def hpl_rings(request: JobRequest) -> JobPart:
    """HPL's ring hops along rows or columns, one flow per channel, each capped at what a
    VM's NIC sends, with its path's latency."""
    rings = request.workload
    assert isinstance(rings, HplRings)
    scenario, topology, spec = request.scenario, request.topology, rings.spec
    flows = hpl_model.grid_ring_flows(
        rings.workload, spec, topology, rings.along, rings.size_bytes, request.seed, tenant_of_host(scenario)
    )
    n = len(flows)
    return JobPart(
        connections=flows,
        infos=[JobInfo(request.name, "hpl-rings", (), 0.0)],
        route=np.arange(n),
        size_bytes=flows.size_bytes,
        start_s=flows.start_s,
        rate_cap_bps=np.full(n, spec.nic_rate_cap_bps),
        flow_job=np.zeros(n, dtype=np.int64),
        with_latency=True,
        capacity_bps=nic_limited_capacity(topology, spec),
    )


@dataclass(frozen=True)
class TrainingStep:
    """Where one training iteration's gradient reduction sits in time: the engine starts
    stage k's rings at `start_s + ring_offset_s[k]`; the iteration takes `pipeline_s` of
    compute and pipelining, the reduction's exposed part beyond `hidden_until_s` (after its
    first ring may start), and `optimizer_s`."""

    start_s: float
    ring_offset_s: np.ndarray
    hidden_until_s: float
    pipeline_s: float
    optimizer_s: float

    def iteration_s(self, reduction_done_s: float) -> float:
        """The iteration time given when (engine time) its last ring finished."""
        exposed = max(0.0, reduction_done_s - self.start_s - self.hidden_until_s)
        return self.pipeline_s + exposed + self.optimizer_s


def training_step(request: JobRequest) -> tuple[TrainingStep, DataParallelRings, ClusterSpec]:
    """The step of a `workload.kind: training` job (the model of `cloudtwin train`, at the job's
    GPU count) and the data-parallel rings of its reduction."""
    from cloudtwin.cluster.spec import cluster_spec
    from cloudtwin.workloads import training as model

    w = request.workload
    spec = cluster_spec(request.scenario, request.topology.nic_rate_bps)
    lay = model.layout(w, w.gpus or spec.gpus, spec.gpus)
    times = model.stage_times(w, spec, lay.data)
    p = lay.pipeline
    offsets = times.ring_offsets_s(p)
    step = TrainingStep(
        start_s=float(getattr(w, "start", 0.0) or 0.0),
        ring_offset_s=offsets,
        hidden_until_s=float(offsets[0]) + times.overlap_window_s,
        pipeline_s=times.pipeline_s(p, lay.micro_batches),
        optimizer_s=times.optimizer_s,
    )
    groups, stage = model.data_parallel_groups(w, lay)
    rings = DataParallelRings(
        spec=spec,
        groups=groups,
        stage=stage,
        stage_start_s=step.start_s + offsets,
        size_bytes=int(model.data_parallel_allreduce_bytes(w)),
        channels=w.channels,
    )
    return step, rings, spec


@register_job("training")
def training_job(request: JobRequest) -> JobPart:
    """One iteration of a training job beside other jobs: its data-parallel gradient
    all-reduces on the fabric, each ring starting when its stage's backward pass ends
    (a job of one data-parallel replica moves nothing on the fabric)."""
    step, rings, _ = training_step(request)
    if rings.groups.shape[1] < 2:
        raise WorkloadError(
            f"{request.name}: a training job with one data-parallel replica moves nothing on the fabric"
        )
    rings_request = JobRequest(
        request.scenario, request.topology, rings, request.name, request.tenants, request.seed
    )
    part = data_parallel_rings(rings_request)
    infos = [JobInfo(info.name, "training", info.tenants, step.start_s) for info in part.infos]
    return replace(part, infos=infos)


@register_job("hpl")
def hpl_job(request: JobRequest) -> JobPart:
    """HPL beside other jobs: its row rings and its column rings, each hop carrying the probe
    (`workloads.hpl.PROBE_BYTES`), as two jobs (`NAME-row`, `NAME-column`); what they get of
    the fabric gives the rings' bandwidths (`cloudtwin hpl` probes them alone)."""
    from cloudtwin.cluster.spec import cluster_spec

    spec = cluster_spec(request.scenario, request.topology.nic_rate_bps)
    parts = []
    for k, along in enumerate(("row", "column")):
        rings = HplRings(spec, request.workload, along, hpl_model.PROBE_BYTES)
        ring_request = JobRequest(
            request.scenario, request.topology, rings, request.name, request.tenants, request.seed
        )
        part = hpl_rings(ring_request)
        parts.append(replace(part, connections=replace(part.connections, job=part.connections.job + k)))
    row, column = parts
    n = len(row.connections) + len(column.connections)
    return JobPart(
        connections=Flows.concat([row.connections, column.connections]),
        infos=[JobInfo(f"{request.name}-{a}", "hpl", request.tenants, 0.0) for a in ("row", "column")],
        route=np.arange(n),
        size_bytes=np.concatenate((row.size_bytes, column.size_bytes)),
        start_s=np.concatenate((row.start_s, column.start_s)),
        rate_cap_bps=np.concatenate((row.rate_cap_bps, column.rate_cap_bps)),
        flow_job=np.concatenate((row.flow_job, column.flow_job + 1)),
        with_latency=True,
        capacity_bps=row.capacity_bps,
    )
