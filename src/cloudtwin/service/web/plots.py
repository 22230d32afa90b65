"""Plotly figures (plain dicts, drawn in the page by the plotly.js shipped with plotly)."""

from __future__ import annotations

from typing import Any

__all__ = ["bar_figure", "fabric_figure", "fct_figure", "timeline_figure", "log_timeline_figure"]

#: One colour per strategy on every plot (others take the next free colour).
_COLOURS = {"ecmp": "#1f77b4", "ecmp-qp": "#9467bd", "adaptive": "#2ca02c", "spray": "#8c564b",
            "pinning": "#ff7f0e"}
_SPARE = ("#17becf", "#bcbd22", "#e377c2", "#7f7f7f", "#d62728")


def colour(name: str) -> str:
    """The colour of a strategy."""
    return _COLOURS.get(name) or _SPARE[sum(map(ord, name)) % len(_SPARE)]


_LAYOUT: dict[str, Any] = {
    "margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "height": 340, "legend": {"orientation": "h"},
}


def _layout(title: str, x: str, y: str, **extra: Any) -> dict[str, Any]:
    return {**_LAYOUT, "title": {"text": title}, "xaxis": {"title": {"text": x}},
            "yaxis": {"title": {"text": y}}, **extra}


def timeline_figure(timelines: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    """Aggregate throughput over time per strategy, with faults (solid) and without (dotted)."""
    data: list[dict[str, Any]] = []
    for name, t in timelines.items():
        ms = [1e3 * x for x in t["t_s"]]
        data.append({"type": "scatter", "mode": "lines", "name": name, "x": ms, "y": t["faulted_gbps"],
                     "line": {"shape": "hv", "color": colour(name)}, "legendgroup": name})
        data.append({"type": "scatter", "mode": "lines", "name": f"{name} (no faults)", "x": ms,
                     "y": t["baseline_gbps"],
                     "line": {"shape": "hv", "dash": "dot", "width": 1, "color": colour(name)},
                     "legendgroup": name, "showlegend": False})
    return {"data": data, "layout": _layout("Throughput over time", "time (ms)", "aggregate Gbps")}


def fct_figure(fct: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    """The distribution (CDF) of flow completion times per strategy."""
    data = [
        {"type": "scatter", "mode": "lines", "name": name, "x": [1e3 * v for v in q["fct_s"]],
         "y": q["quantile"], "line": {"color": colour(name)}}
        for name, q in fct.items()
    ]
    return {"data": data, "layout": _layout("Flow completion time (CDF)", "FCT (ms)", "fraction of flows")}


def bar_figure(title: str, values: dict[str, float | None], unit: str) -> dict[str, Any]:
    """One bar per strategy."""
    names = list(values)
    return {
        "data": [{"type": "bar", "x": names, "y": [values[n] for n in names],
                  "marker": {"color": [colour(n) for n in names]}}],
        "layout": _layout(title, "strategy", unit),
    }


def grouped_bar_figure(title: str, groups: dict[str, dict[str, float | None]], unit: str) -> dict[str, Any]:
    """Bars per strategy, one colour per group (e.g. per run)."""
    data = [
        {"type": "bar", "name": group, "x": list(values), "y": list(values.values())}
        for group, values in groups.items()
    ]
    return {"data": data, "layout": _layout(title, "strategy", unit, barmode="group")}


def busbw_figure(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Bus bandwidth against message size per strategy (an nccl-tests sweep)."""
    data = [
        {"type": "scatter", "mode": "lines+markers", "name": name,
         "x": [r["size_bytes"] for r in rows], "y": [r["busbw_GBps"] for r in rows],
         "line": {"color": colour(name)}}
        for name, rows in results.items()
    ]
    layout = _layout("Bus bandwidth against message size", "message size (bytes)", "busbw (GB/s)")
    layout["xaxis"]["type"] = "log"
    return {"data": data, "layout": layout}


def log_timeline_figure(timeline: dict[str, Any]) -> dict[str, Any]:
    """Lines per window, and the anomalies flagged, as markers sized by their score."""
    anomalies = timeline["anomalies"]
    data = [
        {"type": "bar", "name": "lines", "x": timeline["windows"], "y": timeline["lines"],
         "marker": {"color": "#9bb7d4"}},
        {"type": "scatter", "mode": "markers", "name": "anomalies", "yaxis": "y2",
         "x": [a["window_start"] for a in anomalies], "y": [a["score"] for a in anomalies],
         "text": [f"{a['kind']} {a['key']}: {a['lines']} lines {a.get('text') or ''}" for a in anomalies],
         "marker": {"color": "#c0392b", "size": 9}},
    ]
    margin = {"l": 60, "r": 70, "t": 40, "b": 50}
    layout = _layout("Lines and anomalies over time", "window", "lines", margin=margin)
    layout["yaxis2"] = {"title": {"text": "surprise (-log10 p)"}, "overlaying": "y", "side": "right"}
    return {"data": data, "layout": layout}


def fabric_figure(fabric: dict[str, Any], suspects: list[dict[str, Any]]) -> dict[str, Any]:
    """The fabric in tiers; the top suspect in red, the next ones in orange."""
    where = {n["name"]: (n["x"], n["y"]) for n in fabric["nodes"]}
    rank = {s["component"]: s["rank"] for s in suspects}
    plain_x: list[float | None] = []
    plain_y: list[float | None] = []
    data: list[dict[str, Any]] = []
    for a, b in fabric["cables"]:
        if a not in where or b not in where:
            continue
        (xa, ya), (xb, yb) = where[a], where[b]
        hit = rank.get(f"{a}-{b}") or rank.get(f"{b}-{a}")
        if hit:
            data.append({"type": "scatter", "mode": "lines", "x": [xa, xb], "y": [ya, yb],
                         "name": f"#{hit} {a}-{b}", "line": _line(hit)})
        else:
            plain_x += [xa, xb, None]
            plain_y += [ya, yb, None]
    data.insert(0, {"type": "scatter", "mode": "lines", "x": plain_x, "y": plain_y, "name": "cables",
                    "hoverinfo": "skip", "line": {"color": "#c8ccd2", "width": 1}, "showlegend": False})
    nodes = fabric["nodes"]
    data.append({
        "type": "scatter", "mode": "markers", "name": "nodes", "showlegend": False,
        "x": [n["x"] for n in nodes], "y": [n["y"] for n in nodes],
        "text": [f"{n['name']} ({n['kind']})" + (f" #{rank[n['name']]}" if n["name"] in rank else "")
                 for n in nodes],
        "hoverinfo": "text",
        "marker": {"size": [14 if n["name"] in rank and rank[n["name"]] <= 3 else 7 for n in nodes],
                   "color": [_colour(rank.get(n["name"])) for n in nodes]},
    })
    layout = {**_LAYOUT, "height": 420, "title": {"text": "Suspects on the fabric (red: most likely)"},
              "xaxis": {"visible": False}, "yaxis": {"visible": False}}
    return {"data": data, "layout": layout}


def _colour(rank: int | None) -> str:
    if rank == 1:
        return "#d62728"
    if rank is not None and rank <= 3:
        return "#ff7f0e"
    return "#5b7fa6"


def _line(rank: int) -> dict[str, Any]:
    return {"color": _colour(rank), "width": 6 if rank == 1 else 3 if rank <= 3 else 1.5}
