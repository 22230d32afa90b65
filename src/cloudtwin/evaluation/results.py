"""The three-fold evaluation's results as frozen types: what `results.json` holds.

Each type's `to_json()` is its part of the documented JSON, key for key and in the same
order; `Results.from_json` reads a stored or written document back (what `results show`
and the service's pages render), ignoring keys the report does not read (`run_id`,
`created_at`, ...).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, model_validator

from cloudtwin.evaluation.metrics import RunSummary
from cloudtwin.mobility.precopy import PathEvent
from cloudtwin.twin.jobs import JobInfo

if TYPE_CHECKING:
    from cloudtwin.store.documents import Document  # store/ imports DuckDB: for the checker only
    from cloudtwin.twin.migration import VmMigration

__all__ = [
    "Busbw",
    "Complexity",
    "Conclusions",
    "FaultEvent",
    "FaultOutcome",
    "JobBusbw",
    "MigrationSummary",
    "Performance",
    "RepairSummary",
    "Resiliency",
    "Results",
    "StrategyResult",
    "Timeline",
    "TimelineBins",
]

class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


@dataclass(frozen=True)
class FaultOutcome:
    """What one fault did to the aggregate throughput."""

    at_s: float
    pre_fault_gbps: float
    dip: float
    recovered: bool
    time_to_recover_s: float | None

    def to_json(self) -> dict[str, object]:
        """JSON form."""
        return {
            "at_s": self.at_s,
            "pre_fault_gbps": self.pre_fault_gbps,
            "dip": self.dip,
            "recovered": self.recovered,
            "time_to_recover_s": self.time_to_recover_s,
        }


class JobBusbw(_Frozen):
    """One collective job's nccl-tests figures."""

    op: str
    size_bytes: int
    ranks: int
    time_s: float
    algbw_GBps: float  # noqa: N815 (the JSON key, as nccl-tests names it)
    busbw_GBps: float  # noqa: N815


class Busbw(_Frozen):
    """nccl-tests busbw (GB/s) of a run's collective jobs: overall and per job."""

    busbw_GBps: float  # noqa: N815
    algbw_GBps: float  # noqa: N815
    per_job: dict[str, JobBusbw]

    def to_json(self) -> Document:
        return self.model_dump()



class Performance(_Frozen):
    """A strategy's fault-free run: the run summary of all its flows (its fields first), per
    job and per tenant, and the collective jobs' busbw (None without one)."""

    scenario: str
    strategy: str
    flows: int
    aggregate_gbps: float
    per_flow_gbps: dict[str, float]
    fct_s: dict[str, float]
    completion_s: float
    utilization: float
    per_job: dict[str, RunSummary]
    per_tenant: dict[str, RunSummary]
    busbw: Busbw | None

    @classmethod
    def of(
        cls,
        summary: RunSummary,
        per_job: dict[str, RunSummary],
        per_tenant: dict[str, RunSummary],
        busbw: Busbw | None,
    ) -> Performance:
        """The summary of all flows with the per-job and per-tenant ones."""
        return cls(
            **asdict(summary),
            per_job=per_job,
            per_tenant=per_tenant,
            busbw=busbw,
        )

    def to_json(self) -> Document:
        return {
            **self.model_dump(exclude={"per_job", "per_tenant", "busbw"}),
            "per_job": {k: v.to_json() for k, v in self.per_job.items()},
            "per_tenant": {k: v.to_json() for k, v in self.per_tenant.items()},
            "busbw": None if self.busbw is None else self.busbw.to_json(),
        }


class Timeline(_Frozen):
    """Aggregate throughput (Gbps) at instants `t_s`, without and with the faults."""

    t_s: list[float]
    baseline_gbps: list[float]
    faulted_gbps: list[float]


class TimelineBins(_Frozen):
    """Average throughput (Gbps) over equal bins of `bin_s` starting at `t_s`: what a plot shows."""

    bin_s: float
    t_s: list[float]
    baseline_gbps: list[float]
    faulted_gbps: list[float]


class RepairSummary(_Frozen):
    """One repair phase that moved flows: the fault's time, when they moved, how many, rules."""

    phase: str
    fault_s: float
    moved_s: float
    flows: int
    rules_changed: int


class Resiliency(_Frozen):
    """A strategy under the faults: recovery, stalls, slowdowns, each fault and repair, and
    the throughput over time (sampled and binned); `busbw_faulted` only with a collective."""

    recovered: bool
    time_to_recover_s: float | None
    dip: float
    bytes_delayed: float
    flows_affected: int
    flows_stalled: int
    max_stall_s: float
    completion_s: float
    baseline_completion_s: float
    job_slowdown: dict[str, float]
    tenant_slowdown: dict[str, float]
    faults: list[FaultOutcome]
    repairs: list[RepairSummary]
    timeline: Timeline
    timeline_binned: TimelineBins
    busbw_faulted: Busbw | None = None

    def to_json(self) -> Document:
        document = self.model_dump(exclude={"busbw_faulted"})
        if self.busbw_faulted is not None:
            document["busbw_faulted"] = self.busbw_faulted.to_json()
        return document


class Complexity(_Frozen):
    """Raw counts of a strategy's operational complexity and its score (lower is simpler);
    see `cloudtwin.evaluation.complexity` for what each count is."""

    score: float
    forwarding_entries: int
    forwarding_entries_total: int
    routes_per_switch_max: int
    ecmp_groups_per_switch_max: int
    flow_rules_per_switch_max: int
    flow_rules_total: int
    flow_state_per_switch_max: int
    rule_changes_per_job: float
    rule_changes_per_fault: float
    route_updates_per_fault: float
    flow_rule_changes_per_fault: float
    host_entries_per_job: float
    controller: bool
    host_cooperation: bool
    switch_features: list[str]
    state_grows_with: str
    entries_per_flow: float
    entries_per_tenant: float
    needs: str

    def to_json(self) -> Document:
        return self.model_dump()


class MigrationSummary(_Frozen):
    """One live migration under one strategy: without the faults, with them (`faulted_*`),
    the slowdown (the total time with the faults over the time without them; None unless
    both converged), the faulted run's path events, and whether each pause passed the
    VM's downtime limit."""

    converged: bool
    total_time_s: float
    downtime_s: float
    connectivity_downtime_s: float
    bytes: float
    rounds: int
    faulted_converged: bool
    faulted_total_time_s: float
    faulted_downtime_s: float
    faulted_bytes: float
    faulted_rounds: int
    slowdown: float | None
    path_events: list[PathEvent]
    over_limit: bool = False
    faulted_over_limit: bool = False

    def to_json(self) -> Document:
        return self.model_dump()

    @classmethod
    def of(cls, base: VmMigration, faulted: VmMigration) -> MigrationSummary:
        """A migration's fault-free and faulted runs side by side."""
        both = base.converged and faulted.converged
        return cls(
            converged=base.converged,
            total_time_s=base.total_time_s,
            downtime_s=base.downtime_s,
            connectivity_downtime_s=base.connectivity_downtime_s,
            bytes=base.bytes,
            rounds=base.rounds,
            faulted_converged=faulted.converged,
            faulted_total_time_s=faulted.total_time_s,
            faulted_downtime_s=faulted.downtime_s,
            faulted_bytes=faulted.bytes,
            faulted_rounds=faulted.rounds,
            slowdown=faulted.total_time_s / base.total_time_s if both else None,
            path_events=list(faulted.path_events),
            over_limit=base.result.over_limit,
            faulted_over_limit=faulted.result.over_limit,
        )


class FaultEvent(_Frozen):
    """A change of the fabric: when, which links, their capacities after it (Gbps)."""

    at_s: float
    links: list[str]
    capacity_gbps: list[float]


class StrategyResult(_Frozen):
    """One strategy's entry in `results.json`: the three folds, the migrations when the
    scenario has some, and its aggregate as a ratio to the first strategy's (written into
    `performance` as `ratio_to_first`)."""

    spec: str
    reaction: str
    performance: Performance
    resiliency: Resiliency
    complexity: Complexity
    migrations: dict[str, MigrationSummary] | None = None
    ratio_to_first: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _ratio_from_performance(cls, data: Any) -> Any:  # Any: pydantic's before-validator input
        if isinstance(data, dict) and isinstance(data.get("performance"), dict):
            return {"ratio_to_first": data["performance"].get("ratio_to_first"), **data}
        return data

    def to_json(self) -> Document:
        """`{"spec", "reaction", "performance", "resiliency", "complexity"[, "migrations"]}`."""
        document: Document = {
            "spec": self.spec,
            "reaction": self.reaction,
            "performance": {**self.performance.to_json(), "ratio_to_first": self.ratio_to_first},
            "resiliency": self.resiliency.to_json(),
            "complexity": self.complexity.to_json(),
        }
        if self.migrations is not None:
            document["migrations"] = {vm: m.to_json() for vm, m in self.migrations.items()}
        return document


class Conclusions(_Frozen):
    """Whether the paper's two conclusions hold, and the sentences that say why."""

    all_resilient: bool
    all_resilient_statement: str
    pinning_fastest: bool | None = None
    pinning_most_complex: bool | None = None
    pinning_statement: str = "pinning was not evaluated"


class Results(_Frozen):
    """`results.json`: the scenario, its fabric, jobs and faults, each strategy's result,
    the conclusions and the recommendation."""

    scenario: str
    seed: int
    fabric: dict[str, object]
    jobs: list[JobInfo]
    faults: list[FaultEvent]
    default_faults: bool
    reaction_timings_s: dict[str, object]
    first_strategy: str
    strategies: dict[str, StrategyResult]
    conclusions: Conclusions
    recommendation: str

    @classmethod
    def from_json(cls, document: Document) -> Results:
        """A results document read back (a stored run, a results.json)."""
        return cls.model_validate(document)

    def to_json(self) -> Document:
        return {
            **self.model_dump(include={"scenario", "seed", "fabric", "jobs", "faults", "default_faults"}),
            "reaction_timings_s": dict(self.reaction_timings_s),
            "first_strategy": self.first_strategy,
            "strategies": {name: s.to_json() for name, s in self.strategies.items()},
            "conclusions": self.conclusions.model_dump(),
            "recommendation": self.recommendation,
        }
