"""The three-fold evaluation's results as frozen types: what `results.json` holds.

Each type's fields are its part of the documented JSON, key for key and in the same order
(`to_json()` is their dump, see `cloudtwin.evaluation.frozen`); `read_results` reads a
written document back as its type (a fabric's `Results` or a cloud's `CloudResults`) and
`read_stored` a stored one with the store's bookkeeping (what `results show`, the
service and its pages show). A key no type describes is refused, not dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, TypeAdapter

from cloudtwin.evaluation.frozen import Frozen, absent
from cloudtwin.evaluation.metrics import RunSummary
from cloudtwin.mobility.precopy import PathEvent
from cloudtwin.twin.jobs import JobInfo

if TYPE_CHECKING:
    from cloudtwin.twin.migration import VmMigration

__all__ = [
    "Busbw",
    "CloudComplexity",
    "CloudFault",
    "CloudMigration",
    "CloudPerformance",
    "CloudResiliency",
    "CloudResults",
    "CloudComparison",
    "CloudRunSummary",
    "CloudMigrationRun",
    "CloudSiteRun",
    "CloudStrategyResult",
    "CloudTrafficRun",
    "GatewayFailover",
    "MigrationRound",
    "RecordedCloud",
    "RecordedResults",
    "RunResults",
    "SiteOutcome",
    "StoredCloud",
    "StoredEvaluation",
    "StoredRun",
    "TrafficOutcome",
    "read_results",
    "read_stored",
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


class FaultOutcome(Frozen):
    """What one fault did to the aggregate throughput."""

    at_s: float
    pre_fault_gbps: float
    dip: float
    recovered: bool
    time_to_recover_s: float | None


class JobBusbw(Frozen):
    """One collective job's nccl-tests figures."""

    op: str
    size_bytes: int
    ranks: int
    time_s: float
    algbw_GBps: float  # noqa: N815 (the JSON key, as nccl-tests names it)
    busbw_GBps: float  # noqa: N815


class Busbw(Frozen):
    """nccl-tests busbw (GB/s) of a run's collective jobs: overall and per job."""

    busbw_GBps: float  # noqa: N815
    algbw_GBps: float  # noqa: N815
    per_job: dict[str, JobBusbw]


class Performance(RunSummary):
    """A strategy's fault-free run: the run summary of all its flows (its fields first), per
    job and per tenant, the collective jobs' busbw (None without one), and its aggregate as
    a ratio to the first strategy's (None until the strategies are compared)."""

    per_job: dict[str, RunSummary]
    per_tenant: dict[str, RunSummary]
    busbw: Busbw | None
    ratio_to_first: float | None = None

    @classmethod
    def of(
        cls,
        summary: RunSummary,
        per_job: dict[str, RunSummary],
        per_tenant: dict[str, RunSummary],
        busbw: Busbw | None,
    ) -> Performance:
        """The summary of all flows with the per-job and per-tenant ones."""
        fields = {name: getattr(summary, name) for name in RunSummary.model_fields}
        return cls(**fields, per_job=per_job, per_tenant=per_tenant, busbw=busbw)


class Timeline(Frozen):
    """Aggregate throughput (Gbps) at instants `t_s`, without and with the faults."""

    t_s: list[float]
    baseline_gbps: list[float]
    faulted_gbps: list[float]


class TimelineBins(Frozen):
    """Average throughput (Gbps) over equal bins of `bin_s` starting at `t_s`: what a plot shows."""

    bin_s: float
    t_s: list[float]
    baseline_gbps: list[float]
    faulted_gbps: list[float]


class RepairSummary(Frozen):
    """One repair phase that moved flows: the fault's time, when they moved, how many, rules."""

    phase: str
    fault_s: float
    moved_s: float
    flows: int
    rules_changed: int


class Resiliency(Frozen):
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
    busbw_faulted: Busbw | None = Field(None, exclude_if=absent)


class Complexity(Frozen):
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


class MigrationSummary(Frozen):
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


class FaultEvent(Frozen):
    """A change of the fabric: when, which links, their capacities after it (Gbps)."""

    at_s: float
    links: list[str]
    capacity_gbps: list[float]


class StrategyResult(Frozen):
    """One strategy's entry in `results.json`: `{"spec", "reaction", "performance",
    "resiliency", "complexity"[, "migrations"]}` (the migrations when the scenario has some)."""

    spec: str
    reaction: str
    performance: Performance
    resiliency: Resiliency
    complexity: Complexity
    migrations: dict[str, MigrationSummary] | None = Field(None, exclude_if=absent)


class Conclusions(Frozen):
    """Whether the paper's two conclusions hold, and the sentences that say why."""

    all_resilient: bool
    all_resilient_statement: str
    pinning_fastest: bool | None = None
    pinning_most_complex: bool | None = None
    pinning_statement: str = "pinning was not evaluated"


class Results(Frozen):
    """`results.json`: the scenario, its fabric, jobs and faults, each strategy's result,
    the conclusions and the recommendation."""

    scenario: str
    seed: int
    fabric: dict[str, str | int | float]
    jobs: list[JobInfo]
    faults: list[FaultEvent]
    default_faults: bool
    reaction_timings_s: dict[str, float | str]
    first_strategy: str
    strategies: dict[str, StrategyResult]
    conclusions: Conclusions
    recommendation: str

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> Results:  # Any: JSON, validated here
        """A results document read back (a stored run, a results.json)."""
        return cls.model_validate(document)


# -- one cloud --------------------------------------------------------------------------
# A cloud's run has its own parts (sites, federated traffic, migrations between sites);
# its head (`performance`, `resiliency`, `complexity` of each strategy) has the names of a
# single fabric's, so the store, `results list` and the runs pages read both kinds alike.


class CloudPerformance(Frozen):
    """Every byte the cloud's fault-free run moved over when its last flow finished (Gbps),
    its ratio to the first strategy's, and when the cloud's work ends without and with the
    faults (s)."""

    aggregate_gbps: float
    ratio_to_first: float | None = None
    completion_s: float
    faulted_completion_s: float


class CloudResiliency(Frozen):
    """Whether everything finished (and every migration converged) with the faults; the
    longest gateway failover; the throughput over time of the federated traffic and the
    migration streams, its deepest dip under the faults and the most bytes it fell behind."""

    recovered: bool
    time_to_recover_s: float | None
    dip: float
    bytes_delayed: float
    timeline: Timeline


class CloudComplexity(Frozen):
    """The part of the single-fabric complexity score that the strategy's needs give
    (controller, host cooperation, switch features, state growing with flows)."""

    score: float


class GatewayFailover(Frozen):
    """A site's gateway failing over with the faults: when, and for how long (s)."""

    site: str
    at_s: float
    total_s: float


class SiteOutcome(Frozen):
    """One site's jobs in the cloud: completion without and with faults, a training job's
    iteration time in both, the host cores its NICs' offload saves, an HPL job's TFLOPS per
    GPU in both."""

    site: str
    flows: int
    completion_s: float
    faulted_completion_s: float
    training_step_s: float | None
    faulted_training_step_s: float | None
    host_cores_saved: float
    quarantined_hosts: int
    hpl_tflops_per_gpu: float | None = None
    faulted_hpl_tflops_per_gpu: float | None = None


class TrafficOutcome(Frozen):
    """The federated networks' traffic: its completion without and with faults, the flows a
    gateway failure stalled and each failover's length."""

    flows: int
    completion_s: float
    faulted_completion_s: float
    flows_stalled: int
    failover_s: list[float]


class MigrationRound(Frozen):
    """One transfer of a migration as it ran with the faults: phase, round, start and end
    (s from the migration's start), bytes on the wire."""

    phase: str
    round: int
    start_s: float
    end_s: float
    bytes: float


class _Move(Frozen):
    """Which VM moves, from which site to which."""

    vm: str
    source: str = Field(alias="from")
    destination: str = Field(alias="to")


class CloudMigration(MigrationSummary, _Move):
    """One live migration between sites: the VM and its move first, then its fault-free and
    faulted runs side by side (as `evaluate` gives them on one fabric), how long a gateway
    failure stalled its stream, when it started (s) and its rounds with the faults."""

    failover_stall_s: float
    start_s: float = 0.0
    faulted_timeline: list[MigrationRound] = []


class CloudStrategyResult(Frozen):
    """One strategy's cloud: the three axes single-fabric `evaluate` compares, the gateway
    failovers, each site, the federated traffic (None without one), each migration, and
    how many events the engine ran."""

    performance: CloudPerformance
    resiliency: CloudResiliency
    complexity: CloudComplexity
    failovers: list[GatewayFailover]
    sites: dict[str, SiteOutcome]
    traffic: TrafficOutcome | None
    migrations: dict[str, CloudMigration]
    engine_events: int


class CloudSiteRun(Frozen):
    """One site's jobs in the cloud's fault-free run: flows, completion (s), a training
    job's iteration time (s; None without one)."""

    flows: int
    completion_s: float
    training_step_s: float | None


class CloudTrafficRun(Frozen):
    """The federated traffic in the cloud's fault-free run: flows and completion (s)."""

    flows: int
    completion_s: float


class CloudMigrationRun(Frozen):
    """One live migration in the cloud's fault-free run: its move, whether it converged,
    total time (s), downtime (s), bytes, and whether a pause passed the VM's limit."""

    source: str = Field(alias="from")
    destination: str = Field(alias="to")
    converged: bool
    total_time_s: float
    downtime_s: float
    bytes: float
    over_limit: bool


class CloudRunSummary(Frozen):
    """The cloud without its faults under one strategy (`cloudtwin run` on a cloud file):
    when its work ends, the bytes it moved over that time (Gbps), each site, the federated
    traffic (None without one), each migration, and how many events the engine ran."""

    scenario: str
    strategy: str
    completion_s: float
    moved_gbps: float
    sites: dict[str, CloudSiteRun]
    traffic: CloudTrafficRun | None
    migrations: dict[str, CloudMigrationRun]
    engine_events: int


class CloudComparison(Frozen):
    """The cloud without its faults under each strategy (`cloudtwin compare` on a cloud file)."""

    scenario: str
    strategies: dict[str, CloudRunSummary]


class CloudFault(Frozen):
    """A fault of the cloud: where, what, from when until when (s; None: for good)."""

    where: str
    what: str
    at_s: float
    until_s: float | None


class CloudResults(Frozen):
    """A cloud's `results.json` (`kind: cloud`): the scenario, its faults, each strategy's
    cloud and the recommendation."""

    scenario: str
    kind: Literal["cloud"] = "cloud"
    seed: int
    recommendation: str | None
    faults: list[CloudFault]
    strategies: dict[str, CloudStrategyResult]


def _kind(document: Any) -> str:  # Any: a document or a results object, as pydantic hands it
    kind = document.get("kind") if isinstance(document, Mapping) else getattr(document, "kind", None)
    return "cloud" if kind == "cloud" else "fabric"


RunResults = Annotated[
    Annotated[Results, Tag("fabric")] | Annotated[CloudResults, Tag("cloud")], Discriminator(_kind)
]
"""A run's results, of one fabric (`Results`) or of one cloud (`CloudResults`, `kind: cloud`)."""

_RESULTS: TypeAdapter[Results | CloudResults] = TypeAdapter(RunResults)


def read_results(document: Mapping[str, Any]) -> Results | CloudResults:  # Any: JSON, validated here
    """A results document read back as its type: a cloud's (`kind: cloud`) or a fabric's."""
    return _RESULTS.validate_python(document)


# -- as the store keeps them --------------------------------------------------------------


class _RunId(Frozen):
    run_id: int | None


class RecordedResults(Results, _RunId):
    """A fabric's results with the run id the store gave them, first (None: not stored):
    what `cloudtwin evaluate --json` prints and an evaluate job of the service answers."""


class RecordedCloud(CloudResults):
    """A cloud's results with the run id the store gave them, last: what an evaluate job
    of the service answers for a cloud."""

    run_id: int


class _Bookkeeping(Frozen):
    run_id: int
    created_at: str  # when it was stored (UTC), as the store gives it
    flow_rows: int  # per-flow rows kept beside it


class StoredEvaluation(Results, _Bookkeeping):
    """A fabric's run as the store keeps it: its id, time and per-flow row count, then its
    results (`cloudtwin results show RUN --json`, `GET /api/runs/RUN`)."""


class StoredCloud(CloudResults, _Bookkeeping):
    """A cloud's run as the store keeps it: its id, time and per-flow row count, then its
    results (`cloudtwin results show RUN --json`, `GET /api/runs/RUN`)."""


StoredRun = Annotated[
    Annotated[StoredEvaluation, Tag("fabric")] | Annotated[StoredCloud, Tag("cloud")], Discriminator(_kind)
]
"""A stored run of one fabric or of one cloud (`kind: cloud`)."""

_STORED: TypeAdapter[StoredEvaluation | StoredCloud] = TypeAdapter(StoredRun)


def read_stored(
    run_id: int, created_at: str, flow_rows: int, document: Mapping[str, Any]  # Any: JSON, validated here
) -> StoredEvaluation | StoredCloud:
    """A stored results document read back as its type, with the store's bookkeeping."""
    return _STORED.validate_python(
        {**document, "run_id": run_id, "created_at": created_at, "flow_rows": flow_rows}
    )
