"""The evaluation's outputs: results.json, report.md and a self-contained report.html.

The conclusions and the recommendation are computed from the numbers:

- "all techniques are resilient" holds when every strategy recovered from every fault;
- "pinning is fastest" holds when pinning's throughput (busbw for a collective, else the
  aggregate) is within 0.5% of the best; "most complex" when its complexity score is the
  highest;
- the recommendation is, among the strategies that recovered (all, if none did) and
  are within 2% of the best throughput, the simplest (lowest score) of those whose worst
  job slowdown under the faults is within 5% of the mildest.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from cloudtwin.evaluation.colours import strategy_colour
from cloudtwin.evaluation.evaluate import Evaluation
from cloudtwin.evaluation.metrics import RunSummary
from cloudtwin.evaluation.results import Conclusions, FaultEvent, Results, StrategyResult, TimelineBins

__all__ = [
    "FASTEST_TOLERANCE",
    "NEAR_BEST",
    "NEAR_SLOWDOWN",
    "conclusions",
    "recommendation",
    "render_html",
    "render_markdown",
    "results",
    "tradeoff_rows",
]

FASTEST_TOLERANCE = 0.005
NEAR_BEST = 0.02
NEAR_SLOWDOWN = 0.05

Group = Literal["job", "tenant"]


Strategies = Mapping[str, StrategyResult]


def _throughput(strategy: StrategyResult) -> tuple[str, float]:
    busbw = strategy.performance.busbw
    if busbw:
        return "busbw GB/s", float(busbw.busbw_GBps)
    return "aggregate Gbps", float(strategy.performance.aggregate_gbps)


def conclusions(strategies: Strategies) -> Conclusions:
    """Whether the paper's two conclusions hold here, with the numbers that decide it."""
    names = list(strategies)
    failed = [n for n in names if not strategies[n].resiliency.recovered]
    times = {n: strategies[n].resiliency.time_to_recover_s for n in names}
    if failed:
        resilient = f"does not hold: {', '.join(failed)} did not recover to 95% of the pre-fault level"
    else:
        slowest = max(names, key=lambda n: times[n] or 0.0)
        resilient = (
            f"holds: every strategy recovered to 95% of its pre-fault throughput "
            f"(slowest: {slowest}, {1e3 * (times[slowest] or 0.0):.1f} ms)"
        )
    if "pinning" not in strategies:
        return Conclusions(all_resilient=not failed, all_resilient_statement=resilient)
    label, best = max((_throughput(strategies[n]) for n in names), key=lambda x: x[1])
    _, pinned = _throughput(strategies["pinning"])
    fastest = pinned >= best * (1 - FASTEST_TOLERANCE)
    ties = [
        n
        for n in names
        if n != "pinning" and _throughput(strategies[n])[1] >= pinned * (1 - FASTEST_TOLERANCE)
    ]
    scores = {n: float(strategies[n].complexity.score) for n in names}
    most = scores["pinning"] >= max(scores.values())
    verdict = "holds" if fastest and most else ("partly holds" if fastest or most else "does not hold")
    tie_text = f", tied with {', '.join(ties)}" if fastest and ties else ""
    complex_text = (
        "the highest complexity score"
        if most
        else f"complexity score below {max(scores, key=lambda n: scores[n])}"
    )
    return Conclusions(
        all_resilient=not failed,
        all_resilient_statement=resilient,
        pinning_fastest=fastest,
        pinning_most_complex=most,
        pinning_statement=(
            f"{verdict}: pinning {label} {pinned:.1f} against the best {best:.1f}"
            f"{tie_text}; {complex_text} ({scores['pinning']:.2f})"
        ),
    )


def _worst_slowdown(strategy: StrategyResult) -> float:
    return float(max(strategy.resiliency.job_slowdown.values(), default=1.0))


def recommendation(strategies: Strategies) -> str:
    """Best throughput first, then the mildest fault impact, then the simplest.

    Among the strategies that recovered (all, if none did): those within NEAR_BEST of the
    best throughput; of those, the ones whose worst job slowdown under the faults is
    within NEAR_SLOWDOWN of the mildest; of those, the lowest complexity score.
    """
    names = list(strategies)
    pool = [n for n in names if strategies[n].resiliency.recovered] or names
    label, best = max((_throughput(strategies[n]) for n in pool), key=lambda x: x[1])
    fast = [n for n in pool if _throughput(strategies[n])[1] >= best * (1 - NEAR_BEST)]
    mildest = min(_worst_slowdown(strategies[n]) for n in fast)
    robust = [n for n in fast if _worst_slowdown(strategies[n]) <= mildest * (1 + NEAR_SLOWDOWN)]
    pick = min(robust, key=lambda n: (float(strategies[n].complexity.score), names.index(n)))
    chosen = strategies[pick]
    ttr = chosen.resiliency.time_to_recover_s
    recovery = "did not recover" if ttr is None else f"recovers in {1e3 * ttr:.1f} ms"
    text = (
        f"{pick}: {label} {_throughput(chosen)[1]:.1f} (best {best:.1f}), {recovery}, "
        f"worst job slowdown under faults {_worst_slowdown(chosen):.2f}x, "
        f"complexity score {chosen.complexity.score:.2f}"
    )
    harder = [n for n in robust if n != pick]
    weaker = [n for n in fast if n not in robust]
    if harder:
        text += f"; as fast and as robust but more complex: {', '.join(harder)}"
    if weaker:
        hit = ", ".join(f"{n} ({_worst_slowdown(strategies[n]):.2f}x)" for n in weaker)
        text += f"; as fast but hit harder by the faults: {hit}"
    return text


def results(evaluation: Evaluation) -> Results:
    """The evaluation's results: what `results.json` holds (`Results.to_json()`)."""
    first = evaluation.outcomes[0]
    base = first.performance.aggregate_gbps
    strategies = {
        o.name: o.result(o.performance.aggregate_gbps / base if base > 0 else None)
        for o in evaluation.outcomes
    }
    return Results(
        scenario=evaluation.scenario.name,
        seed=evaluation.scenario.seed,
        fabric=evaluation.topology.describe(),
        jobs=list(evaluation.bench.jobs),
        faults=evaluation.faults,
        default_faults=evaluation.default_faults,
        reaction_timings_s=evaluation.scenario.reaction.model_dump(),
        first_strategy=first.name,
        strategies=strategies,
        conclusions=conclusions(strategies),
        recommendation=recommendation(strategies),
    )


DEFAULT_FAULT_NOTE = " (none in the scenario: one random cable, drawn from the seed)"


def _pairs(mapping: Mapping[str, object]) -> str:
    return ", ".join(f"{k} {v}" for k, v in mapping.items())


def _gbps(fault: FaultEvent) -> str:
    return ", ".join(f"{x:g}" for x in fault.capacity_gbps)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{1e3 * value:.1f}"


def tradeoff_rows(document: Results) -> tuple[list[str], list[list[str]]]:
    """The three-fold trade-off table: header and one row per strategy."""
    strategies = document.strategies
    label = _throughput(next(iter(strategies.values())))[0]
    header = [
        "strategy",
        label,
        f"vs {document.first_strategy}",
        "recovered",
        "recover ms",
        "max stall ms",
        "dip",
        "MB delayed",
        "flows hit",
        "worst job slowdown",
        "complexity",
        "entries/switch",
        "changes/fault",
        "controller",
        "host coop",
    ]
    first = _throughput(strategies[document.first_strategy])[1]
    rows = []
    for name, s in strategies.items():
        value = _throughput(s)[1]
        res, cx = s.resiliency, s.complexity
        slow = max(res.job_slowdown.values(), default=1.0)
        rows.append(
            [
                name,
                f"{value:.1f}",
                f"{value / first:.2f}x" if first > 0 else "-",
                "yes" if res.recovered else "no",
                _ms(res.time_to_recover_s),
                _ms(res.max_stall_s),
                f"{res.dip:.3f}",
                f"{res.bytes_delayed / 1e6:.1f}",
                str(res.flows_affected),
                f"{slow:.3f}",
                f"{cx.score:.2f}",
                str(cx.forwarding_entries),
                f"{cx.rule_changes_per_fault:.1f}",
                "yes" if cx.controller else "no",
                "yes" if cx.host_cooperation else "no",
            ]
        )
    return header, rows


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _complexity_rows(document: Results) -> tuple[list[str], list[list[str]]]:
    keys = [
        "score",
        "forwarding_entries",
        "routes_per_switch_max",
        "ecmp_groups_per_switch_max",
        "flow_rules_per_switch_max",
        "flow_state_per_switch_max",
        "rule_changes_per_job",
        "route_updates_per_fault",
        "flow_rule_changes_per_fault",
        "state_grows_with",
        "entries_per_flow",
        "entries_per_tenant",
        "needs",
    ]
    header = ["strategy", *keys]
    rows = []
    for name, s in document.strategies.items():
        cx = s.complexity.to_json()  # the raw counts by their JSON names, as the header shows them
        rows.append([name] + [_fmt(cx[k]) for k in keys])
    return header, rows


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}" if not value.is_integer() else f"{value:.0f}"
    return str(value)


def _groups(strategy: StrategyResult, kind: Group) -> tuple[dict[str, RunSummary], dict[str, float]]:
    """Per job or per tenant: the fault-free summaries and the slowdowns under the faults."""
    if kind == "job":
        return strategy.performance.per_job, strategy.resiliency.job_slowdown
    return strategy.performance.per_tenant, strategy.resiliency.tenant_slowdown


def _group_rows(document: Results, kind: Group) -> tuple[list[str], list[list[str]]]:
    names = list(document.strategies)
    groups = list(_groups(document.strategies[names[0]], kind)[0])
    header = [kind, *(f"{n} Gbps / slowdown" for n in names)]
    rows = []
    for group in groups:
        cells = [group]
        for name in names:
            summaries, slowdowns = _groups(document.strategies[name], kind)
            gbps = summaries[group].aggregate_gbps
            slow = slowdowns.get(group, 1.0)
            cells.append(f"{gbps:.1f} / {slow:.3f}")
        rows.append(cells)
    return header, rows


def _limit(over: bool, faulted_over: bool) -> str:
    """Whether the pauses stayed within the VM's downtime limit, without / with the faults."""
    if over or faulted_over:
        return "OVER THE LIMIT" + (" (with faults)" if faulted_over and not over else "")
    return "within"


def migration_rows(document: Results) -> tuple[list[str], list[list[str]]]:
    """Per strategy and migrated VM: total time, downtime and rounds without and with faults;
    `faults x` is the total time with the faults over the time without them, `downtime
    limit` whether a pause passed the VM's limit."""
    header = [
        "strategy",
        "vm",
        "total s",
        "total, faults s",
        "faults x",
        "downtime ms",
        "downtime, faults ms",
        "downtime limit",
        "rounds",
        "GB sent",
    ]
    rows = []
    for name, strategy in document.strategies.items():
        for vm, m in (strategy.migrations or {}).items():

            def total(converged: bool, seconds: float) -> str:
                return f"{seconds:.3f}" if converged else "not converged"

            rows.append(
                [
                    name,
                    vm,
                    total(m.converged, m.total_time_s),
                    total(m.faulted_converged, m.faulted_total_time_s),
                    "-" if m.slowdown is None else f"{m.slowdown:.3f}",
                    f"{m.downtime_s * 1e3:.1f}",
                    f"{m.faulted_downtime_s * 1e3:.1f}",
                    _limit(m.over_limit, m.faulted_over_limit),
                    f"{m.rounds} / {m.faulted_rounds}",
                    f"{m.bytes / 1e9:.3f} / {m.faulted_bytes / 1e9:.3f}",
                ]
            )
    return header, rows


def has_migrations(document: Results) -> bool:
    """Whether any strategy's result has the scenario's migrations."""
    return any(s.migrations is not None for s in document.strategies.values())


def render_markdown(document: Results) -> str:
    """`report.md`: the same content as the HTML report, without the plots."""
    c = document.conclusions
    faults = "\n".join(
        f"- {1e3 * f.at_s:.3f} ms: {', '.join(f.links)} -> {_gbps(f)} Gbps" for f in document.faults
    )
    parts = [
        f"# Evaluation of {document.scenario} (seed {document.seed})",
        "",
        "Fabric: " + ", ".join(f"{k} {v}" for k, v in document.fabric.items()),
        "",
        "Jobs: "
        + "; ".join(f"{j.name} ({j.kind}, tenants {', '.join(j.tenants)})" for j in document.jobs),
        "",
        "## Faults"
        + (" (none in the scenario: one random cable, from the seed)" if document.default_faults else ""),
        "",
        faults,
        "",
        "## Three-fold trade-off",
        "",
        _md_table(*tradeoff_rows(document)),
        "",
        "## Conclusions",
        "",
        f"- All techniques are resilient: {c.all_resilient_statement}.",
        f"- Pinning is fastest but most complex: {c.pinning_statement}.",
        "",
        "## Recommendation",
        "",
        document.recommendation + ".",
        "",
        "## Per job",
        "",
        _md_table(*_group_rows(document, "job")),
        "",
        "## Per tenant",
        "",
        _md_table(*_group_rows(document, "tenant")),
        "",
        "## Complexity (raw counts and score)",
        "",
        _md_table(*_complexity_rows(document)),
        "",
        "Reaction timings (s): " + ", ".join(f"{k} {v}" for k, v in document.reaction_timings_s.items()),
        "",
    ]
    if has_migrations(document):
        parts += [
            "## Live migrations (without / with the faults)",
            "",
            _md_table(*migration_rows(document)),
            "",
        ]
    return "\n".join(parts)




@dataclass(frozen=True)
class _Scale:
    """The axes every timeline of a report shares, so that their curves compare by eye."""

    t0_s: float
    t1_s: float
    top_gbps: float
    x_step_ms: float
    y_step_gbps: float

    @classmethod
    def of(cls, timelines: list[TimelineBins]) -> _Scale:
        """The time span and the rate range (from 0) covering every one of `timelines`."""
        shown = [t for t in timelines if t.t_s]
        t0 = min((t.t_s[0] for t in shown), default=0.0)
        t1 = max((t.t_s[-1] for t in shown), default=0.0)
        peak = max((max(*t.baseline_gbps, *t.faulted_gbps) for t in shown), default=0.0)
        peak = max(peak, 1e-6)
        y_step = nice_step(peak)
        top = y_step * math.ceil(peak / y_step - 1e-9)  # the first tick at or above the peak
        t1 = max(t1, t0 + 1e-9)
        return cls(t0, t1, top, nice_step(1e3 * (t1 - t0)), y_step)


def nice_step(span: float, ticks: int = 4) -> float:
    """A round tick step (1, 2, 2.5 or 5 times a power of ten) giving about `ticks` ticks.

    >>> nice_step(1399.3), nice_step(260.1), nice_step(0.7)
    (500.0, 100.0, 0.2)
    """
    raw = span / ticks
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))


def _ticks(low: float, high: float, step: float) -> list[float]:
    first = math.ceil(low / step - 1e-9)
    return [round(k * step, 12) for k in range(first, math.floor(high / step + 1e-9) + 1)]


def _timeline_svg(name: str, timeline: TimelineBins, marks: list[float], color: str, scale: _Scale) -> str:
    width, height, left, right, top_px, bottom = 460, 210, 64, 12, 22, 30
    t = timeline.t_s
    if not t:
        return ""
    plot_w, plot_h = width - left - right, height - top_px - bottom

    def px(x_s: float) -> float:
        return left + (x_s - scale.t0_s) / (scale.t1_s - scale.t0_s) * plot_w

    def py(gbps: float) -> float:
        return top_px + plot_h - gbps / scale.top_gbps * plot_h

    def steps(values: list[float]) -> str:
        points = []
        for i, (x, y) in enumerate(zip(t, values, strict=True)):
            if i:
                points.append(f"{px(x):.1f},{py(values[i - 1]):.1f}")
            points.append(f"{px(x):.1f},{py(y):.1f}")
        return " ".join(points)

    floor = top_px + plot_h
    lines = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{width}" height="{height}" '
        f'role="img" aria-label="throughput timeline of {html.escape(name)}" '
        f'data-y-max="{scale.top_gbps:g}" data-x-max="{1e3 * scale.t1_s:g}">',
        f'<text x="{left}" y="14" font-size="12" font-weight="bold">{html.escape(name)}</text>',
    ]
    for gbps in _ticks(0.0, scale.top_gbps, scale.y_step_gbps):
        y = py(gbps)
        lines.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#e4e4e4"/>')
        lines.append(f'<text class="ytick" x="{left - 4}" y="{y + 3:.1f}" font-size="10" '
                     f'text-anchor="end">{gbps:g} Gbps</text>')
    for ms in _ticks(1e3 * scale.t0_s, 1e3 * scale.t1_s, scale.x_step_ms):
        x = px(ms / 1e3)
        lines.append(f'<line x1="{x:.1f}" y1="{floor}" x2="{x:.1f}" y2="{floor + 4}" stroke="#444"/>')
        lines.append(f'<text class="xtick" x="{x:.1f}" y="{floor + 15}" font-size="10" '
                     f'text-anchor="middle">{ms:g} ms</text>')
    lines += [
        f'<line x1="{left}" y1="{floor}" x2="{width - right}" y2="{floor}" stroke="#444"/>',
        f'<line x1="{left}" y1="{top_px}" x2="{left}" y2="{floor}" stroke="#444"/>',
    ]
    for mark in marks:
        if scale.t0_s <= mark <= scale.t1_s:
            x = px(mark)
            lines.append(f'<line x1="{x:.1f}" y1="{top_px}" x2="{x:.1f}" y2="{floor}" stroke="#999" '
                         'stroke-dasharray="3,3"/>')
    lines.append(
        f'<polyline fill="none" stroke="#aaa" stroke-width="1.5" stroke-dasharray="5,3" '
        f'points="{steps(timeline.baseline_gbps)}"/>'
    )
    lines.append(
        f'<polyline fill="none" stroke="{color}" stroke-width="1.5" '
        f'points="{steps(timeline.faulted_gbps)}"/>'
    )
    lines.append("</svg>")
    return "\n".join(lines)


def _bar_svg(title: str, values: dict[str, float], unit: str) -> str:
    width, row = 460, 22
    height = 24 + row * len(values)
    top = max(list(values.values()) + [1e-9])
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{html.escape(title)}">',
        f'<text x="0" y="14" font-size="12" font-weight="bold">{html.escape(title)}</text>',
    ]
    for i, (name, value) in enumerate(values.items()):
        y = 22 + i * row
        bar = value / top * (width - 220)
        parts.append(f'<text x="0" y="{y + 14}" font-size="11">{html.escape(name)}</text>')
        parts.append(
            f'<rect x="120" y="{y + 3}" width="{bar:.1f}" height="14" fill="{strategy_colour(name)}"/>'
        )
        parts.append(f'<text x="{125 + bar:.1f}" y="{y + 14}" font-size="11">{value:.2f} {unit}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _html_table(header: list[str], rows: list[list[str]], table_id: str | None = None) -> str:
    """A table in a box of its own that scrolls sideways when the window is narrower than
    the table; a header like `routes_per_switch_max` stays on one line (a JSON name broken
    at its underscores reads as three words)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    named = f' id="{table_id}"' if table_id else ""
    table = f"<table{named}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="wide">{table}</div>'



def render_html(document: Results) -> str:
    """`report.html`: one file, no external resources (inline SVG and CSS)."""
    strategies = document.strategies
    c = document.conclusions
    marks = [f.at_s for f in document.faults]
    scale = _Scale.of([s.resiliency.timeline_binned for s in strategies.values()])
    timelines = "\n".join(
        _timeline_svg(name, s.resiliency.timeline_binned, marks, strategy_colour(name), scale)
        for name, s in strategies.items()
    )
    bins = len(next(iter(strategies.values())).resiliency.timeline_binned.t_s)
    has_collective = any(s.performance.busbw for s in strategies.values())
    nvlink = "; network traffic only, not NVLink inside hosts" if has_collective else ""
    label = _throughput(next(iter(strategies.values())))[0]
    perf = _bar_svg(f"Performance ({label})", {n: _throughput(s)[1] for n, s in strategies.items()}, "")
    busbw = {n: s.performance.busbw.busbw_GBps for n, s in strategies.items() if s.performance.busbw}
    busbw_svg = (
        _bar_svg("NCCL busbw per strategy (GB/s)", busbw, "GB/s")
        if busbw
        else "<p>busbw: no collective job in this scenario.</p>"
    )
    score = _bar_svg(
        "Complexity score (lower is simpler)",
        {n: s.complexity.score for n, s in strategies.items()},
        "",
    )
    faults = "".join(
        f"<li>{1e3 * f.at_s:.3f} ms: {html.escape(', '.join(f.links))} &rarr; {_gbps(f)} Gbps</li>"
        for f in document.faults
    )
    title = f"cloudtwin evaluation: {html.escape(document.scenario)}"
    migrations = (
        "<h2>Live migrations (without / with the faults)</h2>\n"
        + _html_table(*migration_rows(document))
        + "\n"
        if has_migrations(document)
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }}
th, td {{ border: 1px solid #ccc; padding: 3px 7px; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
.plots svg {{ margin: 0 1em 1em 0; }}
.wide {{ overflow-x: auto; max-width: 100%; }}
.wide th {{ white-space: nowrap; }}
</style></head>
<body>
<h1>{title}</h1>
<p>Seed {document.seed}. Fabric: {html.escape(_pairs(document.fabric))}.</p>
<h2>Faults{DEFAULT_FAULT_NOTE if document.default_faults else ""}</h2>
<ul>{faults}</ul>
<h2>Three-fold trade-off</h2>
{_html_table(*tradeoff_rows(document))}
<h2>Conclusions</h2>
<ul><li>All techniques are resilient: {html.escape(c.all_resilient_statement)}.</li>
<li>Pinning is fastest but most complex: {html.escape(c.pinning_statement)}.</li></ul>
<h2>Recommendation</h2>
<p id="recommendation">{html.escape(document.recommendation)}.</p>
<h2>Throughput over time</h2>
<p>Aggregate rate averaged over {bins} equal bins of the run (solid: with faults; dashed:
without; dotted lines: fault events){nvlink}.</p>
<div class="plots">{timelines}</div>
<h2>Performance and complexity</h2>
<div class="plots">{perf}{busbw_svg}{score}</div>
<h2>Per job</h2>
{_html_table(*_group_rows(document, "job"))}
<h2>Per tenant</h2>
{_html_table(*_group_rows(document, "tenant"))}
<h2>Complexity: raw counts</h2>
{_html_table(*_complexity_rows(document), table_id="complexity")}
<p>Reaction timings (s): {html.escape(_pairs(document.reaction_timings_s))}</p>
{migrations}<script>document.documentElement.dataset.rendered = "{len(strategies)} strategies";</script>
</body></html>
"""
