"""A plot of migration rounds: each transfer as a bar from its start to its end, height = bytes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cloudtwin.mobility.precopy import MigrationResult

__all__ = ["rounds_figure"]

_COLOURS = {
    "disk": "tab:brown",
    "bulk": "tab:blue",
    "live": "tab:cyan",
    "stop-and-copy": "tab:red",
    "postcopy": "tab:purple",
    "disk-background": "tab:olive",
}
_EVENT_COLOURS = {
    "stalled": "red",
    "re-routed": "darkorange",
    "resumed": "green",
    "clients re-pointed": "grey",
}


def rounds_figure(migrations: Sequence[tuple[str, MigrationResult]]) -> Any:
    """One panel per migration (a VM's name and its result): its transfers over time (the
    stop-and-copy in red), and dashed lines where its path stalled, was re-routed or resumed.
    A matplotlib Figure (Any: matplotlib is imported only when a plot is asked for)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = max(1, len(migrations))
    figure, axes = plt.subplots(rows, 1, figsize=(8, 2.2 * rows), squeeze=False)
    for axis, (vm, result) in zip(axes[:, 0], migrations, strict=False):
        seen: set[str] = set()
        for entry in result.timeline:
            width = max(entry.end_s - entry.start_s, 1e-9)
            label = entry.phase if entry.phase not in seen else None
            seen.add(entry.phase)
            axis.bar(
                entry.start_s,
                entry.bytes / 1e6,
                width=width,
                align="edge",
                color=_COLOURS.get(entry.phase, "grey"),
                edgecolor="black",
                linewidth=0.3,
                label=label,
            )
        for entry in result.timeline:
            for event in entry.path_events or ():
                word = str(event["event"]).split(":")[0]
                colour = _EVENT_COLOURS.get(word, "black")
                axis.axvline(event["time_s"], color=colour, linestyle="--", linewidth=1)
                axis.annotate(
                    word, (event["time_s"], 1), xycoords=("data", "axes fraction"), fontsize=7, va="top"
                )
        status = result.status()
        axis.set_title(
            f"{vm}: {status}, {result.total_time_s:.2f} s, "
            f"downtime {result.downtime_s * 1e3:.0f} ms",
            fontsize=9,
        )
        axis.set_ylabel("MB sent")
        axis.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("time since the migration started (s)")
    figure.tight_layout()
    return figure
