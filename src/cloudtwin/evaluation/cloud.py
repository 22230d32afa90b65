"""The evaluation of one cloud: every strategy runs the whole cloud (each site's jobs, the
federated traffic, the live migrations between sites) on one engine run, without and with
its faults, and the report gives what each part got in both runs.

Per site: when its jobs finished and (for a training job) the iteration time; for the
federated traffic: its completion and the gateway failovers; per migration: total time,
downtime, connectivity downtime, bytes, rounds and how long a gateway failure stalled its
stream; per site: the host cores its NICs' offload saves (`nic offload`'s accounting).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from cloudtwin.evaluation.offload import nic_offload
from cloudtwin.evaluation.results import MigrationSummary
from cloudtwin.mobility.precopy import PathEvent
from cloudtwin.scenario.cloud import CloudScenario
from cloudtwin.twin.cloud import CloudRun, SitePart, run_cloud
from cloudtwin.twin.jobs import JobRequest
from cloudtwin.twin.rings import training_step

__all__ = [
    "CloudEvaluation",
    "CloudOutcome",
    "MigrationOutcome",
    "SiteOutcome",
    "TrafficOutcome",
    "cloud_html",
    "cloud_markdown",
    "evaluate_cloud",
]

Report = Callable[[str], None]


@dataclass(frozen=True)
class SiteOutcome:
    """One site's jobs in the cloud: completion without and with faults, a training job's
    iteration time in both, the host cores its NICs' offload saves."""

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

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class TrafficOutcome:
    """The federated networks' traffic: its completion without and with faults, the flows a
    gateway failure stalled and each failover's length."""

    flows: int
    completion_s: float
    faulted_completion_s: float
    flows_stalled: int
    failover_s: tuple[float, ...]

    def to_json(self) -> dict[str, object]:
        return {**self.__dict__, "failover_s": list(self.failover_s)}


@dataclass(frozen=True)
class MigrationOutcome:
    """One live migration between sites: the fault-free and faulted runs side by side (as
    `evaluate` gives them on one fabric) and how long a gateway failure stalled its stream."""

    vm: str
    source: str
    destination: str
    summary: MigrationSummary
    failover_stall_s: float

    @property
    def converged(self) -> bool:
        return self.summary.converged

    @property
    def total_time_s(self) -> float:
        return self.summary.total_time_s

    @property
    def slowdown(self) -> float | None:
        """Faulted total time over the fault-free one (None unless both converged)."""
        return self.summary.slowdown

    def to_json(self) -> dict[str, object]:
        return {
            "vm": self.vm,
            "from": self.source,
            "to": self.destination,
            **self.summary.to_json(),
            "failover_stall_s": self.failover_stall_s,
        }


@dataclass(frozen=True)
class CloudOutcome:
    """One strategy's cloud."""

    strategy: str
    sites: tuple[SiteOutcome, ...]
    traffic: TrafficOutcome | None
    migrations: tuple[MigrationOutcome, ...]
    engine_events: int

    def to_json(self) -> dict[str, object]:
        return {
            "sites": {s.site: s.to_json() for s in self.sites},
            "traffic": self.traffic.to_json() if self.traffic is not None else None,
            "migrations": {m.vm: m.to_json() for m in self.migrations},
            "engine_events": self.engine_events,
        }


@dataclass(frozen=True, eq=False)
class CloudEvaluation:
    """The cloud under every strategy asked for; `runs` are the fault-free and faulted runs
    of the scenario's own strategy (or the first asked for), whose operations data the
    store receives."""

    scenario: str
    outcomes: tuple[CloudOutcome, ...]
    runs: tuple[CloudRun, CloudRun] | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "scenario": self.scenario,
            "kind": "cloud",
            "strategies": {o.strategy: o.to_json() for o in self.outcomes},
        }

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
        failover_s=tuple(f.total_s for f in hit.failovers),
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


def _migrations(clean: CloudRun, hit: CloudRun) -> tuple[MigrationOutcome, ...]:
    if clean.migrations is None or hit.migrations is None:
        return ()
    outcomes = []
    for a, b in zip(clean.migrations.migrations, hit.migrations.migrations, strict=True):
        summary = MigrationSummary.of(a, b)
        outcomes.append(MigrationOutcome(a.vm, a.source, a.destination, summary, _stall_s(b.path_events)))
    return tuple(outcomes)


def evaluate_cloud(
    cloud: CloudScenario, strategies: Sequence[str], report: Report | None = None
) -> CloudEvaluation:
    """Run the cloud under every strategy, without and with its faults."""
    outcomes = []
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
        outcomes.append(
            CloudOutcome(
                clean.strategy, _sites(clean, hit), _traffic(clean, hit), _migrations(clean, hit), hit.events
            )
        )
    return CloudEvaluation(cloud.name, tuple(outcomes), kept)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.1f}"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def cloud_markdown(evaluation: CloudEvaluation) -> str:
    """Sites, federated traffic and migrations per strategy, as Markdown."""
    lines = [f"# Cloud evaluation: {evaluation.scenario}", ""]
    for outcome in evaluation.outcomes:
        lines += [f"## {outcome.strategy}", "", "### Sites", ""]
        lines += [
            "| site | flows | completion s | with faults s | training step s | with faults s "
            "| host cores saved | quarantined hosts |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for s in outcome.sites:
            lines.append(
                f"| {s.site} | {s.flows} | {_s(s.completion_s)} | {_s(s.faulted_completion_s)} | "
                f"{_s(s.training_step_s)} | {_s(s.faulted_training_step_s)} | {s.host_cores_saved:.1f} | "
                f"{s.quarantined_hosts} |"
            )
        hpl = [s for s in outcome.sites if s.hpl_tflops_per_gpu is not None]
        if hpl:
            lines += ["", "### HPL", "", "| site | TFLOPS per GPU | with faults |", "|---|---|---|"]
            for s in hpl:
                got, hurt = _s(s.hpl_tflops_per_gpu), _s(s.faulted_hpl_tflops_per_gpu)
                lines.append(f"| {s.site} | {got} | {hurt} |")
        if outcome.traffic is not None:
            t = outcome.traffic
            lines += [
                "",
                "### Federated traffic",
                "",
                "| flows | completion s | with faults s | flows stalled | failover s |",
                "|---|---|---|---|---|",
            ]
            failovers = ", ".join(f"{f:.2f}" for f in t.failover_s) or "-"
            lines.append(
                f"| {t.flows} | {_s(t.completion_s)} | {_s(t.faulted_completion_s)} | {t.flows_stalled} "
                f"| {failovers} |"
            )
        if outcome.migrations:
            lines += [
                "",
                "### Live migrations",
                "",
                "| VM | from | to | time s | downtime ms | connectivity ms | GiB | rounds | with faults s "
                "| failover stall s | slowdown |",
                "|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            for m in outcome.migrations:
                r = m.summary
                slowdown = "-" if r.slowdown is None else f"{r.slowdown:.2f}"
                lines.append(
                    f"| {m.vm} | {m.source} | {m.destination} | {_s(r.total_time_s)} | {_ms(r.downtime_s)} | "
                    f"{_ms(r.connectivity_downtime_s)} | {r.bytes / 2**30:.2f} | {r.rounds} | "
                    f"{_s(r.faulted_total_time_s)} | {_s(m.failover_stall_s)} | {slowdown} |"
                )
        lines.append("")
    return "\n".join(lines)


def cloud_html(evaluation: CloudEvaluation) -> str:
    """The report as one self-contained HTML page (the Markdown tables as HTML tables)."""
    body: list[str] = []
    rows: list[list[str]] = []

    def flush() -> None:
        if not rows:
            return
        head, *rest = rows
        body.append(
            "<table><thead><tr>"
            + "".join(f"<th>{html.escape(c)}</th>" for c in head)
            + "</tr></thead><tbody>"
        )
        body.extend("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rest)
        body.append("</tbody></table>")
        rows.clear()

    for line in cloud_markdown(evaluation).splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if not all(set(c) <= {"-"} for c in cells):
                rows.append(cells)
            continue
        flush()
        level = len(line) - len(line.lstrip("#"))
        if level:
            body.append(f"<h{level}>{html.escape(line[level:].strip())}</h{level}>")
    flush()
    style = (
        "body{font-family:sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}th{background:#f4f4f4}"
    )
    title = html.escape(f"Cloud evaluation: {evaluation.scenario}")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n"
    )
