"""The report of one cloud, read from its typed results (`CloudResults`: what `evaluate
--json` prints, `results.json` holds and the store keeps), so the terminal, `report.md`,
`report.html`, `results show` and the runs page show the same tables.

Tables: the strategies compared with the recommendation, the faults, each site, the
federated traffic and each live migration (one row per strategy). The HTML page adds three
plots: each migration's rounds and stalls on a timeline with the gateway failovers, each
site's completion without and with the faults, and the throughput of the federated traffic
and the migration streams over time.

Units, the same everywhere: seconds (`s`), milliseconds (`ms`), GB = 10^9 bytes (as
`migrate run`), Gbps = 10^9 bit/s. The migrations' `faults x` is the total time with the
faults over the time without them (`migrate run`'s `slowdown` is another ratio: the time
beside the other traffic over the time alone on an idle path).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from cloudtwin.evaluation.colours import strategy_colour
from cloudtwin.evaluation.results import CloudResults, CloudStrategyResult, Timeline

__all__ = [
    "CloudTable",
    "cloud_body",
    "cloud_html",
    "cloud_markdown",
    "cloud_notes",
    "cloud_plots",
    "cloud_tables",
]

@dataclass(frozen=True)
class CloudTable:
    """A table of the report: its title, column names and rows of cells (text)."""

    key: str
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.1f}"


def _grouped(rows: Sequence[tuple[str, ...]], at: int, names: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """Rows that differ only in their strategy (cell `at`) as one row naming them all (`all`
    when every strategy gives the same), so equal results are not repeated."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for row in rows:
        groups.setdefault(row[:at] + row[at + 1 :], []).append(row[at])
    out = []
    for rest, strategies in groups.items():
        label = "all" if len(names) > 1 and strategies == list(names) else ", ".join(strategies)
        out.append(rest[:at] + (label,) + rest[at:])
    return tuple(out)


def _comparison(document: CloudResults) -> CloudTable:
    rows = []
    for name, s in document.strategies.items():
        perf, res = s.performance, s.resiliency
        ratio = perf.ratio_to_first
        rows.append(
            (
                name,
                _s(perf.completion_s),
                _s(perf.faulted_completion_s),
                f"{perf.aggregate_gbps:.1f}",
                "-" if ratio is None else f"{ratio:.2f}x",
                "yes" if res.recovered else "no",
                _s(res.time_to_recover_s),
                f"{res.dip:.0%}",
                f"{res.bytes_delayed / 1e9:.2f}",
                f"{s.complexity.score:g}",
            )
        )
    header = (
        "strategy",
        "ends s",
        "ends, faults s",
        "moved Gbps",
        "vs first",
        "finished",
        "failover s",
        "traffic dip",
        "traffic GB behind",
        "complexity",
    )
    return CloudTable("strategies", "Strategies compared", header, tuple(rows))


def _faults(document: CloudResults) -> CloudTable:
    rows = tuple(
        (f.where, f.what, _s(f.at_s), "never" if f.until_s is None else _s(f.until_s))
        for f in document.faults
    )
    return CloudTable("faults", "Faults", ("where", "what", "at s", "back at s"), rows)


def _first(document: CloudResults) -> CloudStrategyResult | None:
    return next(iter(document.strategies.values()), None)


def _sites(document: CloudResults) -> CloudTable:
    rows = []
    strategies = document.strategies
    first = _first(document)
    for site in first.sites if first is not None else {}:
        for name, s in strategies.items():
            x = s.sites[site]
            rows.append(
                (
                    site,
                    name,
                    str(x.flows),
                    _s(x.completion_s),
                    _s(x.faulted_completion_s),
                    _s(x.training_step_s),
                    _s(x.faulted_training_step_s),
                    f"{x.host_cores_saved:.1f}",
                    str(x.quarantined_hosts),
                )
            )
    header = (
        "site",
        "strategy",
        "flows",
        "completion s",
        "completion, faults s",
        "training step s",
        "training step, faults s",
        "host cores saved",
        "quarantined hosts",
    )
    return CloudTable("sites", "Sites", header, _grouped(rows, 1, list(strategies)))


def _hpl(document: CloudResults) -> CloudTable | None:
    rows = []
    for name, s in document.strategies.items():
        for site, x in s.sites.items():
            if x.hpl_tflops_per_gpu is not None:
                rows.append((site, name, _s(x.hpl_tflops_per_gpu), _s(x.faulted_hpl_tflops_per_gpu)))
    header = ("site", "strategy", "TFLOPS per GPU", "TFLOPS per GPU, faults")
    return CloudTable("hpl", "HPL", header, _grouped(rows, 1, list(document.strategies))) if rows else None


def _traffic(document: CloudResults) -> CloudTable | None:
    rows = []
    for name, s in document.strategies.items():
        t = s.traffic
        if t is None:
            continue
        failovers = ", ".join(f"{f:.2f}" for f in t.failover_s) or "-"
        rows.append(
            (
                name,
                str(t.flows),
                _s(t.completion_s),
                _s(t.faulted_completion_s),
                str(t.flows_stalled),
                failovers,
            )
        )
    header = ("strategy", "flows", "completion s", "completion, faults s", "flows stalled", "failover s")
    names = list(document.strategies)
    return CloudTable("traffic", "Federated traffic", header, _grouped(rows, 0, names)) if rows else None


def _limit(over: bool, converged: bool) -> str:
    if not converged:
        return "did not converge"
    return "OVER THE LIMIT" if over else "within"


def _migrations(document: CloudResults) -> list[CloudTable]:
    """Two tables: each migration without the faults, and with them."""
    clean, hit = [], []
    strategies = document.strategies
    first = _first(document)
    for vm in first.migrations if first is not None else {}:
        for name, s in strategies.items():
            m = s.migrations[vm]
            slowdown = m.slowdown
            clean.append(
                (
                    vm,
                    name,
                    f"{m.source}->{m.destination}",
                    _s(m.total_time_s),
                    _ms(m.downtime_s),
                    _ms(m.connectivity_downtime_s),
                    f"{m.bytes / 1e9:.3f}",
                    str(m.rounds),
                    _limit(m.over_limit, m.converged),
                )
            )
            hit.append(
                (
                    vm,
                    name,
                    _s(m.faulted_total_time_s),
                    _ms(m.faulted_downtime_s),
                    f"{m.faulted_bytes / 1e9:.3f}",
                    str(m.faulted_rounds),
                    _limit(m.faulted_over_limit, m.faulted_converged),
                    _s(m.failover_stall_s),
                    "-" if slowdown is None else f"{slowdown:.2f}",
                )
            )
    if not clean:
        return []
    names = list(strategies)
    head = (
        "VM",
        "strategy",
        "move",
        "total s",
        "downtime ms",
        "connectivity ms",
        "GB sent",
        "rounds",
        "downtime limit",
    )
    faulted = (
        "VM",
        "strategy",
        "total s",
        "downtime ms",
        "GB sent",
        "rounds",
        "downtime limit",
        "failover stall s",
        "faults x",
    )
    return [
        CloudTable("migrations", "Live migrations", head, _grouped(clean, 1, names)),
        CloudTable("migrations-faulted", "Live migrations with the faults", faulted, _grouped(hit, 1, names)),
    ]


def cloud_tables(document: CloudResults) -> list[CloudTable]:
    """The report's tables, in the order it shows them."""
    tables = [_comparison(document), _faults(document), _sites(document)]
    tables += [t for t in (_hpl(document), _traffic(document)) if t is not None]
    return tables + _migrations(document)


def cloud_notes(document: CloudResults) -> list[str]:
    """The sentences under the tables: the recommendation and what each figure means."""
    notes = []
    if document.recommendation:
        notes.append(f"Recommendation: {document.recommendation}.")
    notes += [
        "Ends: when the last flow of the run finishes (every site's jobs, the federated traffic, "
        "the migration "
        "streams); finished: whether everything finished and every migration converged with the faults; "
        "failover s: the longest gateway failover; moved Gbps: every byte of the fault-free run over "
        "that time, vs first its ratio to the "
        "first strategy's. Traffic dip: the deepest drop of the throughput of the federated traffic and "
        "the migration streams during a gateway failover, against the fault-free run at the same instant; "
        "traffic GB behind: the most they fell behind. Complexity: what the strategy needs (a controller 2, "
        "host cooperation 1, each switch feature beyond ECMP 0.5, state that grows with flows 1).",
        "Migrations: GB = 10^9 bytes, as `cloudtwin migrate run` prints them; downtime limit: whether the "
        "pause stayed within the VM's limit; faults x: the total time with the faults over the time "
        "without them (`migrate run`'s slowdown is the time beside the other traffic over the time alone).",
    ]
    return notes


def cloud_markdown(document: CloudResults) -> str:
    """The report as Markdown (the tables and notes; the plots are in the HTML page)."""
    lines = [f"# Cloud evaluation: {document.scenario}", ""]
    for table in cloud_tables(document):
        lines += [f"## {table.title}", "", "| " + " | ".join(table.header) + " |"]
        lines.append("|" + "---|" * len(table.header))
        lines += ["| " + " | ".join(row) + " |" for row in table.rows]
        lines.append("")
    lines += [*cloud_notes(document), ""]
    return "\n".join(lines)


# -- plots ------------------------------------------------------------------------------


def _svg_open(cls: str, width: int, height: int, label: str, **data: object) -> str:
    attrs = "".join(f' data-{k.replace("_", "-")}="{html.escape(str(v))}"' for k, v in data.items())
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="cloud-plot {cls}" width="{width}" height="{height}" '
        f'role="img" aria-label="{html.escape(label)}"{attrs}>'
    )


def _text(x: float, y: float, text: str, size: int = 11, anchor: str = "start", cls: str = "") -> str:
    klass = f' class="{cls}"' if cls else ""
    return (
        f'<text{klass} x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}">'
        f"{html.escape(text)}</text>"
    )


def _step(span: float) -> float:
    raw = span / 5 if span > 0 else 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))


def _ticks(top: float) -> list[float]:
    step = _step(top)
    return [round(k * step, 9) for k in range(int(top / step + 1e-9) + 1)]


def _migration_plot(name: str, s: CloudStrategyResult, color: str) -> str:
    """Each migration's rounds with the faults on one time axis, its stalls, the failovers."""
    migrations = s.migrations
    if not migrations:
        return ""
    width, left, right, lane = 640, 70, 16, 28
    height = 50 + lane * len(migrations) + 24
    ends = [m.start_s + r.end_s for m in migrations.values() for r in m.faulted_timeline]
    ends += [f.at_s + f.total_s for f in s.failovers]
    t1 = max(ends, default=1.0) or 1.0
    plot_w = width - left - right

    def px(t: float) -> float:
        return left + t / t1 * plot_w

    top, bottom = 34, 34 + lane * len(migrations)
    parts = [
        _svg_open("migration-timeline", width, height, f"migrations with faults under {name}", strategy=name),
        _text(0, 14, f"Migrations with faults ({name}): rounds, stalls, gateway failovers", 12),
    ]
    for f in s.failovers:
        x0, x1 = px(f.at_s), px(f.at_s + f.total_s)
        parts.append(
            f'<rect class="failover" x="{x0:.1f}" y="{top - 6}" width="{x1 - x0:.1f}" '
            f'height="{bottom - top + 6}" fill="#fde2c8"><title>{html.escape(f.site)} gateway fails '
            f'over: {f.total_s:.2f} s</title></rect>'
        )
        parts.append(_text(x0 + 2, top - 8, f"{f.site} gateway failover {f.total_s:.2f} s", 10))
    for i, (vm, m) in enumerate(migrations.items()):
        y = top + i * lane
        parts.append(_text(left - 6, y + 16, vm, 11, "end", "lane"))
        for r in m.faulted_timeline:
            x0, x1 = px(m.start_s + r.start_s), px(m.start_s + r.end_s)
            fill = "#555" if r.phase == "stop-and-copy" else color
            tip = f"{vm} {r.phase} round {r.round}: {r.start_s:.2f}-{r.end_s:.2f} s, {r.bytes / 1e9:.3f} GB"
            parts.append(
                f'<rect class="round" data-phase="{html.escape(r.phase)}" x="{x0:.1f}" y="{y + 4}" '
                f'width="{max(x1 - x0, 1.0):.1f}" height="16" fill="{fill}" stroke="#fff" stroke-width="0.5">'
                f"<title>{html.escape(tip)}</title></rect>"
            )
        since = None
        for event in m.path_events:
            text = str(event["event"])
            if text.startswith("stalled"):
                since = float(event["time_s"])
            elif since is not None and text in ("re-routed", "resumed"):
                x0, x1 = px(since), px(float(event["time_s"]))  # path events: run time
                parts.append(
                    f'<rect class="stall" x="{x0:.1f}" y="{y + 21}" width="{x1 - x0:.1f}" height="4" '
                    'fill="#d62728">'
                    f"<title>{html.escape(vm)} stalled {float(event['time_s']) - since:.2f} s</title></rect>"
                )
                since = None
    for t in _ticks(t1):
        parts.append(
            f'<line x1="{px(t):.1f}" y1="{bottom}" x2="{px(t):.1f}" y2="{bottom + 4}" stroke="#444"/>'
        )
        parts.append(_text(px(t), bottom + 15, f"{t:g} s", 10, "middle", "xtick"))
    parts.append(f'<line x1="{left}" y1="{bottom}" x2="{width - right}" y2="{bottom}" stroke="#444"/>')
    legend = "coloured: live rounds; dark: stop-and-copy; red bar: stalled; orange band: failover"
    parts += [_text(left, height - 2, legend, 10, cls="legend"), "</svg>"]
    return "\n".join(parts)


def _completion_plot(document: CloudResults) -> str:
    """Each site's completion per strategy: a light bar without faults, a full one with them."""
    rows = [
        (site, i, name, x.completion_s, x.faulted_completion_s)
        for i, (name, s) in enumerate(document.strategies.items())
        for site, x in s.sites.items()
    ]
    rows.sort(key=lambda r: (r[0], r[1]))
    if not rows:
        return ""
    width, left, right, row = 640, 150, 70, 26
    height = 40 + row * len(rows) + 20
    top_s = max(max(r[3], r[4]) for r in rows) or 1.0
    plot_w = width - left - right
    parts = [
        _svg_open("site-completion", width, height, "each site's completion without and with faults"),
        _text(0, 14, "Each site's jobs: completion without faults (light) and with them (full), s", 12),
    ]
    for k, (site, _, name, clean, hit) in enumerate(rows):
        y = 26 + k * row
        color = strategy_colour(name)
        parts.append(_text(left - 6, y + 14, f"{site} · {name}", 11, "end", "lane"))
        for cls, value, dy, opacity in (("clean", clean, 2, 0.35), ("faulted", hit, 11, 1.0)):
            w = value / top_s * plot_w
            parts.append(
                f'<rect class="{cls}" data-site="{html.escape(site)}" data-strategy="{html.escape(name)}" '
                f'data-seconds="{value:.6g}" x="{left}" y="{y + dy}" width="{w:.1f}" height="8" '
                f'fill="{color}" '
                f'fill-opacity="{opacity}"><title>{html.escape(site)} {cls}: {value:.3f} s</title></rect>'
            )
        parts.append(
            _text(left + max(clean, hit) / top_s * plot_w + 4, y + 14, f"{clean:.2f} / {hit:.2f} s", 10)
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _wan_plot(name: str, s: CloudStrategyResult, color: str, t1: float, top_gbps: float) -> str:
    """The federated traffic's and migration streams' throughput over time: dashed without
    faults, solid with them; failovers shaded."""
    timeline = s.resiliency.timeline
    t = timeline.t_s
    if not t:
        return ""
    width, height, left, right, top, bottom = 640, 220, 64, 16, 26, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    floor = top + plot_h

    def px(x: float) -> float:
        return left + x / t1 * plot_w

    def py(g: float) -> float:
        return floor - g / top_gbps * plot_h

    def steps(values: Sequence[float]) -> str:
        points = []
        for i, (x, y) in enumerate(zip(t, values, strict=True)):
            if i:
                points.append(f"{px(x):.1f},{py(values[i - 1]):.1f}")
            points.append(f"{px(x):.1f},{py(y):.1f}")
        return " ".join(points)

    parts = [
        _svg_open(
            "wan-timeline",
            width,
            height,
            f"federated traffic throughput under {name}",
            strategy=name,
            y_max=f"{top_gbps:g}",
        ),
        _text(0, 14, f"Federated traffic and migration streams ({name}), Gbps", 12),
    ]
    for f in s.failovers:
        x0, x1 = px(f.at_s), px(min(f.at_s + f.total_s, t1))
        parts.append(
            f'<rect class="failover" x="{x0:.1f}" y="{top}" width="{max(x1 - x0, 0):.1f}" height="{plot_h}" '
            f'fill="#fde2c8"><title>{html.escape(f.site)} gateway failover '
            f'{f.total_s:.2f} s</title></rect>'
        )
    for g in _ticks(top_gbps):
        parts.append(
            f'<line x1="{left}" y1="{py(g):.1f}" x2="{width - right}" y2="{py(g):.1f}" stroke="#eee"/>'
        )
        parts.append(_text(left - 4, py(g) + 3, f"{g:g} Gbps", 10, "end", "ytick"))
    for x in _ticks(t1):
        parts.append(_text(px(x), floor + 15, f"{x:g} s", 10, "middle", "xtick"))
    parts += [
        f'<line x1="{left}" y1="{floor}" x2="{width - right}" y2="{floor}" stroke="#444"/>',
        f'<polyline class="baseline" fill="none" stroke="#999" stroke-width="1.5" stroke-dasharray="5,3" '
        f'points="{steps(timeline.baseline_gbps)}"/>',
        f'<polyline class="faulted" fill="none" stroke="{color}" stroke-width="1.5" '
        f'points="{steps(timeline.faulted_gbps)}"/>',
        _text(
            left,
            height - 4,
            "dashed grey: without faults; solid: with faults; orange band: gateway failover",
            10,
            cls="legend",
        ),
        "</svg>",
    ]
    return "\n".join(parts)


def _table_html(table: CloudTable) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in table.rows
    )
    return (
        f'<h2>{html.escape(table.title)}</h2><div class="wide"><table id="{table.key}">'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def cloud_plots(document: CloudResults) -> str:
    """The three kinds of plot, as inline SVG."""
    strategies = document.strategies
    timelines: list[Timeline] = [s.resiliency.timeline for s in strategies.values()]
    t1 = max((max(tl.t_s or [0.0]) for tl in timelines), default=0.0) or 1.0
    peak = max((max([*tl.baseline_gbps, *tl.faulted_gbps, 0.0]) for tl in timelines), default=0.0)
    top_gbps = _ticks(peak * 1.05 or 1.0)[-1] if peak else 1.0
    if top_gbps < peak:
        top_gbps += _step(peak)
    colors = {name: strategy_colour(name) for name in strategies}
    migration = [_migration_plot(n, s, colors[n]) for n, s in strategies.items()]
    wan = [_wan_plot(n, s, colors[n], t1, top_gbps) for n, s in strategies.items()]
    return (
        '<h2>Plots</h2><div class="plots">'
        + _completion_plot(document)
        + "".join(p for p in migration if p)
        + "".join(p for p in wan if p)
        + "</div>"
    )


def cloud_body(document: CloudResults) -> str:
    """The report's HTML without its page: the comparison and recommendation, the plots, the
    other tables and the notes (the runs page shows it inside its own)."""
    tables = cloud_tables(document)
    body = [_table_html(tables[0])]
    body += [f'<p class="recommendation">{html.escape(n)}</p>' for n in cloud_notes(document)[:1]]
    body.append(cloud_plots(document))
    body += [_table_html(t) for t in tables[1:]]
    body += [f"<p>{html.escape(n)}</p>" for n in cloud_notes(document)[1:]]
    return "".join(body)


def cloud_html(document: CloudResults) -> str:
    """The report as one self-contained HTML page: the tables, the notes and the plots."""
    body = [cloud_body(document)]
    style = (
        "body{font-family:sans-serif;margin:2em;max-width:90em}table{border-collapse:collapse;margin:.5em 0}"
        "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}th{background:#f4f4f4}"
        ".wide{overflow-x:auto}.plots svg{display:block;margin:0 0 1.5em 0}"
    )
    title = html.escape(f"Cloud evaluation: {document.scenario}")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{style}</style></head><body><h1>{title}</h1>{''.join(body)}</body></html>\n"
    )
