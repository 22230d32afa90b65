"""A scenario's jobs as one engine workload: what strategies route, and what the engine runs.

Strategies route *connections* (one row per QP, all jobs together, so a controller or a
load balancer sees the whole traffic matrix); the engine runs *flows*. For perftest a
flow is its QP; for a collective each QP carries many pipelined rounds (flows with
dependencies) plus NVLink segments inside hosts. Each job kind has a builder in
`_BUILDERS` that returns a `JobPart`; the parts are laid side by side.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from cloudtwin.engine.simulator import Change, Dependencies
from cloudtwin.errors import WorkloadError
from cloudtwin.flows import Flows
from cloudtwin.scenario.model import CollectiveWorkload, PerftestWorkload, Scenario
from cloudtwin.topology.paths import Paths
from cloudtwin.topology.topology import Topology
from cloudtwin.workloads.perftest import TenantHosts, perftest_flows

__all__ = ["CollectiveJobRun", "JobInfo", "JobPart", "Workbench", "build_workbench", "tenant_name"]


@dataclass(frozen=True)
class JobInfo:
    """One job: its name, kind, tenants and start time."""

    name: str
    kind: str
    tenants: tuple[str, ...]
    start_s: float


@dataclass(frozen=True, eq=False)
class CollectiveJobRun:
    """Where a collective sits among the engine's flows, to measure its busbw afterwards."""

    workload: CollectiveWorkload
    plan: Any
    flows: slice
    jobs: list[int]
    start_s: float


@dataclass(frozen=True, eq=False)
class JobPart:
    """One scenario job in engine form, numbered on its own (routes: its connections, then
    its segments; `flow_job` indexes its `infos`)."""

    connections: Flows
    infos: list[JobInfo]
    route: np.ndarray
    size_bytes: np.ndarray
    start_s: np.ndarray
    rate_cap_bps: np.ndarray
    flow_job: np.ndarray
    with_latency: bool
    dependencies: Dependencies | None = None
    segments: Paths | None = None
    capacity_bps: np.ndarray | None = None
    collective: CollectiveWorkload | None = None
    plan: Any = None


@dataclass(frozen=True, eq=False)
class Workbench:
    """The engine's view of all jobs of a scenario.

    `connections` are routed (their `job` column indexes `jobs`); engine flow f follows
    route `route[f]`: a connection when below `len(connections)`, else an extra segment
    (NVLink) of `segments`. `group[f]` is what the summary counts as one transfer (a
    perftest connection with all its QPs, or one collective QP or segment).
    """

    connections: Flows
    jobs: list[JobInfo]
    capacity_bps: np.ndarray
    route: np.ndarray
    size_bytes: np.ndarray
    start_s: np.ndarray
    rate_cap_bps: np.ndarray
    latency_mask: np.ndarray
    flow_job: np.ndarray
    group: np.ndarray
    dependencies: Dependencies | None = None
    segments: Paths | None = None
    collectives: tuple[CollectiveJobRun, ...] = ()

    @property
    def owner(self) -> np.ndarray:
        """The connection of each engine flow (-1 for a segment inside a host)."""
        n = len(self.connections)
        return np.where(self.route < n, self.route, -1)

    @property
    def one_to_one(self) -> bool:
        """True when every engine flow is its own connection (perftest only)."""
        return self.segments is None and np.array_equal(self.route, np.arange(len(self.connections)))

    def engine_paths(self, connection_paths: Paths) -> Paths:
        """Paths of every engine flow, given the routed connections."""
        if self.one_to_one:
            return connection_paths
        parts = [connection_paths] + ([self.segments] if self.segments is not None else [])
        return Paths.concat(parts).take(self.route)

    def engine_change(self, change: Change) -> Change:
        """A planned change (on connections) as the engine's change (on flows)."""
        if change.paths is None or self.one_to_one:
            return change
        moved = np.asarray(change.flows, dtype=np.int64)
        order = np.argsort(moved)
        flows = np.flatnonzero(np.isin(self.route, moved))
        position = order[np.searchsorted(moved[order], self.route[flows])]
        return Change(
            change.time_s, change.link_ids, change.capacity_bps, flows, change.paths.take(position)
        )


def tenant_name(scenario: Scenario, tenant: int) -> str:
    """A tenant's name, or `-` for flows outside any tenant."""
    return scenario.tenants[tenant].name if 0 <= tenant < len(scenario.tenants) else "-"


def _groups(scenario: Scenario, names: tuple[str, ...]) -> list[TenantHosts]:
    from cloudtwin.evaluation.run import tenant_groups

    groups = tenant_groups(scenario)
    if not names:
        return groups
    wanted = {i for i, t in enumerate(scenario.tenants) if t.name in names}
    return [g for g in groups if g[0] in wanted]


Builder = Callable[
    [Scenario, Topology, Any, str, tuple[str, ...], "int | np.random.Generator"], JobPart
]


def _perftest(
    scenario: Scenario,
    topology: Topology,
    workload: Any,
    name: str,
    tenants: tuple[str, ...],
    seed: int | np.random.Generator,
) -> JobPart:
    groups = _groups(scenario, tenants)
    sport_per_qp = scenario.hosts.udp_sport == "per-qp"
    flows = perftest_flows(workload, topology, groups, seed, sport_per_qp, job=0)
    names = tenants or tuple(tenant_name(scenario, g[0]) for g in groups)
    n = len(flows)
    return JobPart(
        connections=flows,
        infos=[JobInfo(name, "perftest", names, float(workload.start))],
        route=np.arange(n),
        size_bytes=flows.size_bytes,
        start_s=flows.start_s,
        rate_cap_bps=np.full(n, topology.nic_rate_bps),
        flow_job=np.zeros(n, dtype=np.int64),
        with_latency=True,
    )


def _collective(
    scenario: Scenario,
    topology: Topology,
    workload: Any,
    name: str,
    tenants: tuple[str, ...],
    seed: int | np.random.Generator,
) -> JobPart:
    from cloudtwin.topology.nvlink import Nvlink
    from cloudtwin.workloads.collective import collective_jobs, plan_collective

    rng = np.random.default_rng(seed)
    nvlink = Nvlink.of(topology, scenario.hosts.gpus, scenario.hosts.nvlink)
    ranks = collective_jobs(workload, _groups(scenario, tenants), scenario.hosts.gpus, rng)
    plan = plan_collective(
        workload, topology, nvlink, ranks, rng, None, scenario.hosts.udp_sport == "per-qp"
    )
    start = float(getattr(workload, "start", 0.0))
    unrolled = plan.unrolled
    infos = [
        JobInfo(
            name if len(ranks) == 1 and name != workload.op else f"{name}-{tenant_name(scenario, r.tenant)}",
            "collective",
            (tenant_name(scenario, r.tenant),),
            start,
        )
        for r in ranks
    ]
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
        capacity_bps=nvlink.capacity_bps(topology),
        collective=workload,
        plan=plan,
    )


_BUILDERS: dict[str, Builder] = {"perftest": _perftest, "collective": _collective}


def _job_list(scenario: Scenario) -> list[tuple[str, Any, tuple[str, ...], str]]:
    """(name, workload, tenants, key for errors) of each job."""
    if scenario.workloads:
        return [
            (job.name or f"job{i}", job, tuple(job.tenants), f"workloads.{i}.kind")
            for i, job in enumerate(scenario.workloads)
        ]
    workload = scenario.workload
    name = workload.op if isinstance(workload, CollectiveWorkload) else workload.kind
    return [(name, workload, (), "workload.kind")]


def build_workbench(scenario: Scenario, topology: Topology) -> Workbench:
    """The scenario's jobs (its `workloads:` list, or its single `workload:`) for the engine."""
    parts = []
    for i, (name, workload, tenants, key) in enumerate(_job_list(scenario)):
        kind = getattr(workload, "kind", "?")
        builder = _BUILDERS.get(kind)
        if builder is None or not isinstance(workload, PerftestWorkload | CollectiveWorkload):
            raise WorkloadError(f"{key}: evaluate runs perftest and collective jobs, not {kind!r}")
        seed = np.random.default_rng([scenario.seed, i]) if scenario.workloads else scenario.seed
        parts.append(builder(scenario, topology, workload, name, tenants, seed))
    return _combine(parts, topology)


def _combine(parts: list[JobPart], topology: Topology) -> Workbench:
    """Lay the parts side by side: jobs, connections, segments and flows renumbered."""
    job_offset = np.cumsum([0] + [len(p.infos) for p in parts])
    conns = [replace(p.connections, job=p.connections.job + job_offset[k]) for k, p in enumerate(parts)]
    connections = Flows.concat(conns)
    conn_offset = np.cumsum([0] + [len(c) for c in conns])
    total = int(conn_offset[-1])
    segments = [p.segments for p in parts if p.segments is not None]
    seg_offset = np.cumsum([0] + [p.segments.flow_count if p.segments is not None else 0 for p in parts])
    flow_offset = np.cumsum([0] + [p.route.size for p in parts])
    routes, groups, collectives = [], [], []
    group_base = int(connections.connection.max()) + 1 if len(connections) else 0
    for k, part in enumerate(parts):
        n = len(part.connections)
        local = part.route
        route = np.where(local < n, local + conn_offset[k], total + seg_offset[k] + (local - n))
        routes.append(route)
        if part.plan is None:
            groups.append(connections.connection[route])
        else:
            groups.append(group_base + route)
            collectives.append(
                CollectiveJobRun(
                    workload=part.collective,  # type: ignore[arg-type]
                    plan=part.plan,
                    flows=slice(int(flow_offset[k]), int(flow_offset[k + 1])),
                    jobs=list(range(int(job_offset[k]), int(job_offset[k + 1]))),
                    start_s=float(part.infos[0].start_s),
                )
            )
    capacity = next((p.capacity_bps for p in parts if p.capacity_bps is not None), topology.capacity_bps)
    return Workbench(
        connections=connections,
        jobs=[info for p in parts for info in p.infos],
        capacity_bps=capacity,
        route=np.concatenate(routes),
        size_bytes=np.concatenate([p.size_bytes for p in parts]),
        start_s=np.concatenate([p.start_s for p in parts]),
        rate_cap_bps=np.concatenate([p.rate_cap_bps for p in parts]),
        latency_mask=np.concatenate([np.full(p.route.size, p.with_latency) for p in parts]),
        flow_job=np.concatenate([p.flow_job + job_offset[k] for k, p in enumerate(parts)]),
        group=np.concatenate(groups),
        dependencies=_dependencies(parts, flow_offset),
        segments=Paths.concat(segments) if segments else None,
        collectives=tuple(collectives),
    )


def _dependencies(parts: list[JobPart], flow_offset: np.ndarray) -> Dependencies | None:
    if all(p.dependencies is None for p in parts):
        return None
    counts, after, gaps = [], [], []
    for k, part in enumerate(parts):
        deps = part.dependencies
        if deps is None:
            counts.append(np.zeros(part.route.size, dtype=np.int64))
            gaps.append(np.zeros(part.route.size))
            continue
        counts.append(np.diff(deps.indptr))
        after.append(np.asarray(deps.after, dtype=np.int64) + flow_offset[k])
        gaps.append(np.zeros(part.route.size) if deps.gap_s is None else np.asarray(deps.gap_s, dtype=float))
    indptr = np.concatenate(([0], np.cumsum(np.concatenate(counts)))).astype(np.int64)
    waits = np.concatenate(after) if after else np.empty(0, dtype=np.int64)
    return Dependencies(indptr, waits, np.concatenate(gaps))
