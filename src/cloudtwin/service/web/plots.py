"""Plotly figures (plain dicts, drawn in the page by the plotly.js shipped with plotly)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from typing_extensions import TypedDict

from cloudtwin.evaluation.colours import strategy_colour
from cloudtwin.service.models import Anomaly, Fabric, FabricNode, FctQuantiles, LogTimeline, Suspect, Timeline

__all__ = ["bar_figure", "fabric_figure", "fct_figure", "frame", "timeline_figure", "log_timeline_figure"]

def colour(name: str) -> str:
    """The colour of a strategy: the one the reports draw it in."""
    return strategy_colour(name)


#: A plotly.js object (a trace, a layout, a marker): its keys are plotly's own, its values
#: numbers, texts, lists and nested objects, all handed to the page as JSON.
PlotlyObject = dict[str, object]


class Figure(TypedDict):
    """A plotly.js figure: its traces and its layout."""

    data: list[PlotlyObject]
    layout: PlotlyObject


#: The toolbar (modebar) sits in a strip this tall at the top right of every plot; the
#: title goes under that strip, so a title of any length at any width stays clear of it.
TOOLBAR_PX = 28
#: The legend: a column right of the plot area (the axes' automargin and the legend push
#: the margins), so it covers neither the curves nor an axis title.
_RIGHT_LEGEND: PlotlyObject = {"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"}
_LAYOUT: PlotlyObject = {
    "margin": {"l": 64, "r": 24, "t": TOOLBAR_PX + 40, "b": 56}, "height": 360, "legend": _RIGHT_LEGEND,
}


def frame(title: str, **extra: object) -> PlotlyObject:
    """A layout with the page's common frame: margins, the title under the toolbar's strip
    (left-aligned), the legend outside the plot area. The dashboard's own plots use it too."""
    placed = {"text": title, "x": 0, "xref": "container", "xanchor": "left", "y": 1,
              "yref": "container", "yanchor": "top", "pad": {"t": TOOLBAR_PX + 4, "l": 12}}
    return {**_LAYOUT, "title": placed, **extra}


def _layout(title: str, x: str, y: str, x_type: str | None = None, **extra: object) -> PlotlyObject:
    xaxis: PlotlyObject = {"title": {"text": x}, "automargin": True}
    if x_type is not None:
        xaxis["type"] = x_type
    yaxis: PlotlyObject = {"title": {"text": y}, "automargin": True}
    return frame(title, xaxis=xaxis, yaxis=yaxis, **extra)


def timeline_figure(timelines: Mapping[str, Timeline]) -> Figure:
    """Aggregate throughput over time per strategy, with faults (solid) and without (dotted)."""
    data: list[PlotlyObject] = []
    for name, t in timelines.items():
        ms = [1e3 * x for x in t.t_s]
        data.append({"type": "scatter", "mode": "lines", "name": name, "x": ms, "y": t.faulted_gbps,
                     "line": {"shape": "hv", "color": colour(name)}, "legendgroup": name})
        data.append({"type": "scatter", "mode": "lines", "name": f"{name} (no faults)", "x": ms,
                     "y": t.baseline_gbps,
                     "line": {"shape": "hv", "dash": "dot", "width": 1, "color": colour(name)},
                     "legendgroup": name, "showlegend": False})
    return {"data": data, "layout": _layout("Throughput over time", "time (ms)", "aggregate Gbps")}


def fct_figure(fct: Mapping[str, FctQuantiles]) -> Figure:
    """The distribution (CDF) of flow completion times per strategy."""
    data: list[PlotlyObject] = [
        {"type": "scatter", "mode": "lines", "name": name, "x": [1e3 * v for v in q.fct_s],
         "y": q.quantile, "line": {"color": colour(name)}}
        for name, q in fct.items()
    ]
    return {"data": data, "layout": _layout("Flow completion time (CDF)", "FCT (ms)", "fraction of flows")}


def bar_figure(title: str, values: Mapping[str, float | None], unit: str) -> Figure:
    """One bar per strategy."""
    names = list(values)
    return {
        "data": [{"type": "bar", "x": names, "y": [values[n] for n in names],
                  "marker": {"color": [colour(n) for n in names]}}],
        "layout": _layout(title, "strategy", unit),
    }


def grouped_bar_figure(title: str, groups: Mapping[str, Mapping[str, float | None]], unit: str) -> Figure:
    """Bars per strategy, one colour per group (e.g. per run)."""
    data: list[PlotlyObject] = [
        {"type": "bar", "name": group, "x": list(values), "y": list(values.values())}
        for group, values in groups.items()
    ]
    return {"data": data, "layout": _layout(title, "strategy", unit, barmode="group")}


def busbw_figure(results: Mapping[str, Sequence[Mapping[str, object]]]) -> Figure:
    """Bus bandwidth against message size per strategy (rows of `cloudtwin nccl-tests --json`)."""
    data: list[PlotlyObject] = [
        {"type": "scatter", "mode": "lines+markers", "name": name,
         "x": [r["size_bytes"] for r in rows], "y": [r["busbw_GBps"] for r in rows],
         "line": {"color": colour(name)}}
        for name, rows in results.items()
    ]
    layout = _layout("Bus bandwidth against message size", "message size (bytes)", "busbw (GB/s)", "log")
    return {"data": data, "layout": layout}


def log_timeline_figure(timeline: LogTimeline) -> Figure:
    """Lines per window, and the anomalies flagged, as markers sized by their score."""
    anomalies: list[Anomaly] = timeline.anomalies
    data: list[PlotlyObject] = [
        {"type": "bar", "name": "lines", "x": timeline.windows, "y": timeline.lines,
         "marker": {"color": "#9bb7d4"}},
        {"type": "scatter", "mode": "markers", "name": "anomalies", "yaxis": "y2",
         "x": [a.window_start for a in anomalies], "y": [a.score for a in anomalies],
         "text": [f"{a.kind} {a.key}: {a.lines} lines {a.text or ''}" for a in anomalies],
         "marker": {"color": "#c0392b", "size": 9}},
    ]
    # the right-hand axis takes the right margin: the legend goes above the plot area instead
    legend = {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"}
    layout = _layout("Lines and anomalies over time", "window", "lines", legend=legend)
    layout["yaxis2"] = {"title": {"text": "surprise (-log10 p)"}, "overlaying": "y", "side": "right",
                        "automargin": True}
    return {"data": data, "layout": layout}


#: A tier with more nodes than this names only its suspects (the labels would run together).
LABELLED_PER_TIER = 40
#: The narrowest plot area the fabric is drawn for (px: the page in a window about 1,100 px
#: wide; 1,280 px gives 1,000), and the widest character of a node's name (10 px font,
#: digits 5.7 px in Chromium): a tier whose names would not fit side by side in that width
#: names only its suspects.
PLOT_AREA_PX = 800.0
CHAR_PX = 5.8
#: Where a node's name goes, by kind: hosts and NICs below, switches above.
_LABEL_AT = {"host": "bottom center", "nic": "bottom center"}
#: The marker of a node, and the ring around a suspect (the top three's, the others').
_NODE_PX, _RING_PX, _SMALL_RING_PX = 7, 18, 13


def fabric_figure(fabric: Fabric, suspects: Sequence[Suspect]) -> Figure:
    """The fabric in tiers, each node named; suspect cables and nodes marked by rank (the
    top one in red, the next two in orange) and listed in the legend, best first. In a
    cloud, each site's name heads its fabric and its nodes go by their names in the site."""
    where = {n.name: (n.x, n.y) for n in fabric.nodes}
    rank = {s.component: s.rank for s in suspects}
    plain_x: list[float | None] = []
    plain_y: list[float | None] = []
    marked: list[PlotlyObject] = []
    for a, b in fabric.cables:
        if a not in where or b not in where:
            continue
        (xa, ya), (xb, yb) = where[a], where[b]
        hit = rank.get(f"{a}-{b}") or rank.get(f"{b}-{a}")
        if hit:
            marked.append({"type": "scatter", "mode": "lines", "x": [xa, xb], "y": [ya, yb],
                           "name": f"#{hit} {a}-{b}", "legendrank": hit, "line": _line(hit)})
        else:
            plain_x += [xa, xb, None]
            plain_y += [ya, yb, None]
    marked += [_suspect_node(n, rank[n.name]) for n in fabric.nodes if n.name in rank]
    marked.sort(key=lambda trace: -int(str(trace["legendrank"])))  # the top suspect drawn last
    cables: PlotlyObject = {"type": "scatter", "mode": "lines", "x": plain_x, "y": plain_y,
                            "name": "cables", "hoverinfo": "skip", "showlegend": False,
                            "line": {"color": "#c8ccd2", "width": 1}}
    top = max((n.y for n in fabric.nodes), default=0)
    sites = _sites(fabric)
    layout = frame("Suspects on the fabric (red: most likely)", height=460, xaxis={"visible": False},
                   yaxis={"visible": False, "range": [-0.6, top + (0.9 if sites else 0.4)]})  # room for names
    if sites:
        layout["annotations"] = [
            {"x": x, "y": top + 0.6, "text": f"<b>{site}</b>", "showarrow": False, "xanchor": "center",
             "yanchor": "bottom", "font": {"size": 12, "color": "#1d2733"}, "xref": "x", "yref": "y"}
            for site, x in sites.items()
        ]
    return {"data": [cables, *marked, _nodes(fabric, rank, bool(sites))], "layout": layout}


def _sites(fabric: Fabric) -> dict[str, float]:
    """A cloud's sites (site-qualified names, `west.leaf1`) and the middle of each one's
    drawing; empty for one fabric."""
    spans: dict[str, list[float]] = {}
    for n in fabric.nodes:
        site, dot, _ = n.name.partition(".")
        if not dot:
            return {}
        spans.setdefault(site, []).append(n.x)
    return {site: round((min(xs) + max(xs)) / 2, 3) for site, xs in spans.items()}


def _nodes(fabric: Fabric, rank: Mapping[str, int], in_site: bool) -> PlotlyObject:
    """Every node as a marker, named (all of a tier's, or its suspects' when the tier's names
    would run together); a suspect's marker is as large as its ring, so its name clears it."""
    nodes = fabric.nodes
    labels = {n.name: _label(n.name.partition(".")[2] if in_site else n.name) for n in nodes}
    named = _tiers_with_room(fabric, labels)
    return {
        "type": "scatter", "mode": "markers+text", "name": "nodes", "showlegend": False,
        "x": [n.x for n in nodes], "y": [n.y for n in nodes],
        "text": [labels[n.name] if n.y in named or n.name in rank else "" for n in nodes],
        "textposition": [_LABEL_AT.get(n.kind, "top center") for n in nodes],
        "textfont": {"size": 10, "color": "#1d2733"},
        "hovertext": [f"{n.name} ({n.kind})" + (f" #{rank[n.name]}" if n.name in rank else "")
                      for n in nodes],
        "hoverinfo": "text",
        "marker": {"size": [_ring_px(rank[n.name]) if n.name in rank else _NODE_PX for n in nodes],
                   "opacity": [0 if n.name in rank else 1 for n in nodes],
                   "color": [_colour(rank.get(n.name)) for n in nodes]},
    }


def _tiers_with_room(fabric: Fabric, labels: Mapping[str, str]) -> set[int]:
    """The tiers whose names fit side by side when the drawing is PLOT_AREA_PX wide."""
    xs = [n.x for n in fabric.nodes]
    if not xs:
        return set()
    px_per_unit = PLOT_AREA_PX / max(max(xs) - min(xs) + 1.0, 1.0)
    tiers: dict[int, list[FabricNode]] = {}
    for n in fabric.nodes:
        tiers.setdefault(n.y, []).append(n)
    room = set()
    for tier, members in tiers.items():
        if len(members) > LABELLED_PER_TIER:
            continue
        placed = sorted(members, key=lambda n: n.x)
        widest = max(CHAR_PX * max(len(part) for part in labels[n.name].split("<br>")) for n in placed)
        gaps = [(b.x - a.x) * px_per_unit for a, b in zip(placed, placed[1:], strict=False)]
        if all(gap >= widest + 4 for gap in gaps):
            room.add(tier)
    return room


def _label(name: str) -> str:
    """A node's name as drawn: a NIC's on two lines under it (`host3` over `nic0`)."""
    return name.replace("/", "<br>")


def _ring_px(rank: int) -> int:
    return _RING_PX if rank <= 3 else _SMALL_RING_PX


def _suspect_node(node: FabricNode, rank: int) -> PlotlyObject:
    """A ring around a suspect node, in its rank's colour, listed in the legend."""
    return {"type": "scatter", "mode": "markers", "x": [node.x], "y": [node.y],
            "name": f"#{rank} {node.name}", "legendrank": rank, "hoverinfo": "name",
            "marker": {"symbol": "circle-open-dot", "size": _ring_px(rank),
                       "color": _colour(rank), "line": {"width": 3 if rank <= 3 else 1.5}}}


def _colour(rank: int | None) -> str:
    if rank == 1:
        return "#d62728"
    if rank is not None and rank <= 3:
        return "#ff7f0e"
    return "#5b7fa6"


def _line(rank: int) -> PlotlyObject:
    return {"color": _colour(rank), "width": 6 if rank == 1 else 3 if rank <= 3 else 1.5}
