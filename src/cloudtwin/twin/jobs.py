"""Jobs in engine form: a job built by its kind, and a run's jobs laid side by side (the Workbench).

Strategies route *connections* (one row per QP, all jobs together, so a controller or a
load balancer sees the whole traffic matrix); the engine runs *flows*. For perftest a
flow is its QP; for a collective each QP carries many pipelined rounds (flows with
dependencies) plus NVLink segments inside hosts. Each job kind has a builder, registered
with `register_job` (`registry.py`), that turns a `JobRequest` into a `JobPart`;
`Workbench.of` lays the parts side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from cloudtwin.engine.simulator import Change, Dependencies
from cloudtwin.errors import WorkloadError
from cloudtwin.flows import Flows, Paths
from cloudtwin.scenario.model import CollectiveWorkload, Scenario
from cloudtwin.topology.topology import Topology
from cloudtwin.twin.registry import (
    JobBuilder,
    JobInfo,
    JobPart,
    JobRequest,
    builder_of,
    known_kinds,
    register_job,
)
from cloudtwin.workloads.collective import CollectivePlan

__all__ = [
    "CollectiveJobRun",
    "JobBuilder",
    "JobInfo",
    "JobPart",
    "JobRequest",
    "Workbench",
    "build_job",
    "build_workbench",
    "job_kinds",
    "register_job",
    "scenario_jobs",
]


@dataclass(frozen=True, eq=False)
class CollectiveJobRun:
    """Where a collective sits among the engine's flows, to measure its busbw afterwards."""

    workload: CollectiveWorkload
    plan: CollectivePlan
    flows: slice
    jobs: list[int]
    start_s: float


def job_kinds() -> list[str]:
    """The registered job kinds."""
    _load_builtins()
    return known_kinds()


def build_job(kind: str, request: JobRequest, key: str = "workload.kind") -> JobPart:
    """One job of a registered kind; WorkloadError naming `key` for an unknown kind."""
    _load_builtins()
    builder = builder_of(kind)
    if builder is None:
        known = ", ".join(known_kinds())
        raise WorkloadError(f"{key}: no job of kind {kind!r} runs on the fabric (known: {known})")
    return builder(request)


def _load_builtins() -> None:
    import cloudtwin.twin.builders  # noqa: F401  (registers perftest, collective and the rings)
    import cloudtwin.twin.flowjob  # noqa: F401  (registers flows)


@dataclass(frozen=True, eq=False)
class Workbench:
    """The engine's view of all jobs of a run.

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

    @classmethod
    def of(cls, parts: Sequence[JobPart], topology: Topology) -> Workbench:
        """Lay the parts side by side: jobs, connections, segments and flows renumbered."""
        return _combine(list(parts), topology)

    @property
    def owner(self) -> np.ndarray:
        """The connection of each engine flow (-1 for a segment inside a host)."""
        n = len(self.connections)
        return np.where(self.route < n, self.route, -1)

    @property
    def network(self) -> np.ndarray:
        """Engine flows that cross the fabric (not NVLink segments inside a host)."""
        return self.owner >= 0

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
        return Change(change.time_s, change.link_ids, change.capacity_bps, flows, change.paths.take(position))

    def latency_s(self, topology: Topology, paths: Paths) -> np.ndarray | None:
        """Propagation latency of the engine flows that carry it (None when none does)."""
        if not self.latency_mask.any():
            return None
        per_link = np.zeros(self.capacity_bps.size)
        per_link[: topology.link_count] = topology.latency_s
        entry = per_link[paths.link_ids] * paths.entry_weights
        flow = np.bincount(paths.flow_of_entry, entry, minlength=paths.flow_count)
        return np.where(self.latency_mask, flow, 0.0)


def scenario_jobs(scenario: Scenario) -> list[tuple[str, Any, tuple[str, ...], str]]:
    """(name, workload, tenants, key for errors) of each job of the scenario."""
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
    for i, (name, workload, tenants, key) in enumerate(scenario_jobs(scenario)):
        seed = np.random.default_rng([scenario.seed, i]) if scenario.workloads else scenario.seed
        request = JobRequest(scenario, topology, workload, name, tenants, seed)
        parts.append(build_job(getattr(workload, "kind", "?"), request, key))
    return Workbench.of(parts, topology)


def _combine(parts: list[JobPart], topology: Topology) -> Workbench:
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
    if len(parts) == 1:
        return parts[0].dependencies
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
