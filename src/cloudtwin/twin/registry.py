"""The job registry: what a job builder is given (`JobRequest`) and what it returns (`JobPart`:
one job in engine form), and the builders of each kind (`register_job`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from cloudtwin.engine.simulator import Dependencies
from cloudtwin.flows import Flows, Paths
from cloudtwin.scenario.model import CollectiveWorkload, Scenario
from cloudtwin.topology.topology import Topology
from cloudtwin.workloads.collective import CollectivePlan

__all__ = ["JobBuilder", "JobInfo", "JobPart", "JobRequest", "builder_of", "known_kinds", "register_job"]


@dataclass(frozen=True)
class JobInfo:
    """One job: its name, kind, tenants and start time."""

    name: str
    kind: str
    tenants: tuple[str, ...]
    start_s: float


@dataclass(frozen=True, eq=False)
class JobRequest:
    """What a job builder is given: the scenario and its fabric, the job's own description
    (a scenario workload, or a ring description from a predictor), its name, the tenants
    it runs for (empty: all) and the seed of its random choices."""

    scenario: Scenario
    topology: Topology
    workload: Any
    name: str
    tenants: tuple[str, ...] = ()
    seed: int | np.random.Generator = 0


@dataclass(frozen=True, eq=False)
class JobPart:
    """One job in engine form, numbered on its own (routes: its connections, then its
    segments; `flow_job` indexes its `infos`). `capacity_bps`, when set, is the fabric's
    capacity as this job sees it (NVLink segments appended, NICs limited)."""

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
    plan: CollectivePlan | None = None

    @classmethod
    def of_connections(cls, flows: Flows, info: JobInfo, nic_rate_bps: float) -> JobPart:
        """A job whose every connection is one engine flow at most at NIC rate, with its
        path's latency (perftest, listed flows)."""
        n = len(flows)
        return cls(
            connections=flows,
            infos=[info],
            route=np.arange(n),
            size_bytes=flows.size_bytes,
            start_s=flows.start_s,
            rate_cap_bps=np.full(n, nic_rate_bps),
            flow_job=np.zeros(n, dtype=np.int64),
            with_latency=True,
        )


JobBuilder = Callable[[JobRequest], JobPart]
B = TypeVar("B", bound=JobBuilder)

_REGISTRY: dict[str, JobBuilder] = {}


def register_job(kind: str) -> Callable[[B], B]:
    """Decorator: `builder(request) -> JobPart` builds the jobs of `kind`."""

    def add(builder: B) -> B:
        _REGISTRY[kind] = builder
        return builder

    return add




def builder_of(kind: str) -> JobBuilder | None:
    """The builder registered for `kind` (None when there is none)."""
    return _REGISTRY.get(kind)


def known_kinds() -> list[str]:
    """The kinds registered so far."""
    return list(_REGISTRY)
