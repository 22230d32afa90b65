"""A plot of a sweep's metric against one varied key: the mean over seeds, with its 95%
confidence interval as error bars, one line per combination of the other varied keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cloudtwin.scenario.units import parse_number
from cloudtwin.sweep.summary import Summary

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_summary"]


def _number(text: str) -> float | None:
    try:
        return parse_number(text)
    except ValueError:
        return None


def plot_summary(summary: Summary, x: str, series_keys: list[str], title: str) -> Figure:
    """The figure (not yet saved); numeric x values are placed as numbers, others in order."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.5))
    axis = figure.add_subplot()
    labels = list(dict.fromkeys(g.values[x] for g in summary.groups))
    numeric = all(_number(v) is not None for v in labels)
    position = {v: (float(v) if numeric else float(i)) for i, v in enumerate(labels)}
    lines: dict[tuple[str, ...], list[tuple[float, float, float, float]]] = {}
    for g in summary.groups:
        series = tuple(g.values[k] for k in series_keys)
        lines.setdefault(series, []).append((position[g.values[x]], g.mean, g.mean - g.low, g.high - g.mean))
    for series, rows in lines.items():
        rows.sort()
        label = ", ".join(f"{k}={v}" for k, v in zip(series_keys, series, strict=True)) or summary.metric
        axis.errorbar(
            [r[0] for r in rows], [r[1] for r in rows], yerr=[[r[2] for r in rows], [r[3] for r in rows]],
            marker="o", capsize=3, label=label, linestyle="-" if numeric else "none",
        )
    if not numeric:
        axis.set_xticks(range(len(labels)), labels, rotation=20)
    axis.set_xlabel(x)
    axis.set_ylabel(f"{summary.metric} (mean, 95% interval)")
    axis.set_title(title)
    axis.grid(alpha=0.3)
    axis.legend()
    return figure
