"""The evaluation of one cloud: every strategy runs the whole cloud (each site's jobs, the
federated traffic, the live migrations between sites) on one engine run, without and with
its faults, and the report gives what each part got in both runs.

Per site: when its jobs finished and (for a training job) the iteration time; for the
federated traffic: its completion and the gateway failovers; per migration: total time,
downtime, connectivity downtime, bytes, rounds and how long a gateway failure stalled its
stream; per site: the host cores its NICs' offload saves (`nic offload`'s accounting).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from cloudtwin.engine.simulator import SimResult
from cloudtwin.evaluation.complexity import profile_score
from cloudtwin.evaluation.frozen import JsonObject
from cloudtwin.evaluation.offload import nic_offload
from cloudtwin.evaluation.resiliency import sample_timeline, step_value
from cloudtwin.evaluation.results import (
    CloudComplexity,
    CloudFault,
    CloudMigration,
    CloudMigrationRun,
    CloudPerformance,
    CloudResiliency,
    CloudResults,
    CloudRunSummary,
    CloudSiteRun,
    CloudStrategyResult,
    CloudTrafficRun,
    GatewayFailover,
    MigrationRound,
    MigrationSummary,
    SiteOutcome,
    Timeline,
    TrafficOutcome,
)
from cloudtwin.intercloud.traffic import Failover
from cloudtwin.mobility.precopy import PathEvent
from cloudtwin.routing.facts import profile_of
from cloudtwin.scenario.cloud import CloudScenario
from cloudtwin.twin.cloud import CloudRun, SitePart, run_cloud
from cloudtwin.twin.jobs import JobRequest
from cloudtwin.twin.preparation import resolve_strategy
from cloudtwin.twin.rings import training_step
from cloudtwin.twin.timeline import bytes_behind

__all__ = [
    "CloudEvaluation",
    "cloud_faults",
    "cloud_html",
    "cloud_markdown",
    "cloud_summary",
    "evaluate_cloud",
]

Report = Callable[[str], None]


@dataclass(frozen=True, eq=False)
class CloudEvaluation:
    """The cloud under every strategy asked for: its results (`CloudResults`, what
    `results.json` holds and the store keeps), and the fault-free and faulted runs of the
    scenario's own strategy (or the first asked for), whose operations data the store
    receives."""

    results: CloudResults
    runs: tuple[CloudRun, CloudRun] | None = None

    def to_json(self) -> JsonObject:
        """The results' JSON form (`evaluate --json` on a cloud, its `results.json`)."""
        return self.results.to_json()

    def markdown(self) -> str:
        """The report as Markdown tables."""
        return cloud_markdown(self)


def _finish(run: CloudRun, rows: slice) -> float:
    finish = run.finish_s[rows]
    return float(finish.max()) if finish.size else 0.0


def _training_step(run: CloudRun, part: SitePart) -> float | None:
    workload = part.scenario.workload
    if getattr(workload, "kind", None) != "training" or "workload" not in part.scenario.model_fields_set:
        return None
    step, _, _ = training_step(JobRequest(part.scenario, part.topology, workload, "training"))
    return step.iteration_s(_finish(run, part.flows))


def _hpl(run: CloudRun, part: SitePart) -> float | None:
    """HPL's TFLOPS per GPU with the ring bandwidths its probes got in this run (the model of
    `cloudtwin hpl`, whose probes run alone)."""
    from cloudtwin.cluster.spec import cluster_spec
    from cloudtwin.workloads import hpl as model

    w = part.scenario.workload
    if getattr(w, "kind", None) != "hpl" or "workload" not in part.scenario.model_fields_set:
        return None
    spec = cluster_spec(part.scenario, part.topology.nic_rate_bps)
    jobs = part.jobs
    start, finish = run.start_s[part.flows], run.finish_s[part.flows]
    rates = []
    for along in ("row", "column"):
        index = [i for i, name in enumerate(jobs.job_names) if name.endswith(f"-{along}")]
        rows = np.flatnonzero(np.isin(jobs.flow_job, index))
        span = float(finish[rows].max() - start[rows].min()) if rows.size else 0.0
        rates.append(model.PROBE_BYTES / span if span > 0 else spec.profile.nvlink_bytes_per_s)
    latency = model.MPI_LATENCY_S + spec.overheads.nic_latency_s
    times = model.hpl_times(w, spec, rates[0], rates[1], latency, latency)  # type: ignore[arg-type]
    return float(model.hpl_flops(w.n) / times.total_s / (w.p * w.q) / 1e12)  # type: ignore[union-attr]


def _sites(clean: CloudRun, hit: CloudRun) -> tuple[SiteOutcome, ...]:
    outcomes = []
    for a, b in zip(clean.sites, hit.sites, strict=True):
        offload = nic_offload(a.scenario).report.totals() if a.scenario.nic.profile != "basic" else {}
        outcomes.append(
            SiteOutcome(
                site=a.name,
                flows=a.flows.stop - a.flows.start,
                completion_s=_finish(clean, a.flows),
                faulted_completion_s=_finish(hit, b.flows),
                training_step_s=_training_step(clean, a),
                faulted_training_step_s=_training_step(hit, b),
                host_cores_saved=float(offload.get("host_cores_saved", 0.0)),
                quarantined_hosts=int(offload.get("quarantined_hosts", 0)),
                hpl_tflops_per_gpu=_hpl(clean, a),
                faulted_hpl_tflops_per_gpu=_hpl(hit, b),
            )
        )
    return tuple(outcomes)


def _traffic(clean: CloudRun, hit: CloudRun) -> TrafficOutcome | None:
    if clean.traffic is None or hit.traffic is None:
        return None
    stalled = hit.traffic.stalled.any(axis=0) if hit.traffic.stalled.size else np.zeros(0, dtype=bool)
    return TrafficOutcome(
        flows=len(clean.traffic.flows),
        completion_s=_finish(clean, clean.traffic.ids),
        faulted_completion_s=_finish(hit, hit.traffic.ids),
        flows_stalled=int(stalled.sum()),
        failover_s=[f.total_s for f in hit.failovers],
    )


def _stall_s(events: Sequence[PathEvent]) -> float:
    """Seconds between each gateway stall of a stream and its move to the standby."""
    total, since = 0.0, None
    for event in events:
        text = str(event["event"])
        if text.startswith("stalled: gateway"):
            since = float(event["time_s"])
        elif since is not None and text in ("re-routed", "resumed"):
            total += float(event["time_s"]) - since
            since = None
    return total


def _migrations(clean: CloudRun, hit: CloudRun) -> dict[str, CloudMigration]:
    if clean.migrations is None or hit.migrations is None:
        return {}
    outcomes = {}
    for a, b in zip(clean.migrations.migrations, hit.migrations.migrations, strict=True):
        summary = MigrationSummary.of(a, b)
        outcomes[a.vm] = CloudMigration(
            vm=a.vm,
            source=a.source,
            destination=a.destination,
            **{name: getattr(summary, name) for name in MigrationSummary.model_fields},
            failover_stall_s=_stall_s(b.path_events),
            start_s=a.start_s,
            faulted_timeline=[
                MigrationRound(phase=r.phase, round=r.round, start_s=r.start_s, end_s=r.end_s, bytes=r.bytes)
                for r in b.result.timeline
            ],
        )
    return outcomes


def _moved_bytes(run: CloudRun) -> float:
    moved = sum(float(p.jobs.size_bytes.sum()) for p in run.sites)
    if run.traffic is not None:
        moved += float(run.traffic.flows.size_bytes.sum())
    if run.migrations is not None:
        moved += sum(m.bytes for m in run.migrations.migrations)
    return moved


def _wan(run: CloudRun) -> SimResult:
    """The run as the resiliency functions read it: its flows and the timeline of its
    federated traffic and migration streams."""
    return SimResult(
        run.start_s,
        run.finish_s,
        run.events,
        0,
        timeline_s=run.wan_timeline_s,
        timeline_bps=run.wan_timeline_bps,
    )


def _dip(clean: SimResult, hit: SimResult, failovers: Sequence[Failover]) -> float:
    """1 - the lowest throughput of the federated traffic and migrations with the faults over
    their throughput without them at the same instant, while a gateway fails over (0 without
    failovers)."""
    bt, bv, ft, fv = clean.timeline_s, clean.timeline_bps, hit.timeline_s, hit.timeline_bps
    if bt is None or bv is None or ft is None or fv is None or not bt.size or not ft.size:
        return 0.0
    deepest = 0.0
    for failover in failovers:
        end = failover.at_s + failover.total_s
        points = np.union1d(bt, ft)
        points = np.union1d(points[(points >= failover.at_s) & (points < end)], [failover.at_s])
        base, got = step_value(bt, bv, points), step_value(ft, fv, points)
        share = np.divide(got, base, out=np.ones_like(got), where=base > 0)
        deepest = max(deepest, float(1.0 - np.clip(share, 0.0, 1.0).min()))
    return round(deepest, 6)


def _strategy(cloud: CloudScenario, clean: CloudRun, hit: CloudRun) -> CloudStrategyResult:
    """One strategy's cloud on the three axes single-fabric `evaluate` compares (the ratio to
    the first strategy is set once every strategy ran), and each part of it."""
    strategy = resolve_strategy(clean.strategy, cloud.routing)
    end = float(clean.finish_s.max()) if clean.finish_s.size else 0.0
    base, faulted = _wan(clean), _wan(hit)
    has_wan = base.timeline_s is not None and base.timeline_s.size > 0 and faulted.timeline_s is not None
    marks = [m for f in hit.failovers for m in (f.at_s, f.at_s + f.total_s)]
    migrations = hit.migrations.migrations if hit.migrations is not None else []
    return CloudStrategyResult(
        performance=CloudPerformance(
            aggregate_gbps=_moved_bytes(clean) * 8 / end / 1e9 if end > 0 else 0.0,
            completion_s=end,
            faulted_completion_s=float(hit.finish_s.max()) if hit.finish_s.size else 0.0,
        ),
        resiliency=CloudResiliency(
            recovered=bool(np.isfinite(hit.finish_s).all()) and all(m.converged for m in migrations),
            time_to_recover_s=max((f.total_s for f in hit.failovers), default=None),
            dip=_dip(base, faulted, hit.failovers),
            bytes_delayed=bytes_behind(base, faulted),
            timeline=(
                sample_timeline(base, faulted, marks)
                if has_wan
                else Timeline(t_s=[], baseline_gbps=[], faulted_gbps=[])
            ),
        ),
        complexity=CloudComplexity(
            score=round(profile_score(profile_of(strategy, cloud.reaction.pinning_install)), 3)
        ),
        failovers=[GatewayFailover(site=f.site, at_s=f.at_s, total_s=f.total_s) for f in hit.failovers],
        sites={s.site: s for s in _sites(clean, hit)},
        traffic=_traffic(clean, hit),
        migrations=_migrations(clean, hit),
        engine_events=hit.events,
    )


def _recommend(strategies: dict[str, CloudStrategyResult]) -> str | None:
    """The strategy whose cloud ends first with its faults; ties go to the lower complexity."""
    scored = [
        (round(s.performance.faulted_completion_s, 9), s.complexity.score, name)
        for name, s in strategies.items()
    ]
    if not scored:
        return None
    best_t, _, best = min(scored, key=lambda x: (x[0], x[1]))
    others = "; ".join(f"{name} {t:.3f} s" for t, _, name in scored if name != best)
    tie = any(t == best_t for t, _, name in scored if name != best)
    why = " (tied; the lower complexity wins)" if tie else ""
    return (
        f"{best}: with its faults the cloud's work ends first at "
        f"{strategies[best].performance.faulted_completion_s:.3f} s"
        f"{why}" + (f" ({others})" if others else "")
    )


def cloud_faults(cloud: CloudScenario) -> list[CloudFault]:
    """Every fault of the cloud: where, what, from when until when (s; None: for good)."""
    faults: list[CloudFault] = []
    for g in cloud.federation.gateway_failures():
        what = "the active gateway fails; the standby takes over after the failover"
        faults.append(CloudFault(where=f"{g.site} gateway", what=what, at_s=g.at, until_s=g.until))
    for site in cloud.federation.sites:
        for fault in site.faults:
            target = fault.target or f"{fault.count} random {fault.of}"
            what = f"{fault.kind} {target} " + ("degrades" if fault.capacity is not None else "goes down")
            faults.append(CloudFault(where=site.name, what=what, at_s=fault.at, until_s=fault.until))
        for boot in site.nic.boot_faults:
            hosts = ",".join(str(h) for h in boot.hosts)
            what = f"NIC {boot.stage} {boot.kind}: measured boot fails, the host is quarantined"
            faults.append(CloudFault(where=f"{site.name} host {hosts}", what=what, at_s=0.0, until_s=None))
    return faults


def evaluate_cloud(
    cloud: CloudScenario, strategies: Sequence[str], report: Report | None = None
) -> CloudEvaluation:
    """Run the cloud under every strategy, without and with its faults."""
    outcomes: dict[str, CloudStrategyResult] = {}
    kept: tuple[CloudRun, CloudRun] | None = None
    own = cloud.routing.strategy if cloud.routing.strategy in strategies else strategies[0]
    for spec in strategies:
        if report is not None:
            report(f"{spec}: the cloud without faults")
        clean = run_cloud(cloud, spec, faults=False)
        if report is not None:
            report(f"{spec}: the cloud with its faults")
        hit = run_cloud(cloud, spec, faults=True)
        if spec == own:
            kept = (clean, hit)
        outcomes[clean.strategy] = _strategy(cloud, clean, hit)
    first = next(iter(outcomes.values())).performance.aggregate_gbps if outcomes else 0.0
    outcomes = {
        name: o.model_copy(
            update={
                "performance": o.performance.model_copy(
                    update={"ratio_to_first": o.performance.aggregate_gbps / first if first else None}
                )
            }
        )
        for name, o in outcomes.items()
    }
    results = CloudResults(
        scenario=cloud.name,
        seed=cloud.seed,
        recommendation=_recommend(outcomes),
        faults=cloud_faults(cloud),
        strategies=outcomes,
    )
    return CloudEvaluation(results, kept)


def cloud_summary(cloud: CloudScenario, strategy: str | None = None) -> CloudRunSummary:
    """The cloud without faults under one strategy (`cloudtwin run` on a cloud file): when
    its work ends, each site's completion (and training step), the federated traffic's
    completion, each migration's total time, downtime and bytes."""
    run = run_cloud(cloud, strategy, faults=False)
    sites = {
        part.name: CloudSiteRun(
            flows=part.flows.stop - part.flows.start,
            completion_s=_finish(run, part.flows),
            training_step_s=_training_step(run, part),
        )
        for part in run.sites
    }
    traffic = None
    if run.traffic is not None:
        traffic = CloudTrafficRun(flows=len(run.traffic.flows), completion_s=_finish(run, run.traffic.ids))
    migrations = {
        m.vm: CloudMigrationRun(
            source=m.source,
            destination=m.destination,
            converged=m.converged,
            total_time_s=m.total_time_s,
            downtime_s=m.downtime_s,
            bytes=m.bytes,
            over_limit=m.result.over_limit,
        )
        for m in (run.migrations.migrations if run.migrations is not None else [])
    }
    end = float(run.finish_s.max()) if run.finish_s.size else 0.0
    return CloudRunSummary(
        scenario=cloud.name,
        strategy=run.strategy,
        completion_s=end,
        moved_gbps=_moved_bytes(run) * 8 / end / 1e9 if run.finish_s.size else 0.0,
        sites=sites,
        traffic=traffic,
        migrations=migrations,
        engine_events=run.events,
    )


def cloud_markdown(evaluation: CloudEvaluation) -> str:
    """The report as Markdown (see `cloud_report`)."""
    from cloudtwin.evaluation import cloud_report

    return cloud_report.cloud_markdown(evaluation.results)


def cloud_html(evaluation: CloudEvaluation) -> str:
    """The report as one self-contained HTML page with its plots (see `cloud_report`)."""
    from cloudtwin.evaluation import cloud_report

    return cloud_report.cloud_html(evaluation.results)
