"""A scenario's jobs as one engine workload: what strategies route, and what the engine runs.

Strategies route *connections* (one row per QP, all jobs together, so a controller or a
load balancer sees the whole traffic matrix); the engine runs *flows*. For perftest a
flow is its QP; for a collective each QP carries many pipelined rounds (flows with
dependencies) plus NVLink segments inside hosts. A job kind plugs in with a builder in
`_BUILDERS` that returns a `JobFlows`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cloudtwin.engine.simulator import Change, Dependencies
from cloudtwin.errors import WorkloadError
from cloudtwin.faults.plan import subset_paths
from cloudtwin.flows import Flows
from cloudtwin.scenario.model import PerftestWorkload, Scenario
from cloudtwin.topology.paths import Paths
from cloudtwin.topology.topology import Topology
from cloudtwin.workloads.perftest import TenantHosts, perftest_flows

__all__ = ["JobInfo", "Workbench", "build_workbench", "tenant_name"]


@dataclass(frozen=True)
class JobInfo:
    """One job: its name, kind, tenants and start time."""

    name: str
    kind: str
    tenants: tuple[str, ...]
    start_s: float


@dataclass(frozen=True, eq=False)
class Workbench:
    """The engine's view of all jobs of a scenario.

    `connections` are routed (their `job` column indexes `jobs`); engine flow f follows
    route `route[f]`: a connection when below `len(connections)`, else an extra segment
    (NVLink) of `segments`. `owner[f]` is the connection of flow f, or -1.
    """

    connections: Flows
    jobs: list[JobInfo]
    capacity_bps: np.ndarray
    route: np.ndarray
    size_bytes: np.ndarray
    start_s: np.ndarray
    rate_cap_bps: np.ndarray
    with_latency: bool
    dependencies: Dependencies | None = None
    segments: Paths | None = None
    collective: object | None = field(default=None)

    @property
    def owner(self) -> np.ndarray:
        """The connection of each engine flow (-1 for a segment inside a host)."""
        n = len(self.connections)
        return np.where(self.route < n, self.route, -1)

    @property
    def flow_job(self) -> np.ndarray:
        """The job of each engine flow."""
        if self.collective is not None:
            return np.asarray(self.collective.unrolled.job)  # type: ignore[attr-defined]
        return self.connections.job[self.route]

    @property
    def one_to_one(self) -> bool:
        """True when every engine flow is its own connection (perftest)."""
        return self.segments is None and np.array_equal(self.route, np.arange(len(self.connections)))

    def engine_paths(self, connection_paths: Paths) -> Paths:
        """Paths of every engine flow, given the routed connections."""
        if self.one_to_one:
            return connection_paths
        parts = [connection_paths] + ([self.segments] if self.segments is not None else [])
        return subset_paths(Paths.concat(parts), self.route)

    def engine_change(self, change: Change) -> Change:
        """A planned change (on connections) as the engine's change (on flows)."""
        if change.paths is None or self.one_to_one:
            return change
        moved = np.asarray(change.flows, dtype=np.int64)
        order = np.argsort(moved)
        hit = np.isin(self.route, moved)
        flows = np.flatnonzero(hit)
        position = order[np.searchsorted(moved[order], self.route[flows])]
        return Change(
            change.time_s, change.link_ids, change.capacity_bps, flows, subset_paths(change.paths, position)
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


def _job_list(scenario: Scenario) -> list[tuple[str, object, tuple[str, ...]]]:
    if scenario.workloads:
        return [
            (job.name or f"job{i}", job, tuple(job.tenants)) for i, job in enumerate(scenario.workloads)
        ]
    return [(scenario.workload.kind, scenario.workload, ())]


def build_workbench(scenario: Scenario, topology: Topology) -> Workbench:
    """The scenario's jobs (its `workloads:` list, or its single `workload:`) for the engine."""
    jobs = _job_list(scenario)
    kinds = {getattr(w, "kind", "?") for _, w, _ in jobs}
    if "collective" in kinds:
        if len(jobs) > 1:
            raise WorkloadError("workloads: collective jobs run on their own (one workload:) for now")
        from cloudtwin.evaluation.collective_bench import collective_workbench

        return collective_workbench(scenario, topology)
    parts: list[Flows] = []
    infos: list[JobInfo] = []
    sport_per_qp = scenario.hosts.udp_sport == "per-qp"
    for i, (name, workload, tenants) in enumerate(jobs):
        if not isinstance(workload, PerftestWorkload):
            key = f"workloads.{i}.kind" if scenario.workloads else "workload.kind"
            kind = getattr(workload, "kind", "?")
            raise WorkloadError(f"{key}: evaluate runs perftest and collective jobs, not {kind!r}")
        seed = np.random.default_rng([scenario.seed, i]) if scenario.workloads else scenario.seed
        groups = _groups(scenario, tenants)
        parts.append(perftest_flows(workload, topology, groups, seed, sport_per_qp, job=i))
        names = tenants or tuple(tenant_name(scenario, g[0]) for g in groups)
        infos.append(JobInfo(name, "perftest", names, float(workload.start)))
    flows = Flows.concat(parts)
    return Workbench(
        connections=flows,
        jobs=infos,
        capacity_bps=topology.capacity_bps,
        route=np.arange(len(flows)),
        size_bytes=flows.size_bytes,
        start_s=flows.start_s,
        rate_cap_bps=np.full(len(flows), topology.nic_rate_bps),
        with_latency=True,
    )
